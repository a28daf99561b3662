#include "gpu/token_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/kernels_device.cuh"

namespace ltserve::gpu {
namespace {

// Embedding rows are a few hundred to a thousand wide: 128 threads give each a handful of
// columns, and one block per token keeps the gather's three row reads independent.
constexpr int kEmbeddingThreads = 128;
constexpr int kPoolThreads = 128;
constexpr int kNormThreads = 256;

__device__ __forceinline__ std::int32_t Clamp(std::int32_t index, std::int32_t size) {
  return min(max(index, 0), size - 1);
}

// One block per token. The summed row is kept in shared memory (each thread reads back only
// the columns it wrote, so no barrier is needed for it), then two passes over it: the mean,
// then the centred variance.
template <typename T>
__global__ void __launch_bounds__(kEmbeddingThreads)
    EmbeddingKernel(const std::int32_t* ids, const std::int32_t* positions,
                    const std::int32_t* types, EmbeddingTables tables, T* out, int width) {
  extern __shared__ float row[];
  __shared__ float scratch[32];
  const std::int64_t token = blockIdx.x;
  const T* word = static_cast<const T*>(tables.word) +
                  static_cast<std::int64_t>(Clamp(ids[token], tables.vocab_size)) * width;
  const T* position = static_cast<const T*>(tables.position) +
                      static_cast<std::int64_t>(Clamp(positions[token], tables.max_positions)) * width;
  const T* token_type =
      tables.token_type == nullptr
          ? nullptr
          : static_cast<const T*>(tables.token_type) +
                static_cast<std::int64_t>(Clamp(types[token], tables.type_vocab_size)) * width;
  float sum = 0.f;
  for (int c = threadIdx.x; c < width; c += blockDim.x) {
    float v = Load(word, c) + Load(position, c);
    if (token_type != nullptr) v += Load(token_type, c);
    row[c] = v;
    sum += v;
  }
  const float mean = BlockSum(sum, scratch) / static_cast<float>(width);
  float sq = 0.f;
  for (int c = threadIdx.x; c < width; c += blockDim.x) {
    const float d = row[c] - mean;
    sq += d * d;
  }
  const float inv_std = rsqrtf(BlockSum(sq, scratch) / static_cast<float>(width) + tables.eps);
  for (int c = threadIdx.x; c < width; c += blockDim.x) {
    Store(out, token * width + c, (row[c] - mean) * inv_std * tables.gamma[c] + tables.beta[c]);
  }
}

// Block (x, s): sequence s, a slice of columns; each thread walks its column down the
// sequence's rows (coalesced across the block).
template <typename T>
__global__ void __launch_bounds__(kPoolThreads)
    PoolKernel(const T* in, const std::int32_t* sequences, T* out, int width,
               plan::Pooling pooling, float empty_value) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= width) return;
  const std::int64_t s = blockIdx.y;
  float result = 0.f;
  if (s < sequences[0]) {
    const std::int64_t begin = sequences[1 + s];
    const std::int64_t end = sequences[2 + s];
    switch (pooling) {
      case plan::Pooling::kFirst:
        if (end > begin) result = Load(in, begin * width + c);
        break;
      case plan::Pooling::kMean:
        for (std::int64_t t = begin; t < end; ++t) result += Load(in, t * width + c);
        if (end > begin) result /= static_cast<float>(end - begin);
        break;
      case plan::Pooling::kMax:
        result = end > begin ? -INFINITY : empty_value;
        for (std::int64_t t = begin; t < end; ++t) {
          const float v = Load(in, t * width + c);
          if (v > result || v != v) result = v;  // a NaN, once taken, stays: nothing is > NaN
        }
        break;
    }
  }
  Store(out, s * width + c, result);
}

template <typename T>
__global__ void __launch_bounds__(kNormThreads)
    L2NormalizeKernel(const T* in, T* out, int width, float eps) {
  __shared__ float scratch[32];
  const std::int64_t base = blockIdx.x * static_cast<std::int64_t>(width);
  float sq = 0.f;
  for (int c = threadIdx.x; c < width; c += blockDim.x) {
    const float v = Load(in, base + c);
    sq += v * v;
  }
  const float scale = 1.f / fmaxf(sqrtf(BlockSum(sq, scratch)), eps);
  for (int c = threadIdx.x; c < width; c += blockDim.x) Store(out, base + c, Load(in, base + c) * scale);
}

}  // namespace

cudaError_t LaunchEmbedding(const std::int32_t* ids, const std::int32_t* positions,
                            const std::int32_t* types, const EmbeddingTables& tables, void* out,
                            std::int64_t rows, std::int64_t width, ElemType type,
                            cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (width < 1 || width > kEmbeddingMaxWidth || tables.vocab_size < 1 ||
      tables.max_positions < 1 || (tables.token_type != nullptr && tables.type_vocab_size < 1)) {
    return cudaErrorInvalidValue;
  }
  return ForElemType(type, [&](auto element) {
    using T = decltype(element);
    const std::size_t shared = static_cast<std::size_t>(width) * sizeof(float);
    EmbeddingKernel<T><<<static_cast<unsigned>(rows), kEmbeddingThreads, shared, stream>>>(
        ids, positions, types, tables, static_cast<T*>(out), static_cast<int>(width));
    return cudaGetLastError();
  });
}

cudaError_t LaunchPool(const void* in, const std::int32_t* sequences, void* out,
                       std::int64_t sequence_rows, std::int64_t width, plan::Pooling pooling,
                       float empty_value, ElemType type, cudaStream_t stream) {
  if (sequence_rows * width == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((width + kPoolThreads - 1) / kPoolThreads),
                  static_cast<unsigned>(sequence_rows));
  return ForElemType(type, [&](auto element) {
    using T = decltype(element);
    PoolKernel<T><<<grid, kPoolThreads, 0, stream>>>(static_cast<const T*>(in), sequences,
                                                     static_cast<T*>(out), static_cast<int>(width),
                                                     pooling, empty_value);
    return cudaGetLastError();
  });
}

cudaError_t LaunchL2Normalize(const void* in, void* out, std::int64_t rows, std::int64_t width,
                              float eps, ElemType type, cudaStream_t stream) {
  if (rows * width == 0) return cudaSuccess;
  return ForElemType(type, [&](auto element) {
    using T = decltype(element);
    L2NormalizeKernel<T><<<static_cast<unsigned>(rows), kNormThreads, 0, stream>>>(
        static_cast<const T*>(in), static_cast<T*>(out), static_cast<int>(width), eps);
    return cudaGetLastError();
  });
}

}  // namespace ltserve::gpu
