#include "skinny_gemm_table.h"

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "gpu/cuda_resources.h"
#include "gpu/gemm.h"
#include "gpu/kernels.h"
#include "gpu/skinny_gemm.h"

namespace ltserve_bench {
namespace {

using namespace ltserve::gpu;

struct Layer {
  const char* model;
  std::int64_t k, n;
};

// Enqueues the cuBLASLt matmul (bias epilogue, the heuristic's first algorithm) or fails.
struct CublasLtRun {
  Gemm gemm;
  cublasLtMatmulAlgo_t algo;
};

int Fail(const std::string& what, const ltserve::Status& status) {
  std::fprintf(stderr, "skinny GEMM table: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

}  // namespace

int PrintSkinnyGemmTable(double copy_tbps) {
  const Layer layers[] = {{"MLP", 1024, 4096}, {"MLP", 4096, 4096}, {"MLP", 4096, 1024},
                          {"BERT", 768, 2304}, {"BERT", 768, 768},  {"BERT", 768, 3072},
                          {"BERT", 3072, 768}};
  const std::int64_t row_counts[] = {1, 8, 32, 128};
  constexpr std::size_t kWorkspace = std::size_t{32} << 20;
  auto stream = CreateStream();
  auto handle = CreateLtHandle();
  if (!stream.ok() || !handle.ok()) return Fail("stream or handle", stream.status());
  int device = 0;
  int l2 = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device);
  auto flush = DeviceBuffer::Create(2 * static_cast<std::size_t>(l2), "flush");
  auto workspace = DeviceBuffer::Create(kWorkspace, "workspace");
  auto w = DeviceBuffer::Create(std::size_t{4096} * 4096 * 2, "weights");
  auto x = DeviceBuffer::Create(std::size_t{128} * 4096 * 2, "x");
  auto bias = DeviceBuffer::Create(std::size_t{4096} * 2, "bias");
  auto y = DeviceBuffer::Create(std::size_t{128} * 4096 * 2, "y");
  if (!flush.ok() || !workspace.ok() || !w.ok() || !x.ok() || !bias.ok() || !y.ok()) {
    return Fail("buffers", flush.status());
  }
  cudaStream_t s = stream.value().get();
  cudaMemsetAsync(flush.value().data(), 0, flush.value().bytes(), s);
  LaunchFillRandom(w.value().data(), ElemType::kBf16, w.value().bytes() / 2, 1, s);
  LaunchFillRandom(x.value().data(), ElemType::kBf16, x.value().bytes() / 2, 2, s);
  LaunchFillRandom(bias.value().data(), ElemType::kBf16, bias.value().bytes() / 2, 3, s);

  std::printf("\nOne GEMM at a time, bf16, bias epilogue, L2 emptied before each run (median of "
              "9): cuBLASLt's first heuristic algorithm against every split-K candidate; floor = "
              "weight bytes / %.2f TB/s.\n\n", copy_tbps);
  std::printf("| layer | rows | floor µs | cuBLASLt µs | best split-K µs | its configuration | "
              "worst split-K µs | best / cuBLASLt |\n|---|---:|---:|---:|---:|---|---:|---:|\n");
  for (const Layer& layer : layers) {
    for (const std::int64_t rows : row_counts) {
      const GemmShape shape{rows, layer.n, layer.k, CUBLASLT_EPILOGUE_BIAS, false};
      auto gemm = Gemm::Create(ltserve::Precision::kBf16, shape);
      if (!gemm.ok()) return Fail("Gemm::Create", gemm.status());
      auto algos = gemm.value().Candidates(handle.value().get(), kWorkspace, 1);
      if (!algos.ok() || algos.value().empty()) return Fail("heuristic", algos.status());
      const GemmOperands operands{w.value().data(), x.value().data(), bias.value().data(),
                                  nullptr, y.value().data()};
      auto cublas_ms = TimeColdOnStream([&] {
        return gemm.value().RunWith(algos.value().front(), handle.value().get(), operands,
                                    workspace.value().data(), kWorkspace, s);
      }, flush.value(), s);
      if (!cublas_ms.ok()) return Fail("cuBLASLt run", cublas_ms.status());
      float best = std::numeric_limits<float>::infinity();
      float worst = 0;
      std::string best_config = "none ran";
      for (const SkinnyGemmConfig& config : SkinnyGemmCandidates(rows, layer.n, layer.k)) {
        auto ms = TimeColdOnStream([&]() -> ltserve::Status {
          const cudaError_t error = LaunchSkinnyGemm(
              config, x.value().data(), w.value().data(), bias.value().data(), nullptr,
              y.value().data(), rows, layer.n, layer.k, ltserve::plan::Activation::kNone,
              ElemType::kBf16, /*programmatic=*/false, s);
          if (error != cudaSuccess) {
            return ltserve::Internal(config.Describe() + ": " + cudaGetErrorString(error));
          }
          return ltserve::Status::Ok();
        }, flush.value(), s);
        if (!ms.ok()) return Fail("split-K run", ms.status());
        if (ms.value() < best) {
          best = ms.value();
          best_config = config.Describe();
        }
        worst = std::max(worst, ms.value());
      }
      const double floor_us = 2.0 * layer.k * layer.n / (copy_tbps * 1e6);
      std::printf("| %s %ld->%ld | %ld | %.1f | %.1f | %.1f | %s | %.1f | %.2f |\n", layer.model,
                  static_cast<long>(layer.k), static_cast<long>(layer.n), static_cast<long>(rows),
                  floor_us, 1000.0 * cublas_ms.value(), 1000.0 * best, best_config.c_str(),
                  1000.0 * worst, best / cublas_ms.value());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace ltserve_bench
