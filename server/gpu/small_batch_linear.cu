// The small-batch linear kernel (kernels.h): a fused matrix-vector product for up to 8 rows.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/kernels.h"
#include "gpu/kernels_device.cuh"

namespace ltserve::gpu {
namespace {

constexpr int kWarps = 8;
constexpr int kVector = 8;  // 16-bit elements per 16-byte load
constexpr int kUnroll = 4;
// Warps the whole grid should hold so that enough weight bytes are in flight to saturate HBM
// (132 SMs × 32 resident warps on an H100/H200); fewer output columns split K across warps.
constexpr std::int64_t kTargetWarps = 132 * 32;

template <typename T>
__device__ __forceinline__ void Unpack(const uint4& raw, float out[kVector]) {
  const T* values = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < kVector; ++i) out[i] = Load(values, i);
}

// Block: kWarps warps = (kWarps / split) columns × split warps along K. Each warp sums its
// share of K for all rows; the split partial sums meet in shared memory.
template <typename T, int kRows>
__global__ void __launch_bounds__(kWarps * 32)
    SmallBatchLinearKernel(const T* __restrict__ x, const T* __restrict__ w,
                           const T* __restrict__ bias, const T* __restrict__ residual,
                           T* __restrict__ y, int rows, int n_total, int k_total, int split,
                           plan::Activation act) {
  __shared__ float partial[kWarps][kRows];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int columns_per_block = kWarps / split;
  const int n = blockIdx.x * columns_per_block + warp / split;
  const int k_part = warp % split;
  float acc[kRows] = {};
  const T* w_row = w + static_cast<std::int64_t>(n < n_total ? n : 0) * k_total;
  const int stride = split * 32 * kVector;
  // kUnroll independent 16-byte weight loads are issued before any is used, so each warp
  // keeps kUnroll × 512 bytes in flight.
  uint4 raw[kUnroll];
  const auto load = [&](int k0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int k = k0 + u * stride;
      raw[u] = n < n_total && k < k_total ? __ldg(reinterpret_cast<const uint4*>(w_row + k))
                                          : uint4{};
    }
  };
  const int k_first = (k_part * 32 + lane) * kVector;
  // The weights are not the kernel before's output: under a programmatic launch their first
  // loads are in flight while that kernel drains.
  load(k_first);
  WaitForPriorKernel();
  AllowDependentLaunch();
  if (n < n_total) {
    for (int k0 = k_first; k0 < k_total; k0 += kUnroll * stride) {
      if (k0 != k_first) load(k0);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int k = k0 + u * stride;
        if (k >= k_total) break;
        float wv[kVector];
        Unpack<T>(raw[u], wv);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (r >= rows) break;
          float xv[kVector];
          Unpack<T>(__ldg(reinterpret_cast<const uint4*>(
                        x + static_cast<std::int64_t>(r) * k_total + k)),
                    xv);
#pragma unroll
          for (int i = 0; i < kVector; ++i) acc[r] = fmaf(wv[i], xv[i], acc[r]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    for (int offset = 16; offset > 0; offset /= 2) {
      acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], offset);
    }
    if (lane == 0) partial[warp][r] = acc[r];
  }
  __syncthreads();
  // The first `kRows` lanes of each column's first warp finish one row each.
  if (k_part != 0 || n >= n_total || lane >= rows) return;
  float v = 0.f;
  for (int s = 0; s < split; ++s) v += partial[warp + s][lane];
  if (bias != nullptr) v += Load(bias, n);
  const std::int64_t out = static_cast<std::int64_t>(lane) * n_total + n;
  if (residual != nullptr) v += Load(residual, out);
  Store(y, out, Activate(act, v));
}

template <typename T, int kRows>
cudaError_t Launch(const void* x, const void* w, const void* bias, const void* residual, void* y,
                   std::int64_t rows, std::int64_t n, std::int64_t k, plan::Activation act,
                   bool programmatic, cudaStream_t stream) {
  int split = 1;
  while (split < kWarps && n * split < kTargetWarps) split *= 2;
  const int columns_per_block = kWarps / split;
  const auto blocks = static_cast<unsigned>((n + columns_per_block - 1) / columns_per_block);
  return LaunchProgrammatic(programmatic, SmallBatchLinearKernel<T, kRows>, dim3(blocks),
                            dim3(kWarps * 32), stream, static_cast<const T*>(x),
                            static_cast<const T*>(w), static_cast<const T*>(bias),
                            static_cast<const T*>(residual), static_cast<T*>(y),
                            static_cast<int>(rows), static_cast<int>(n), static_cast<int>(k),
                            split, act);
}

template <typename T>
cudaError_t Dispatch(const void* x, const void* w, const void* bias, const void* residual,
                     void* y, std::int64_t rows, std::int64_t n, std::int64_t k,
                     plan::Activation act, bool programmatic, cudaStream_t stream) {
  switch (rows) {
    case 1: return Launch<T, 1>(x, w, bias, residual, y, rows, n, k, act, programmatic, stream);
    case 2: return Launch<T, 2>(x, w, bias, residual, y, rows, n, k, act, programmatic, stream);
    case 3:
    case 4: return Launch<T, 4>(x, w, bias, residual, y, rows, n, k, act, programmatic, stream);
    default: return Launch<T, 8>(x, w, bias, residual, y, rows, n, k, act, programmatic, stream);
  }
}

}  // namespace

bool SmallBatchLinearSupports(ElemType type, std::int64_t rows, std::int64_t in_features) {
  return type != ElemType::kFp32 && rows >= 1 && rows <= kSmallBatchMaxRows &&
         in_features % kVector == 0 && in_features < (std::int64_t{1} << 30);
}

cudaError_t LaunchSmallBatchLinear(const void* x, const void* w, const void* bias,
                                   const void* residual, void* y, std::int64_t rows,
                                   std::int64_t out_features, std::int64_t in_features,
                                   plan::Activation act, ElemType type, bool programmatic,
                                   cudaStream_t stream) {
  if (!SmallBatchLinearSupports(type, rows, in_features)) return cudaErrorInvalidValue;
  if (type == ElemType::kBf16) {
    return Dispatch<__nv_bfloat16>(x, w, bias, residual, y, rows, out_features, in_features, act,
                                   programmatic, stream);
  }
  return Dispatch<__half>(x, w, bias, residual, y, rows, out_features, in_features, act,
                          programmatic, stream);
}

}  // namespace ltserve::gpu
