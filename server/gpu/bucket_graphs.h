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

// Where a row plan's staged graphs read their input and write their output, and the events
// that time their parts.
struct StagedCopies {
  // Pinned host staging as the GPU addresses it (cudaHostGetDevicePointer); row r at
  // r * input_row_bytes (output_row_bytes), in the model's input (output) dtype.
  const void* host_input = nullptr;
  void* host_output = nullptr;
  std::size_t input_row_bytes = 0;
  std::size_t output_row_bytes = 0;
  std::size_t input_capacity_bytes = 0;
  std::size_t output_capacity_bytes = 0;
  // Buckets whose rows in and out add up to more are left out: there the GPU reading and
  // writing host memory a few bytes at a time over PCIe, and rows past the batch's own, would
  // cost more than the launches saved.
  std::size_t max_bytes = 0;
  // Recorded before the input conversion, before the steps, after them, after the output's.
  std::array<cudaEvent_t, 4> events{};
};

// A row plan's whole request for small buckets in one graph: the bucket's rows converted
// straight from pinned host staging into the plan's input, the steps, the output rows converted
// straight into pinned host staging, with timing events between the three. No copy engine takes
// part: a lone request is one launch and one wait, where copy, launch, copy were three host
// calls and two DMA transfers, each a few µs of latency for a few KiB. Rows past the batch's own
// are read and computed too; rows are independent in a row plan, so they reach no real row's
// output.
//
// Thread-safety: used by the one thread that drives its DeviceState.
class StagedGraphs {
 public:
  // `bucket_rows`: each bucket's row count. Fails if a capture fails (the caller then copies
  // around the plain graphs).
  static Result<StagedGraphs> Capture(DeviceState& state, std::span<const std::int64_t> bucket_rows,
                                      const StagedCopies& copies);

  // Whether a bucket of `rows` rows gets a staged graph: its rows in and out within max_bytes
  // and the staging buffers.
  static bool Takes(std::int64_t rows, const StagedCopies& copies);

  bool Has(std::size_t bucket) const { return bucket < graphs_.size() && graphs_[bucket]; }
  // Enqueues bucket's staged graph; Has(bucket) must hold.
  Status Launch(DeviceState& state, std::size_t bucket) const;

 private:
  std::vector<GraphExec> graphs_;  // [bucket]; null where the bucket has none
};

}  // namespace ltserve::gpu
