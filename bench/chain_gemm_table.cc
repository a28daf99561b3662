#include "chain_gemm_table.h"

#include <cuda_profiler_api.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "gpu/chain_gemm.h"
#include "gpu/cuda_resources.h"
#include "gpu/gemm.h"
#include "gpu/kernels.h"

namespace ltserve_bench {
namespace {

using namespace ltserve::gpu;
using ltserve::plan::Activation;

struct Chain {
  const char* name;
  std::vector<std::int64_t> widths;  // input, then each layer's output
  Activation hidden;                 // every layer but the last; the last has none
};

int Fail(const std::string& what, const ltserve::Status& status) {
  std::fprintf(stderr, "layer-chain table: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

cublasLtEpilogue_t EpilogueFor(Activation act) {
  return act == Activation::kRelu       ? CUBLASLT_EPILOGUE_RELU_BIAS
         : act == Activation::kGeluTanh ? CUBLASLT_EPILOGUE_GELU_BIAS
                                        : CUBLASLT_EPILOGUE_BIAS;
}

// One chain's device buffers: weights, biases, activations, the chain's scratch.
struct ChainBuffers {
  std::vector<DeviceBuffer> weights, biases, values;
  DeviceBuffer scratch;
  std::vector<ChainLayer> layers;
};

ltserve::Result<ChainBuffers> Allocate(const Chain& chain, std::int64_t max_rows, int sm_count,
                                       cudaStream_t s) {
  ChainBuffers b;
  const std::size_t count = chain.widths.size() - 1;
  for (std::size_t v = 0; v <= count; ++v) {
    LTSERVE_ASSIGN_OR_RETURN(DeviceBuffer value,
                             DeviceBuffer::Create(max_rows * chain.widths[v] * 2, "value"));
    LaunchFillRandom(value.data(), ElemType::kBf16, value.bytes() / 2, 100 + v, s);
    b.values.push_back(std::move(value));
  }
  for (std::size_t l = 0; l < count; ++l) {
    const std::int64_t k = chain.widths[l];
    const std::int64_t n = chain.widths[l + 1];
    LTSERVE_ASSIGN_OR_RETURN(DeviceBuffer w, DeviceBuffer::Create(n * k * 2, "weights"));
    LTSERVE_ASSIGN_OR_RETURN(DeviceBuffer bias, DeviceBuffer::Create(n * 2, "bias"));
    LaunchFillRandom(w.data(), ElemType::kBf16, w.bytes() / 2, 1 + l, s);
    LaunchFillRandom(bias.data(), ElemType::kBf16, bias.bytes() / 2, 50 + l, s);
    ChainLayer layer;
    layer.weight = w.data();
    layer.bias = bias.data();
    layer.output = b.values[l + 1].data();
    layer.in_features = k;
    layer.out_features = n;
    layer.act = l + 1 < count ? chain.hidden : Activation::kNone;
    b.layers.push_back(layer);
    b.weights.push_back(std::move(w));
    b.biases.push_back(std::move(bias));
  }
  LTSERVE_ASSIGN_OR_RETURN(
      b.scratch, DeviceBuffer::Create(ChainGemmScratchBytes(b.layers.data(), count, sm_count),
                                      "chain scratch"));
  cudaMemsetAsync(b.scratch.data(), 0, b.scratch.bytes(), s);
  return b;
}

ltserve::Status RunChain(const ChainGemmConfig& config, ChainBuffers& b, std::int64_t rows,
                         int sm_count, cudaStream_t s, std::uint64_t* ring_trace = nullptr) {
  const cudaError_t error =
      LaunchChainGemm(config, b.values[0].data(), b.layers.data(), b.layers.size(), rows,
                      ElemType::kBf16, b.scratch.data(), b.scratch.bytes(), sm_count, false, s,
                      ring_trace);
  if (error != cudaSuccess) {
    return ltserve::Internal(config.Describe() + ": " + cudaGetErrorString(error));
  }
  return ltserve::Status::Ok();
}

}  // namespace

int PrintChainGemmTable(double copy_tbps, bool profile) {
  const Chain chains[] = {{"MLP 1024-4096-4096-1024 ReLU", {1024, 4096, 4096, 1024}, Activation::kRelu},
                          {"BERT FFN 768-3072-768 GELU", {768, 3072, 768}, Activation::kGeluTanh},
                          {"FFN 4096-16384-4096 GELU", {4096, 16384, 4096}, Activation::kGeluTanh}};
  const std::int64_t row_counts[] = {1, 8, 16, 32};
  constexpr std::size_t kWorkspace = std::size_t{32} << 20;
  auto stream = CreateStream();
  auto handle = CreateLtHandle();
  if (!stream.ok() || !handle.ok()) return Fail("stream or handle", stream.status());
  int device = 0;
  int l2 = 0;
  int sm_count = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device);
  cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  auto flush = DeviceBuffer::Create(2 * static_cast<std::size_t>(l2), "flush");
  auto workspace = DeviceBuffer::Create(kWorkspace, "workspace");
  if (!flush.ok() || !workspace.ok()) return Fail("buffers", flush.status());
  cudaStream_t s = stream.value().get();
  cudaMemsetAsync(flush.value().data(), 0, flush.value().bytes(), s);

  if (profile) {
    auto b = Allocate(chains[0], 32, sm_count, s);
    if (!b.ok()) return Fail("buffers", b.status());
    for (const std::int64_t rows : {1, 32}) {
      for (const ChainGemmConfig& config : ChainGemmCandidates(rows)) {
        if (auto status = RunChain(config, b.value(), rows, sm_count, s); !status.ok()) {
          return Fail("warm-up", status);
        }
      }
    }
    cudaStreamSynchronize(s);
    cudaProfilerStart();
    for (const std::int64_t rows : {1, 32}) {
      for (const ChainGemmConfig& config : ChainGemmCandidates(rows)) {
        std::printf("profiled: MLP, %ld rows, %s\n", static_cast<long>(rows), config.Describe().c_str());
        if (auto status = RunChain(config, b.value(), rows, sm_count, s); !status.ok()) {
          return Fail("profiled run", status);
        }
        cudaStreamSynchronize(s);
      }
    }
    cudaProfilerStop();
    return 0;
  }

  std::printf("\nLayer chains, bf16, L2 emptied before each run (median of 9): the layers one "
              "kernel each (cuBLASLt's first heuristic algorithm, bias and activation fused) "
              "against every configuration of the layer-chain kernel; floor = weight bytes / "
              "%.2f TB/s.\n\n", copy_tbps);
  std::printf("| chain | rows | floor µs | layers one by one µs | best warp schedule µs | its "
              "configuration | best ring µs | its configuration | worst chain µs | best warp / one "
              "by one | best ring / one by one |\n"
              "|---|---:|---:|---:|---:|---|---:|---|---:|---:|---:|\n");
  for (const Chain& chain : chains) {
    auto b = Allocate(chain, 32, sm_count, s);
    if (!b.ok()) return Fail("buffers", b.status());
    double weight_bytes = 0;
    for (const ChainLayer& layer : b.value().layers) {
      weight_bytes += 2.0 * layer.in_features * layer.out_features;
    }
    for (const std::int64_t rows : row_counts) {
      std::vector<Gemm> gemms;
      std::vector<cublasLtMatmulAlgo_t> algos;
      for (const ChainLayer& layer : b.value().layers) {
        const GemmShape shape{rows, layer.out_features, layer.in_features, EpilogueFor(layer.act), false};
        auto gemm = Gemm::Create(ltserve::Precision::kBf16, shape);
        if (!gemm.ok()) return Fail("Gemm::Create", gemm.status());
        auto candidates = gemm.value().Candidates(handle.value().get(), kWorkspace, 1);
        if (!candidates.ok() || candidates.value().empty()) return Fail("heuristic", candidates.status());
        algos.push_back(candidates.value().front());
        gemms.push_back(std::move(gemm.value()));
      }
      auto layers_ms = TimeColdOnStream([&]() -> ltserve::Status {
        for (std::size_t l = 0; l < gemms.size(); ++l) {
          const ChainLayer& layer = b.value().layers[l];
          const GemmOperands operands{layer.weight, b.value().values[l].data(), layer.bias,
                                      nullptr, layer.output};
          LTSERVE_RETURN_IF_ERROR(gemms[l].RunWith(algos[l], handle.value().get(), operands,
                                                   workspace.value().data(), kWorkspace, s));
        }
        return ltserve::Status::Ok();
      }, flush.value(), s);
      if (!layers_ms.ok()) return Fail("cuBLASLt layers", layers_ms.status());
      // Per schedule: [0] the warp schedule, [1] the ring.
      float best[2] = {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity()};
      std::string best_config[2] = {"none ran", "none ran"};
      float worst = 0;
      for (const ChainGemmConfig& config : ChainGemmCandidates(rows)) {
        auto ms = TimeColdOnStream([&] { return RunChain(config, b.value(), rows, sm_count, s); },
                                   flush.value(), s);
        if (!ms.ok()) {  // left out, as the load leaves out a kernel that fails to launch
          std::fprintf(stderr, "%s, %ld rows, %s: %s\n", chain.name, static_cast<long>(rows),
                       config.Describe().c_str(), ms.status().message().c_str());
          continue;
        }
        std::fprintf(stderr, "%s, %ld rows, %s: %.1f µs\n", chain.name, static_cast<long>(rows),
                     config.Describe().c_str(), 1000.0 * ms.value());
        const int schedule = config.ring() ? 1 : 0;
        if (ms.value() < best[schedule]) {
          best[schedule] = ms.value();
          best_config[schedule] = config.Describe();
        }
        worst = std::max(worst, ms.value());
      }
      std::printf("| %s | %ld | %.1f | %.1f | %.1f | %s | %.1f | %s | %.1f | %.2f | %.2f |\n",
                  chain.name, static_cast<long>(rows), weight_bytes / (copy_tbps * 1e6),
                  1000.0 * layers_ms.value(), 1000.0 * best[0], best_config[0].c_str(),
                  1000.0 * best[1], best_config[1].c_str(), 1000.0 * worst,
                  best[0] / layers_ms.value(), best[1] / layers_ms.value());
      std::fflush(stdout);
    }
  }
  return 0;
}

int PrintChainRingTrace() {
  const Chain mlp{"MLP 1024-4096-4096-1024 ReLU", {1024, 4096, 4096, 1024}, Activation::kRelu};
  auto stream = CreateStream();
  if (!stream.ok()) return Fail("stream", stream.status());
  cudaStream_t s = stream.value().get();
  int device = 0;
  int sm_count = 0;
  int clock_khz = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device);
  auto b = Allocate(mlp, 32, sm_count, s);
  if (!b.ok()) return Fail("buffers", b.status());
  const std::size_t layers = b.value().layers.size();
  const std::int64_t units = ChainTraceUnits(b.value().layers.data(), layers);
  auto trace = DeviceBuffer::Create(static_cast<std::size_t>(units) * kChainTraceFields * 8, "trace");
  if (!trace.ok()) return Fail("trace", trace.status());
  std::vector<std::uint64_t> host(static_cast<std::size_t>(units) * kChainTraceFields);
  // Cycles of the SM clock as µs at the GPU's rated clock (the clock it holds while it runs
  // these kernels in bursts).
  const double us_per_cycle = 1e3 / clock_khz;
  std::printf("\nThe ring schedule's units, %s, bf16, one launch after a warm-up; per layer: "
              "units, first start and last end (µs from the first unit's start, %%globaltimer), "
              "then the medians of a unit's phases in µs (SM clock cycles at %d MHz): waiting for "
              "its inputs, staging X, waiting for its first weights, multiplying until its warps' "
              "sums are added, finishing (outputs or partial sums, the last slice's sum).\n\n",
              mlp.name, clock_khz / 1000);
  std::printf("| rows | configuration | layer | units | first start µs | last end µs | inputs "
              "µs | X µs | first weights µs | multiply µs | finish µs |\n"
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const std::int64_t rows : {1, 8}) {
    for (const ChainGemmConfig& config : ChainGemmCandidates(rows)) {
      if (!config.ring()) continue;
      cudaMemsetAsync(trace.value().data(), 0, trace.value().bytes(), s);
      auto* t = reinterpret_cast<std::uint64_t*>(trace.value().data());
      if (auto status = RunChain(config, b.value(), rows, sm_count, s); !status.ok()) {
        return Fail("warm-up", status);
      }
      if (auto status = RunChain(config, b.value(), rows, sm_count, s, t); !status.ok()) {
        return Fail("traced run", status);
      }
      if (cudaMemcpyAsync(host.data(), t, trace.value().bytes(), cudaMemcpyDeviceToHost, s) !=
              cudaSuccess ||
          cudaStreamSynchronize(s) != cudaSuccess) {
        return Fail("trace copy", ltserve::Internal("cudaMemcpy"));
      }
      // Units the launch had: those whose start was stamped.
      std::uint64_t origin = std::numeric_limits<std::uint64_t>::max();
      for (std::int64_t u = 0; u < units; ++u) {
        const std::uint64_t* f = &host[static_cast<std::size_t>(u * kChainTraceFields)];
        if (f[2] != 0) origin = std::min(origin, f[1]);
      }
      for (std::size_t l = 0; l < layers; ++l) {
        std::vector<double> phase[5];
        double first = std::numeric_limits<double>::infinity();
        double last = 0;
        for (std::int64_t u = 0; u < units; ++u) {
          const std::uint64_t* f = &host[static_cast<std::size_t>(u * kChainTraceFields)];
          if (f[2] == 0 || (f[0] >> 32) != l) continue;
          const double start = static_cast<double>(f[1] - origin) / 1e3;
          first = std::min(first, start);
          last = std::max(last, start + static_cast<double>(f[7] - f[2]) * us_per_cycle);
          for (int p = 0; p < 5; ++p) {
            phase[p].push_back(static_cast<double>(f[3 + p] - f[2 + p]) * us_per_cycle);
          }
        }
        const auto median = [](std::vector<double>& v) {
          if (v.empty()) return 0.0;
          std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
          return v[v.size() / 2];
        };
        const std::size_t count = phase[0].size();
        std::printf("| %ld | %s | %zu | %zu | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
                    static_cast<long>(rows), config.Describe().c_str(), l, count,
                    count > 0 ? first : 0.0, last, median(phase[0]), median(phase[1]),
                    median(phase[2]), median(phase[3]), median(phase[4]));
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace ltserve_bench
