// A DeviceState's forward pass for every bucket, warmed up once eagerly and, when the model's
// cuda_graphs option is on, captured as one CUDA graph per bucket. Serving instances and the
// benchmarks' timers replay the same graphs, so what the benchmarks time is what serves.
//
// Thread-safety: used by the one thread that drives its DeviceState.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <vector>

#include "common/status.h"
#include "gpu/cuda_resources.h"
#include "gpu/device_state.h"

namespace ltserve::gpu {

class BucketGraphs {
 public:
  // One eager pass per bucket first: it loads kernels and lets cuBLASLt finish its lazy setup,
  // neither of which may happen under capture.
  static Result<BucketGraphs> Capture(DeviceState& state, std::size_t buckets, bool cuda_graphs);

  // Enqueues bucket's forward pass on the state's stream: its graph, or eagerly without graphs.
  Status Launch(DeviceState& state, std::size_t bucket) const;

 private:
  std::vector<GraphExec> graphs_;  // [bucket]; empty when graphs are off
};

// Where a row plan's staged graphs copy from and to, and the events that time their parts.
struct StagedCopies {
  const void* host_input = nullptr;  // pinned; row r at r * input_row_bytes
  void* host_output = nullptr;       // pinned, output_capacity_bytes long
  std::size_t input_row_bytes = 0;
  std::size_t output_row_bytes = 0;
  std::size_t input_capacity_bytes = 0;
  std::size_t output_capacity_bytes = 0;
  // Buckets whose rows in and out add up to more are left out: copying a whole bucket's rows
  // for fewer real ones then costs more than the launches it saves.
  std::size_t max_bytes = 0;
  // Recorded before the copy in, before the forward pass, after it, after the copy out.
  std::array<cudaEvent_t, 4> events{};
};

// A row plan's whole request for small buckets in one graph: the bucket's rows of host staging
// copied in, the forward pass, its output rows copied back, with timing events between them.
// Replayed as one launch, it replaces copy, launch, copy: three host calls, and the GPU idle
// between them while each call reaches it. Rows past the batch's own are copied and computed
// too; rows are independent in a row plan, so they reach no real row's output.
//
// Thread-safety: used by the one thread that drives its DeviceState.
class StagedGraphs {
 public:
  // `bucket_rows`: each bucket's row count. Fails if a capture fails (the caller then copies
  // around the plain graphs).
  static Result<StagedGraphs> Capture(DeviceState& state, std::span<const std::int64_t> bucket_rows,
                                      const StagedCopies& copies);

  bool Has(std::size_t bucket) const { return bucket < graphs_.size() && graphs_[bucket]; }
  // How many buckets have one.
  std::size_t count() const;
  // Enqueues bucket's staged graph; Has(bucket) must hold.
  Status Launch(DeviceState& state, std::size_t bucket) const;

 private:
  std::vector<GraphExec> graphs_;  // [bucket]; null where the bucket has none
};

}  // namespace ltserve::gpu
