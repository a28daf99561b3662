// What the one-GEMM-at-a-time tables share (skinny_gemm_table.cc, cutlass_gemm_table.cc): a
// stream, a cuBLASLt handle with its workspace and an L2 flush buffer; each candidate
// configuration timed alone with the L2 emptied (as the executor's tuner times them); and a
// pass of steps captured as one graph and timed the same way.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gpu/cuda_check.h"
#include "gpu/cuda_resources.h"
#include "gpu/gemm.h"

namespace ltserve_bench {

inline ltserve::Status Launched(cudaError_t error, const std::string& what) {
  if (error != cudaSuccess) return ltserve::Internal(what + ": " + cudaGetErrorString(error));
  return ltserve::Status::Ok();
}

// The fastest and slowest of `configs`, each timed alone with the L2 emptied; `launch(config)`
// enqueues one run. Each configuration's time goes to stderr, and into `each_ms` in order.
template <typename Config>
struct Timed {
  float best_ms = std::numeric_limits<float>::infinity();
  float worst_ms = 0;
  std::optional<Config> best;
  std::vector<float> each_ms;
};
template <typename Config, typename Launch>
ltserve::Result<Timed<Config>> TimeEach(const std::vector<Config>& configs, Launch&& launch,
                                        const ltserve::gpu::DeviceBuffer& flush, cudaStream_t s) {
  Timed<Config> timed;
  for (const Config& config : configs) {
    LTSERVE_ASSIGN_OR_RETURN(const float ms, ltserve::gpu::TimeColdOnStream([&] {
      return Launched(launch(config), config.Describe());
    }, flush, s));
    std::fprintf(stderr, "  %s: %.1f us\n", config.Describe().c_str(), 1000.0 * ms);
    timed.each_ms.push_back(ms);
    if (ms < timed.best_ms) {
      timed.best_ms = ms;
      timed.best = config;
    }
    timed.worst_ms = std::max(timed.worst_ms, ms);
  }
  return timed;
}

// One step of a pass: enqueues its kernel, launched programmatically if asked.
using PassStep = std::function<ltserve::Status(bool programmatic)>;

// `steps` captured as one graph, each but the first launched programmatically where
// `programmatic`, and timed as TimeColdOnStream times: the L2 emptied before each replay.
inline ltserve::Result<float> TimePassCold(const std::vector<PassStep>& steps, bool programmatic,
                                           const ltserve::gpu::DeviceBuffer& flush,
                                           cudaStream_t s) {
  LTSERVE_ASSIGN_OR_RETURN(ltserve::gpu::GraphExec graph,
                           ltserve::gpu::CaptureGraph(s, [&]() -> ltserve::Status {
    for (std::size_t i = 0; i < steps.size(); ++i) {
      LTSERVE_RETURN_IF_ERROR(steps[i](programmatic && i > 0));
    }
    return ltserve::Status::Ok();
  }));
  return ltserve::gpu::TimeColdOnStream([&] {
    return Launched(cudaGraphLaunch(graph.get(), s), "graph launch");
  }, flush, s);
}

inline constexpr std::size_t kTableWorkspace = std::size_t{32} << 20;

// What the tables time with: a stream, a cuBLASLt handle and its workspace (kTableWorkspace),
// and a buffer of twice the L2, zeroed, that TimeColdOnStream reads before each timed run.
struct TableDevice {
  ltserve::gpu::Stream stream;
  ltserve::gpu::LtHandle handle;
  ltserve::gpu::DeviceBuffer flush;
  ltserve::gpu::DeviceBuffer workspace;

  static ltserve::Result<TableDevice> Create() {
    TableDevice d;
    LTSERVE_ASSIGN_OR_RETURN(d.stream, ltserve::gpu::CreateStream());
    LTSERVE_ASSIGN_OR_RETURN(d.handle, ltserve::gpu::CreateLtHandle());
    int device = 0;
    int l2 = 0;
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    LTSERVE_ASSIGN_OR_RETURN(
        d.flush, ltserve::gpu::DeviceBuffer::Create(2 * static_cast<std::size_t>(l2), "flush"));
    LTSERVE_ASSIGN_OR_RETURN(d.workspace,
                             ltserve::gpu::DeviceBuffer::Create(kTableWorkspace, "workspace"));
    LTSERVE_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(d.flush.data(), 0, d.flush.bytes(), d.stream.get()));
    return d;
  }
};

inline int SmCount() {
  int device = 0;
  int sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return sms;
}

}  // namespace ltserve_bench
