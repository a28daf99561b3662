// What cutlass_gemm.cc hands the translation units that each instantiate one tile shape's
// kernels for one storage type (cutlass_gemm_<tile>_<type>.cu): apart so that a build compiles
// them in parallel (tens of seconds each). No CUTLASS types here.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/kernels.h"
#include "plan/plan.h"

namespace ltserve::gpu::cutlass_gemm {

struct Operands {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;
  const void* residual = nullptr;
  void* y = nullptr;
  std::int64_t rows = 0, out_features = 0, in_features = 0;
  plan::Activation act = plan::Activation::kNone;
  ElemType type = ElemType::kBf16;
  int sm_count = 0;
  bool programmatic = false;
  cudaStream_t stream = nullptr;
};

cudaError_t Launch128x192Bf16(const Operands& o);
cudaError_t Launch128x192Fp16(const Operands& o);
cudaError_t Launch128x256Bf16(const Operands& o);
cudaError_t Launch128x256Fp16(const Operands& o);
cudaError_t Launch256x128Bf16(const Operands& o);
cudaError_t Launch256x128Fp16(const Operands& o);
cudaError_t Launch128x128PingpongBf16(const Operands& o);
cudaError_t Launch128x128PingpongFp16(const Operands& o);

}  // namespace ltserve::gpu::cutlass_gemm
