#include "norm_gemm_table.h"

#include <cuda_profiler_api.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>

#include "gpu/cuda_resources.h"
#include "gpu/gemm.h"
#include "gpu/kernels.h"
#include "gpu/norm_gemm.h"

namespace ltserve_bench {
namespace {

using namespace ltserve::gpu;

int Fail(const std::string& what, const ltserve::Status& status) {
  std::fprintf(stderr, "GEMM + LayerNorm table: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

ltserve::Status Check(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return ltserve::Status::Ok();
  return ltserve::Internal(what + ": " + cudaGetErrorString(error));
}

}  // namespace

int PrintNormGemmTable(double copy_tbps, bool profile) {
  struct Shape {
    std::int64_t k, n;
  };
  const Shape shapes[] = {{768, 768}, {3072, 768}};
  const std::int64_t row_counts[] = {1, 8, 32, 128, 256, 512};
  constexpr std::int64_t kMaxRows = 512;
  constexpr float kEps = 1e-12f;
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
  auto w = DeviceBuffer::Create(std::size_t{3072} * 768 * 2, "weights");
  auto x = DeviceBuffer::Create(std::size_t{kMaxRows} * 3072 * 2, "x");
  auto bias = DeviceBuffer::Create(std::size_t{768} * 2, "bias");
  auto residual = DeviceBuffer::Create(std::size_t{kMaxRows} * 768 * 2, "residual");
  auto affine = DeviceBuffer::Create(std::size_t{2} * 768 * 4, "gamma and beta");
  auto h = DeviceBuffer::Create(std::size_t{kMaxRows} * 768 * 2, "pre-norm");
  auto y = DeviceBuffer::Create(std::size_t{kMaxRows} * 768 * 2, "y");
  auto counters = DeviceBuffer::Create(kNormGemmMaxRowTiles * sizeof(int), "row-tile counters");
  if (!flush.ok() || !workspace.ok() || !w.ok() || !x.ok() || !bias.ok() || !residual.ok() ||
      !affine.ok() || !h.ok() || !y.ok() || !counters.ok()) {
    return Fail("buffers", flush.status());
  }
  cudaStream_t s = stream.value().get();
  cudaMemsetAsync(counters.value().data(), 0, counters.value().bytes(), s);
  cudaMemsetAsync(flush.value().data(), 0, flush.value().bytes(), s);
  LaunchFillRandom(w.value().data(), ElemType::kBf16, w.value().bytes() / 2, 1, s);
  LaunchFillRandom(x.value().data(), ElemType::kBf16, x.value().bytes() / 2, 2, s);
  LaunchFillRandom(bias.value().data(), ElemType::kBf16, bias.value().bytes() / 2, 3, s);
  LaunchFillRandom(residual.value().data(), ElemType::kBf16, residual.value().bytes() / 2, 4, s);
  LaunchFillRandom(affine.value().data(), ElemType::kFp32, affine.value().bytes() / 4, 5, s);
  const auto* gamma = reinterpret_cast<const float*>(affine.value().data());
  const float* beta = gamma + 768;

  const auto fused = [&](const NormGemmConfig& config, std::int64_t rows, const Shape& shape) {
    return Check(LaunchNormGemm(config, x.value().data(), w.value().data(), bias.value().data(),
                                residual.value().data(), /*norm_residual=*/nullptr, gamma, beta,
                                kEps, y.value().data(), rows,
                                shape.n, shape.k, ElemType::kBf16,
                                reinterpret_cast<int*>(counters.value().data()),
                                /*programmatic=*/false, s),
                 config.Describe(shape.n));
  };
  if (profile) {
    cudaProfilerStart();
    for (const Shape& shape : shapes) {
      for (const NormGemmConfig& config : NormGemmCandidates(128, shape.n, shape.k)) {
        std::printf("profiled: %ld->%ld, 128 rows, %s\n", static_cast<long>(shape.k),
                    static_cast<long>(shape.n), config.Describe(shape.n).c_str());
        if (const ltserve::Status status = fused(config, 128, shape); !status.ok()) {
          return Fail("launch", status);
        }
        cudaStreamSynchronize(s);
      }
    }
    cudaProfilerStop();
    return 0;
  }

  std::printf("\nA post-LN step at a time (y = LayerNorm(x·Wᵀ + bias + residual)), bf16, L2 emptied "
              "before each run (median of 9): cuBLASLt's first heuristic algorithm (bias and "
              "residual in its epilogue) then the LayerNorm kernel, against the fastest "
              "candidate of each GEMM + LayerNorm schedule (the cluster kernel; the split-K GEMM "
              "with a LayerNorm tail, up to 128 rows); floor = weight bytes / %.2f TB/s.\n\n",
              copy_tbps);
  std::printf("| layer | rows | floor µs | cuBLASLt µs | LayerNorm µs | both µs | cluster µs | "
              "its configuration | split-K µs | its configuration | best / both |\n"
              "|---|---:|---:|---:|---:|---:|---:|---|---:|---|---:|\n");
  for (const Shape& shape : shapes) {
    for (const std::int64_t rows : row_counts) {
      const GemmShape gemm_shape{rows, shape.n, shape.k, CUBLASLT_EPILOGUE_BIAS, true};
      auto gemm = Gemm::Create(ltserve::Precision::kBf16, gemm_shape);
      if (!gemm.ok()) return Fail("Gemm::Create", gemm.status());
      auto algos = gemm.value().Candidates(handle.value().get(), kWorkspace, 1);
      if (!algos.ok() || algos.value().empty()) return Fail("heuristic", algos.status());
      const GemmOperands operands{w.value().data(), x.value().data(), bias.value().data(),
                                  residual.value().data(), h.value().data()};
      const auto run_gemm = [&] {
        return gemm.value().RunWith(algos.value().front(), handle.value().get(), operands,
                                    workspace.value().data(), kWorkspace, s);
      };
      const auto run_norm = [&] {
        return Check(LaunchLayerNorm(h.value().data(), nullptr, gamma, beta, y.value().data(), rows,
                                     shape.n, kEps, ElemType::kBf16, false, s),
                     "LayerNorm");
      };
      auto gemm_ms = TimeColdOnStream(run_gemm, flush.value(), s);
      auto norm_ms = TimeColdOnStream(run_norm, flush.value(), s);
      auto both_ms = TimeColdOnStream([&]() -> ltserve::Status {
        if (ltserve::Status status = run_gemm(); !status.ok()) return status;
        return run_norm();
      }, flush.value(), s);
      if (!gemm_ms.ok() || !norm_ms.ok() || !both_ms.ok()) {
        return Fail("cuBLASLt + LayerNorm", !gemm_ms.ok() ? gemm_ms.status()
                                            : !norm_ms.ok() ? norm_ms.status()
                                                            : both_ms.status());
      }
      // [0]: the cluster kernel, [1]: split-K with the tail.
      float best[2] = {std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::infinity()};
      std::string best_config[2] = {"none ran", "not offered"};
      for (const NormGemmConfig& config : NormGemmCandidates(rows, shape.n, shape.k)) {
        auto ms = TimeColdOnStream([&] { return fused(config, rows, shape); }, flush.value(), s);
        if (!ms.ok()) return Fail("GEMM + LayerNorm run", ms.status());
        const int schedule = config.split_k.has_value() ? 1 : 0;
        if (ms.value() < best[schedule]) {
          best[schedule] = ms.value();
          best_config[schedule] = config.Describe(shape.n);
        }
      }
      const double floor_us = 2.0 * shape.k * shape.n / (copy_tbps * 1e6);
      std::printf("| %ld->%ld | %ld | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %.1f | %s | %.2f |\n",
                  static_cast<long>(shape.k), static_cast<long>(shape.n), static_cast<long>(rows),
                  floor_us, 1000.0 * gemm_ms.value(), 1000.0 * norm_ms.value(),
                  1000.0 * both_ms.value(), 1000.0 * best[0], best_config[0].c_str(),
                  1000.0 * best[1], best_config[1].c_str(),
                  std::min(best[0], best[1]) / both_ms.value());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace ltserve_bench
