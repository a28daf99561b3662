// Device-side helpers shared by the kernels of server/gpu: fp32 loads and stores of each
// storage type, and the activations in fp32 (the same formulas as the CPU reference).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "plan/plan.h"

namespace ltserve::gpu {

__device__ __forceinline__ float Load(const float* p, std::int64_t i) { return p[i]; }
__device__ __forceinline__ float Load(const __half* p, std::int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float Load(const __nv_bfloat16* p, std::int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void Store(float* p, std::int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void Store(__half* p, std::int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void Store(__nv_bfloat16* p, std::int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

__device__ __forceinline__ float Activate(plan::Activation act, float x) {
  switch (act) {
    case plan::Activation::kNone: return x;
    case plan::Activation::kRelu: return x < 0.f ? 0.f : x;  // keeps NaN, as torch.relu does
    case plan::Activation::kGeluErf: return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case plan::Activation::kGeluTanh: {
      const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.f + tanhf(inner));
    }
    case plan::Activation::kSilu: return x / (1.f + expf(-x));
    case plan::Activation::kTanh: return tanhf(x);
    case plan::Activation::kSigmoid: return 1.f / (1.f + expf(-x));
  }
  return x;
}

}  // namespace ltserve::gpu
