#include "torch/aten_threads.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

namespace ltserve::aten {
namespace {

struct Decided {
  std::mutex mutex;
  bool defaults_applied = false;
  std::optional<int> intra_op;  // set by the model named in intra_op_model
  std::string intra_op_model;
  std::optional<int> inter_op;
  std::string inter_op_model;
};

Decided& State() {
  static Decided decided;
  return decided;
}

// Bumped whenever the intra-op size changes, so that running threads can follow.
std::atomic<int> intra_op_generation{0};
std::atomic<int> intra_op_size{0};

void SetIntraOp(int threads) {
  at::set_num_threads(threads);
  intra_op_size.store(threads);
  intra_op_generation.fetch_add(1);
}

std::string NotApplied(const char* key, int asked, const std::string& decider, int in_force) {
  return std::string(key) + " " + std::to_string(asked) + " not applied: model '" + decider +
         "' set " + std::to_string(in_force) + " first, for the whole process";
}

}  // namespace

AtenThreadCounts ConfigureThreads(const std::string& model, std::optional<int> intra_op,
                                  std::optional<int> inter_op) {
  Decided& decided = State();
  std::lock_guard lock(decided.mutex);
  std::string note;
  if (intra_op.has_value()) {
    if (!decided.intra_op.has_value()) {
      decided.intra_op = intra_op;
      decided.intra_op_model = model;
      SetIntraOp(*intra_op);
    } else if (*decided.intra_op != *intra_op) {
      note = NotApplied("INTRA_OP_THREAD_COUNT", *intra_op, decided.intra_op_model,
                        *decided.intra_op);
    }
  } else if (!decided.defaults_applied) {  // and so no model has set it yet
    SetIntraOp(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  }
  decided.defaults_applied = true;
  if (inter_op.has_value()) {
    if (!decided.inter_op.has_value()) {
      try {
        // ATen refuses once its inter-op pool has started (a TorchScript fork ran).
        at::set_num_interop_threads(*inter_op);
        decided.inter_op = inter_op;
        decided.inter_op_model = model;
      } catch (const c10::Error&) {
        note += std::string(note.empty() ? "" : "; ") + "INTER_OP_THREAD_COUNT " +
                std::to_string(*inter_op) +
                " not applied: ATen's inter-op pool had already started";
      }
    } else if (*decided.inter_op != *inter_op) {
      note += std::string(note.empty() ? "" : "; ") +
              NotApplied("INTER_OP_THREAD_COUNT", *inter_op, decided.inter_op_model,
                         *decided.inter_op);
    }
  }
  return {intra_op_size.load(), note};
}

void FollowIntraOpThreads() {
  thread_local int seen = 0;
  const int generation = intra_op_generation.load(std::memory_order_acquire);
  if (generation == seen) return;
  seen = generation;
  at::set_num_threads(intra_op_size.load());
}

}  // namespace ltserve::aten
