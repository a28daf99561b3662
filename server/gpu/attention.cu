#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "gpu/attention.h"
#include "gpu/kernels_device.cuh"

namespace ltserve::gpu {
namespace {

constexpr int kWarp = 32;
constexpr int kThreads = kAttentionQueriesPerBlock * kWarp;
// Keys per shared-memory tile: one per lane, so each lane scores one key of the tile.
constexpr int kKeyTile = kWarp;
constexpr int kMaxHeadDim = static_cast<int>(kAttentionMaxHeadDim);
// Accumulator elements per lane: lane i holds output dims i, i + 32, ...
constexpr int kPerLane = kMaxHeadDim / kWarp;
// Work items are spread over at most this many blocks per head (a grid-stride loop does the
// rest): enough to fill every SM, without launching blocks that only find nothing to do.
constexpr std::int64_t kMaxBlocksPerHead = 1024;
constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  }
  return v;
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// One block per (work item, head): a work item is up to kAttentionQueriesPerBlock consecutive
// queries of one sequence, one per warp. The block streams the sequence's keys and values
// through shared memory a tile at a time; each warp keeps its query's running max `m`, sum
// `l` and output accumulator in registers and rescales them once per tile.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    AttentionKernel(const T* qkv, T* out, const std::int32_t* batch, std::int64_t max_tokens,
                    int num_heads, int head_dim, float scale) {
  __shared__ float q_s[kAttentionQueriesPerBlock][kMaxHeadDim];
  __shared__ float k_s[kKeyTile][kMaxHeadDim + 1];  // +1: lanes read different rows conflict-free
  __shared__ float v_s[kKeyTile][kMaxHeadDim];
  const int items = batch[0];
  const std::int32_t* cu_seqlens = batch + 1;
  const std::int32_t* work = batch + AttentionWorkOffset(max_tokens);
  const std::int64_t width = static_cast<std::int64_t>(num_heads) * head_dim;
  const std::int64_t stride = 3 * width;
  const std::int64_t head_offset = static_cast<std::int64_t>(blockIdx.y) * head_dim;
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;

  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const int sequence = work[2 * item];
    const int query = work[2 * item + 1] + warp;
    const std::int64_t begin = cu_seqlens[sequence];
    const int length = cu_seqlens[sequence + 1] - cu_seqlens[sequence];
    const bool active = query < length;  // warp-uniform: every lane has the same query
    __syncthreads();  // the previous item's warps are done with q_s
    if (active) {
      for (int i = lane; i < head_dim; i += kWarp) {
        q_s[warp][i] = Load(qkv, (begin + query) * stride + head_offset + i);
      }
    }
    float m = -INFINITY;
    float l = 0.f;
    float acc[kPerLane];
#pragma unroll
    for (int r = 0; r < kPerLane; ++r) acc[r] = 0.f;

    for (int key0 = 0; key0 < length; key0 += kKeyTile) {
      const int keys = min(kKeyTile, length - key0);
      __syncthreads();  // the previous tile is consumed (and q_s is visible to its warp)
      for (int e = threadIdx.x; e < keys * head_dim; e += kThreads) {
        const int j = e / head_dim;
        const int i = e % head_dim;
        const std::int64_t row = (begin + key0 + j) * stride + head_offset + i;
        k_s[j][i] = Load(qkv, row + width);
        v_s[j][i] = Load(qkv, row + 2 * width);
      }
      __syncthreads();
      if (!active) continue;
      float score = -INFINITY;
      if (lane < keys) {
        float dot = 0.f;
        for (int i = 0; i < head_dim; ++i) dot += q_s[warp][i] * k_s[lane][i];
        score = dot * scale;
      }
      // The tile has at least one key, so m_new is finite and the first correction is 0.
      const float m_new = fmaxf(m, WarpMax(score));
      const float correction = expf(m - m_new);
      const float p = lane < keys ? expf(score - m_new) : 0.f;
      l = l * correction + WarpSum(p);
#pragma unroll
      for (int r = 0; r < kPerLane; ++r) acc[r] *= correction;
      for (int j = 0; j < keys; ++j) {
        const float pj = __shfl_sync(kFullMask, p, j);
#pragma unroll
        for (int r = 0; r < kPerLane; ++r) {
          const int i = lane + r * kWarp;
          if (i < head_dim) acc[r] += pj * v_s[j][i];
        }
      }
      m = m_new;
    }
    if (active) {
      const float inv_l = 1.f / l;
#pragma unroll
      for (int r = 0; r < kPerLane; ++r) {
        const int i = lane + r * kWarp;
        if (i < head_dim) Store(out, (begin + query) * width + head_offset + i, acc[r] * inv_l);
      }
    }
  }
}

template <typename T>
cudaError_t Attention(const void* qkv, void* out, const std::int32_t* batch,
                      std::int64_t max_tokens, std::int64_t bucket_tokens, int num_heads,
                      int head_dim, cudaStream_t stream) {
  // A batch of bucket_tokens tokens has at most that many work items (each covers a token).
  const std::int64_t blocks = bucket_tokens < kMaxBlocksPerHead ? bucket_tokens : kMaxBlocksPerHead;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(num_heads));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  AttentionKernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(qkv),
                                                    static_cast<T*>(out), batch, max_tokens,
                                                    num_heads, head_dim, scale);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchAttention(const void* qkv, void* out, const std::int32_t* batch,
                            std::int64_t max_tokens, std::int64_t bucket_tokens,
                            std::int64_t num_heads, std::int64_t head_dim, ElemType type,
                            cudaStream_t stream) {
  if (head_dim < 1 || head_dim > kAttentionMaxHeadDim || num_heads < 1 || num_heads > 65535) {
    return cudaErrorInvalidValue;
  }
  if (bucket_tokens < 1) return cudaSuccess;
  const int heads = static_cast<int>(num_heads);
  const int dim = static_cast<int>(head_dim);
  switch (type) {
    case ElemType::kFp32:
      return Attention<float>(qkv, out, batch, max_tokens, bucket_tokens, heads, dim, stream);
    case ElemType::kFp16:
      return Attention<__half>(qkv, out, batch, max_tokens, bucket_tokens, heads, dim, stream);
    case ElemType::kBf16:
      return Attention<__nv_bfloat16>(qkv, out, batch, max_tokens, bucket_tokens, heads, dim,
                                      stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace ltserve::gpu
