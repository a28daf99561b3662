// The few kernels for what cuBLASLt cannot fuse into a GEMM epilogue: dtype conversion at the
// model's edges, element-wise bias/activation/residual steps, and LayerNorm (fp32 statistics).
// Every launcher enqueues on `stream` and returns the launch's error (cudaGetLastError).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "plan/plan.h"

namespace ltserve::gpu {

// Element types the executor stores on the device.
enum class ElemType : std::uint8_t { kFp32, kFp16, kBf16 };
std::size_t ElemSize(ElemType type);

// dst[i] = src[i] converted, for i < count. `programmatic`: launched to overlap the kernel
// before it (programmatic dependent launch, sm_90+ only; see kernels_device.cuh).
cudaError_t LaunchConvert(const void* src, ElemType src_type, void* dst, ElemType dst_type,
                          std::size_t count, bool programmatic, cudaStream_t stream);

// Fills `count` elements with values uniform in [-1, 1) from a hash of (seed, index): timing
// GEMM candidates on zeros would rank them on data that runs faster than real inputs.
cudaError_t LaunchFillRandom(void* data, ElemType type, std::size_t count, std::uint32_t seed,
                             cudaStream_t stream);

// Reads all `bytes` of `data` (16-byte aligned), so that the L2 holds them, clean, and nothing
// it held before: timing a kernel after it gives its time with its inputs in device memory,
// without paying to write back dirty lines another kernel left (as after a memset).
cudaError_t LaunchReadAll(void* data, std::size_t bytes, cudaStream_t stream);

// out[r, c] = act(in[r, c] + bias[c] + residual[r, c]), math in fp32. `bias` and `residual`
// may be null; `in` may equal `out`. All tensors (bias too) have element type `type`.
cudaError_t LaunchPointwise(const void* in, const void* bias, const void* residual, void* out,
                            std::int64_t rows, std::int64_t width, plan::Activation act,
                            ElemType type, cudaStream_t stream);

// Rows a small-batch linear kernel takes at most, and whether it can run a layer: 16-bit
// storage and in_features a multiple of 8 (16-byte loads along each weight row).
constexpr std::int64_t kSmallBatchMaxRows = 8;
// In "auto" mode it is considered only up to this many rows: on the H200 it timed faster than
// cuBLASLt per layer at 4 and 8 rows too, yet whole forward passes at those batches came out
// slower (bench/RESULTS.md), so the per-layer timing is trusted only where it held end to end.
constexpr std::int64_t kSmallBatchAutoMaxRows = 2;
bool SmallBatchLinearSupports(ElemType type, std::int64_t rows, std::int64_t in_features);

// y[r, n] = act(Σ_k x[r, k]·w[n, k] + bias[n] + residual[r, n]) in one kernel, for few rows,
// where a GEMM is a matrix-vector product bound by reading the weights once: warps stream
// weight rows with 16-byte loads and finish bias, residual and activation in registers.
// `bias` and `residual` may be null.
// `programmatic`: launched to overlap the kernel before it, its first weight loads issued
// before waiting for that kernel (programmatic dependent launch, sm_90+ only).
cudaError_t LaunchSmallBatchLinear(const void* x, const void* w, const void* bias,
                                   const void* residual, void* y, std::int64_t rows,
                                   std::int64_t out_features, std::int64_t in_features,
                                   plan::Activation act, ElemType type, bool programmatic,
                                   cudaStream_t stream);

// How the LayerNorm kernel for rows of up to 128 16-byte vectors (width a multiple of the
// vector; 1024 16-bit or 512 fp32 elements) walks them. Both compute every row with the same
// instructions, hence the same bits.
enum class LayerNormSchedule : std::uint8_t {
  // One warp a row, blocks of 8 rows, as many blocks as rows need (every other width too).
  kRowPerWarp,
  // At most as many blocks as the GPU holds at once; each warp walks rows, the next row copied
  // into shared memory while it normalises this one. Measured against kRowPerWarp by
  // `ltserve_gpu_bench ... layernorm` before the executor uses it.
  kStreaming,
};
// Whether kStreaming takes rows of `width` elements of `type`.
bool StreamingLayerNormSupports(ElemType type, std::int64_t width);

// out = LayerNorm(in + residual) over each row; `residual`, `gamma`, `beta` may be null.
// gamma/beta are fp32 (16-byte aligned); in/residual/out have element type `type`; each row is
// read and written by one warp only, so `out` may be `in` or `residual`. `programmatic`:
// launched to overlap the kernel before it (programmatic dependent launch, sm_90+ only).
// cudaErrorInvalidValue for kStreaming at a width it does not take.
cudaError_t LaunchLayerNorm(const void* in, const void* residual, const float* gamma,
                            const float* beta, void* out, std::int64_t rows, std::int64_t width,
                            float eps, ElemType type, bool programmatic, cudaStream_t stream,
                            LayerNormSchedule schedule = LayerNormSchedule::kRowPerWarp);

}  // namespace ltserve::gpu
