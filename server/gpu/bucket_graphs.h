// A DeviceState's forward pass for every bucket, warmed up once eagerly and, when the model's
// cuda_graphs option is on, captured as one CUDA graph per bucket. Serving instances and the
// benchmarks' timers replay the same graphs, so what the benchmarks time is what serves.
//
// Thread-safety: used by the one thread that drives its DeviceState.
#pragma once

#include <cstddef>
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

}  // namespace ltserve::gpu
