// Device-side helpers shared by the kernels of server/gpu: fp32 loads and stores of each
// storage type, the activations in fp32 (the same formulas as the CPU reference) and a block
// reduction.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "gpu/kernels.h"
#include "plan/plan.h"

namespace ltserve::gpu {

// Programmatic dependent launch (sm_90+): a kernel launched by LaunchProgrammatic may be
// resident while the kernel before it on the stream drains, which hides its launch and ramp-up
// behind that kernel's tail. Everything it reads or writes in global memory may still belong
// to that kernel, so it calls this first: it returns once the kernel before has completed and
// its writes are visible. A no-op when launched normally, and before sm_90.
__device__ __forceinline__ void WaitForPriorKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Asks the L2 for the 128-byte line holding `p` without waiting for it: a later load of the
// line then costs an L2 round trip, not a DRAM one. For data the kernel before does not write,
// requested before WaitForPriorKernel so that the DRAM latency passes while that kernel drains.
__device__ __forceinline__ void PrefetchToL2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// A LayerNorm's gamma and beta (fp32, `width` each; either may be null) asked of the L2, one
// request a 128-byte line, spread over threads `thread` of `threads`: weights, so requested
// before WaitForPriorKernel by the kernels that apply them after a row's reductions.
__device__ __forceinline__ void PrefetchAffineToL2(const float* gamma, const float* beta, int width,
                                                   int thread, int threads) {
  constexpr int kFloatsPerLine = 32;
  const int lines = (width + kFloatsPerLine - 1) / kFloatsPerLine;
  for (int i = thread; i < 2 * lines; i += threads) {
    const float* v = i < lines ? gamma : beta;
    if (v != nullptr) PrefetchToL2(v + (i % lines) * kFloatsPerLine);
  }
}

// Lets the kernel after this one on the stream (if launched programmatically) start once every
// block of this grid has called it, rather than when they exit: its prologue (weight loads
// that do not depend on this kernel) then overlaps this kernel's main loop. Its own
// WaitForPriorKernel still waits for this whole grid, so calling this early is always safe;
// it is called after this kernel's own wait so that at most two grids share the SMs.
__device__ __forceinline__ void AllowDependentLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Launches `kernel` on `stream`; with `programmatic`, as a programmatic dependent launch
// (the kernel must begin with WaitForPriorKernel). Inside a stream capture the dependency
// becomes a programmatic edge of the graph. Returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t LaunchProgrammatic(bool programmatic, void (*kernel)(Params...), dim3 grid, dim3 block,
                               cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = programmatic ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

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

// The LayerNorm statistics of one row that a warp holds, kPerLane values a lane (element
// lane + 32·i, zero past `width`): the mean, then the mean squared deviation from it, in fp32,
// as {mean, 1 / sqrt(variance + eps)}. One shuffle tree for every caller (the warp LayerNorm
// kernel, the split-K GEMM's LayerNorm tail), so they agree bit for bit on the same values.
template <int kPerLane>
__device__ __forceinline__ float2 WarpRowStatistics(const float (&v)[kPerLane], int width,
                                                    int lane, float eps) {
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) sum += v[i];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  const float mean = sum / static_cast<float>(width);
  float sq = 0.f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const float d = lane + 32 * i < width ? v[i] - mean : 0.f;
    sq += d * d;
  }
  for (int offset = 16; offset > 0; offset /= 2) sq += __shfl_xor_sync(0xffffffffu, sq, offset);
  return make_float2(mean, rsqrtf(sq / static_cast<float>(width) + eps));
}

// The sum of `v` over the block (blockDim.x a multiple of 32, at most 1024), returned to every
// thread; `scratch` is 32 floats of shared memory, reusable right after the call.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read by the previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < blockDim.x / 32 ? scratch[lane] : 0.f;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// fn(T{}) with T the storage type of `type` (float, __half, __nv_bfloat16): one launcher body
// for every type.
template <typename Fn>
cudaError_t ForElemType(ElemType type, Fn&& fn) {
  switch (type) {
    case ElemType::kFp32: return fn(float{});
    case ElemType::kFp16: return fn(__half{});
    case ElemType::kBf16: return fn(__nv_bfloat16{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace ltserve::gpu
