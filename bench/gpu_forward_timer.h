// What the GPU benchmarks time of ltserve's executor: device time of its forward pass, replayed
// from the same per-bucket CUDA graphs a serving instance replays, with inputs already on the
// device; and, for a token model, where an eager pass spends its time step by step. Benchmark
// code only: the serving instances carry no timing hooks.
//
// Thread-safety: one thread drives a timer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "gpu/bucket_graphs.h"
#include "gpu/cuda_resources.h"
#include "gpu/device_state.h"
#include "gpu/gpu_model.h"

namespace ltserve_bench {

// Mean device time of one kind of step over an eager pass: "gemm", "attention", "layernorm",
// "embedding", "pooling", "l2-normalize" or "pointwise"; CUDA events between steps, so each step also carries its launch gap.
struct StepTime {
  std::string kind;
  double us = 0;
};

class GpuForwardTimer {
 public:
  // Buffers, stream and graphs of its own over `model` (tuned), beside any serving instance.
  // `halves_on_one_stream`: buckets the model runs as two halves run them one after the other
  // on one stream (DeviceState::set_halves_on_one_stream).
  static ltserve::Result<std::unique_ptr<GpuForwardTimer>> Create(
      std::shared_ptr<const ltserve::gpu::GpuModel> model, bool halves_on_one_stream = false);

  // Mean µs of `iterations` back-to-back passes at `rows` rows (the bucket's graph; for a
  // pooled plan the bucket holding `sequences` too).
  ltserve::Result<double> TimeForward(std::int64_t rows, int iterations, std::int64_t sequences = 0);
  // Mean µs of `iterations` single passes at `rows` rows, each launched and then waited for by
  // the host (cudaStreamSynchronize): what one lone request's forward pass costs the host.
  ltserve::Result<double> TimeLaunchAndWait(std::int64_t rows, int iterations);
  // Mean µs of an event recorded on the idle stream and waited for: the host's bare round trip
  // to the GPU and back.
  ltserve::Result<double> TimeRoundTrip(int iterations);
  // One pass at `rows` rows launched alone `iterations` times, `before` run ahead of each (what
  // the host does between requests): per pass the host's µs in the launch call, in the wait
  // that follows, and the device's µs between events on either side of the graph.
  struct LoneLaunch {
    std::vector<double> launch_us, wait_us, device_us;
  };
  ltserve::Result<LoneLaunch> TimeLoneLaunches(std::int64_t rows, int iterations,
                                               const std::function<void()>& before);
  // The same for a token model over sequences of `lengths` tokens, packed.
  ltserve::Result<double> TimeTokenForward(std::span<const std::int32_t> lengths, int iterations);
  // A token-id plan: fills the device's token inputs (ids, positions, types) with values uniform
  // in [0, bound), so the embedding gathers random table rows as real ids do (the kernel
  // clamps each into its table).
  ltserve::Status FillTokenIds(std::int32_t bound, std::uint64_t seed);
  // Per step (plan order), mean µs over `iterations` eager passes.
  ltserve::Result<std::vector<StepTime>> ProfileTokenForward(std::span<const std::int32_t> lengths,
                                                             int iterations);

 private:
  GpuForwardTimer() = default;
  ltserve::Result<std::int64_t> TokenRows(std::span<const std::int32_t> lengths) const;

  std::shared_ptr<const ltserve::gpu::GpuModel> model_;
  std::unique_ptr<ltserve::gpu::DeviceState> state_;
  ltserve::gpu::BucketGraphs graphs_;
  ltserve::gpu::Event start_;
  ltserve::gpu::Event stop_;
};

}  // namespace ltserve_bench
