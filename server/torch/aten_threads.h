// ATen's thread pools, sized from the models' INTRA_OP_THREAD_COUNT and INTER_OP_THREAD_COUNT
// (Triton's PyTorch-backend keys, ModelOptions::intra_op_threads / inter_op_threads). The
// pools are process-wide, so one model's setting is every model's: as in Triton, the first
// model loaded that sets a key decides, and a later different value is not applied (the model's
// load line says so). Without any setting the intra-op pool takes every core, as before, and
// the inter-op pool keeps ATen's default.
//
// Thread-safety: both functions may be called from any thread concurrently.
#pragma once

#include <optional>
#include <string>

namespace ltserve::aten {

struct AtenThreadCounts {
  int intra_op = 0;  // the intra-op pool's size in force after the call
  std::string note;  // empty, or why a count `model` asked for is not the one in force

  // For the load line: "1 thread", "4 threads", and the note after a "; " when there is one.
  std::string Describe() const {
    return std::to_string(intra_op) + (intra_op == 1 ? " thread" : " threads") +
           (note.empty() ? "" : "; " + note);
  }
};

// Called at each model's load, before its first forward.
AtenThreadCounts ConfigureThreads(const std::string& model, std::optional<int> intra_op,
                                  std::optional<int> inter_op);

// Called by a thread before it runs ATen work: ATen reads the intra-op size into each thread
// once, the first time it runs a parallel op, so a thread that started before a model changed
// it would go on with the old size. One atomic load when nothing changed.
void FollowIntraOpThreads();

}  // namespace ltserve::aten
