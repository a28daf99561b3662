#include "layer_norm_table.h"

#include <cuda_profiler_api.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "gpu/cuda_resources.h"
#include "gpu/gemm.h"
#include "gpu/kernels.h"

namespace ltserve_bench {
namespace {

using namespace ltserve::gpu;

constexpr std::int64_t kMaxRows = 65536;
constexpr std::int64_t kMaxWidth = 1024;
constexpr float kEps = 1e-12f;

int Fail(const std::string& what, const ltserve::Status& status) {
  std::fprintf(stderr, "LayerNorm table: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

ltserve::Status Check(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return ltserve::Status::Ok();
  return ltserve::Internal(what + ": " + cudaGetErrorString(error));
}

const char* Name(LayerNormSchedule schedule) {
  return schedule == LayerNormSchedule::kStreaming ? "streaming" : "a row a warp";
}

}  // namespace

int PrintLayerNormTable(double copy_tbps, bool profile) {
  struct Shape {
    std::int64_t width;
    bool residual;
  };
  const Shape shapes[] = {{768, true}, {768, false}, {1024, true}};
  const std::int64_t row_counts[] = {128, 1024, 4096, 16384, 65536};
  const LayerNormSchedule schedules[] = {LayerNormSchedule::kRowPerWarp,
                                         LayerNormSchedule::kStreaming};
  auto stream = CreateStream();
  if (!stream.ok()) return Fail("stream", stream.status());
  int device = 0;
  int l2 = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device);
  const auto elements = static_cast<std::size_t>(kMaxRows * kMaxWidth);
  auto flush = DeviceBuffer::Create(2 * static_cast<std::size_t>(l2), "flush");
  auto x = DeviceBuffer::Create(elements * 2, "x");
  auto residual = DeviceBuffer::Create(elements * 2, "residual");
  auto y = DeviceBuffer::Create(elements * 2, "y");
  auto affine = DeviceBuffer::Create(std::size_t{2} * kMaxWidth * 4, "gamma and beta");
  if (!flush.ok() || !x.ok() || !residual.ok() || !y.ok() || !affine.ok()) {
    return Fail("buffers", flush.status());
  }
  cudaStream_t s = stream.value().get();
  cudaMemsetAsync(flush.value().data(), 0, flush.value().bytes(), s);
  LaunchFillRandom(x.value().data(), ElemType::kBf16, elements, 21, s);
  LaunchFillRandom(residual.value().data(), ElemType::kBf16, elements, 22, s);
  LaunchFillRandom(affine.value().data(), ElemType::kFp32, 2 * kMaxWidth, 23, s);
  const auto* gamma = reinterpret_cast<const float*>(affine.value().data());
  const float* beta = gamma + kMaxWidth;

  const auto run = [&](LayerNormSchedule schedule, std::int64_t rows, const Shape& shape) {
    const void* r = shape.residual ? residual.value().data() : nullptr;
    return Check(LaunchLayerNorm(x.value().data(), r, gamma, beta, y.value().data(), rows,
                                 shape.width, kEps, ElemType::kBf16, /*programmatic=*/false, s,
                                 schedule),
                 Name(schedule));
  };
  if (profile) {
    cudaProfilerStart();
    for (const LayerNormSchedule schedule : schedules) {
      std::printf("profiled: LayerNorm 16384 x 768 + residual, %s\n", Name(schedule));
      if (const ltserve::Status status = run(schedule, 16384, shapes[0]); !status.ok()) {
        return Fail("launch", status);
      }
      cudaStreamSynchronize(s);
    }
    cudaProfilerStop();
    return 0;
  }

  std::printf("\nLayerNorm alone, bf16, gamma and beta: each schedule with the L2 emptied before "
              "each run (cold, median of 9) and back to back (warm: its input in the L2); floor = "
              "input, residual and output bytes at %.2f TB/s.\n\n", copy_tbps);
  std::printf("| width | residual | rows | floor µs | a row a warp cold µs | streaming cold µs "
              "| streaming / row cold | a row a warp warm µs | streaming warm µs "
              "| streaming / row warm |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Shape& shape : shapes) {
    for (const std::int64_t rows : row_counts) {
      float cold[2] = {0, 0};
      float warm[2] = {0, 0};
      for (int i = 0; i < 2; ++i) {
        const auto once = [&] { return run(schedules[i], rows, shape); };
        auto cold_ms = TimeColdOnStream(once, flush.value(), s);
        if (!cold_ms.ok()) return Fail("cold", cold_ms.status());
        auto warm_ms = TimeOnStream(once, s);
        if (!warm_ms.ok()) return Fail("warm", warm_ms.status());
        cold[i] = 1000.f * cold_ms.value();
        warm[i] = 1000.f * warm_ms.value();
      }
      const double bytes = static_cast<double>(rows * shape.width) * 2 * (shape.residual ? 3 : 2);
      const double floor_us = bytes / (copy_tbps * 1e6);
      std::printf("| %ld | %s | %ld | %.1f | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |\n",
                  static_cast<long>(shape.width), shape.residual ? "yes" : "no",
                  static_cast<long>(rows), floor_us, cold[0], cold[1], cold[1] / cold[0], warm[0],
                  warm[1], warm[1] / warm[0]);
      std::fflush(stdout);
    }
  }
  if (cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess) {
    return Fail("sync", Check(e, "sync"));
  }
  return 0;
}

}  // namespace ltserve_bench
