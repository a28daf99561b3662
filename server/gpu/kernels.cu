#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <type_traits>

#include "gpu/kernels.h"
#include "gpu/kernels_device.cuh"
#include "gpu/tensor_core_device.cuh"

namespace ltserve::gpu {
namespace {

constexpr int kThreads = 256;
// A grid-stride loop needs no more blocks than keep every SM busy; this bounds the grid for
// huge tensors without a device query on the launch path.
constexpr std::int64_t kMaxBlocks = 4096;

template <typename Src, typename Dst>
__global__ void ConvertKernel(const Src* src, Dst* dst, std::int64_t count) {
  WaitForPriorKernel();
  AllowDependentLaunch();
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       i < count; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    Store(dst, i, Load(src, i));
  }
}

template <typename T>
__global__ void FillRandomKernel(T* data, std::int64_t count, std::uint32_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       i < count; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 0x9e3779b9u ^ seed;  // integer hash (lowbias32)
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    Store(data, i, static_cast<float>(h) * (2.0f / 4294967296.0f) - 1.0f);
  }
}

// Reads every 16 bytes of `data`; the one write, of a value the reads never add up to in
// practice, only keeps the compiler from dropping the reads.
__global__ void ReadAllKernel(const uint4* data, std::int64_t count, unsigned* sink) {
  unsigned acc = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       i < count; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcg(data + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}

template <typename T>
__global__ void PointwiseKernel(const T* in, const T* bias, const T* residual, T* out,
                                std::int64_t rows, std::int64_t width, plan::Activation act) {
  const std::int64_t count = rows * width;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       i < count; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float v = Load(in, i);
    if (bias != nullptr) v += Load(bias, i % width);
    if (residual != nullptr) v += Load(residual, i);
    Store(out, i, Activate(act, v));
  }
}

// One block per row, for rows wider than a warp holds in registers; two passes over the row
// (mean, then centred variance) for accuracy.
template <typename T>
__global__ void LayerNormKernel(const T* in, const T* residual, const float* gamma,
                                const float* beta, T* out, std::int64_t width, float eps) {
  WaitForPriorKernel();
  AllowDependentLaunch();
  __shared__ float scratch[32];
  const std::int64_t base = blockIdx.x * width;
  auto value = [&](std::int64_t c) {
    float v = Load(in, base + c);
    if (residual != nullptr) v += Load(residual, base + c);
    return v;
  };
  float sum = 0.f;
  for (std::int64_t c = threadIdx.x; c < width; c += blockDim.x) sum += value(c);
  const float mean = BlockSum(sum, scratch) / static_cast<float>(width);
  float sq = 0.f;
  for (std::int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    const float d = value(c) - mean;
    sq += d * d;
  }
  const float inv_std = rsqrtf(BlockSum(sq, scratch) / static_cast<float>(width) + eps);
  for (std::int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    float v = (value(c) - mean) * inv_std;
    if (gamma != nullptr) v *= gamma[c];
    if (beta != nullptr) v += beta[c];
    Store(out, base + c, v);
  }
}

// One warp per row, the row held in registers: one read of the row from memory, warp
// shuffles instead of block barriers, and still two passes (mean, then centred variance) over
// the registers. Two flavours: 16-byte vector loads, kChunks per lane, for rows whose width is
// a multiple of the vector (every transformer width); scalar loads, kPerLane per lane, for
// narrow odd widths. The block kernel above takes the rest. Loads use a clamped index
// unconditionally: a load under `if (c < width)` is not hoisted, and loads issued one after
// another cost one memory latency each.
constexpr int kRowsPerBlock = kThreads / 32;

// A row of the vector kernels in registers: chunk lane + 32·c of the row (16 bytes, kVec
// elements) in v[c], summed with the residual's when there is one.
template <typename T, int kChunks>
struct RowChunks {
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  float v[kChunks][kVec];

  // `raw` by value: one 16-byte load, where a reference would let the compiler read the
  // elements one at a time.
  __device__ __forceinline__ void Add(uint4 raw, int c, bool first) {
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[c][k] = first ? Load(e, k) : v[c][k] + Load(e, k);
  }
};

// Normalises a row held as RowChunks and stores it at out + base: both vector kernels end
// here, so they produce the same bits for the same row. gamma and beta may be null, and may
// point to global or shared memory.
template <typename T, int kChunks>
__device__ __forceinline__ void NormalizeAndStoreRow(RowChunks<T, kChunks>& row, int lane,
                                                     int chunks, int width, float eps,
                                                     const float* gamma, const float* beta,
                                                     T* out, std::int64_t base) {
  constexpr int kVec = RowChunks<T, kChunks>::kVec;
  float sum = 0.f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const bool valid = lane + 32 * c < chunks;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      if (!valid) row.v[c][k] = 0.f;
      sum += row.v[c][k];
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  const float mean = sum / static_cast<float>(width);
  float sq = 0.f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const bool valid = lane + 32 * c < chunks;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float d = valid ? row.v[c][k] - mean : 0.f;
      sq += d * d;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) sq += __shfl_xor_sync(0xffffffffu, sq, offset);
  const float inv_std = rsqrtf(sq / static_cast<float>(width) + eps);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int chunk = min(lane + 32 * c, chunks - 1);
    // gamma and beta (fp32) a float4 at a time too: scalar loads of them would be 2·kVec load
    // instructions per chunk, enough to make the kernel instruction-bound on wide batches.
    float scale[kVec];
    float shift[kVec];
#pragma unroll
    for (int k = 0; k < kVec; k += 4) {
      const float4 g = gamma != nullptr ? *reinterpret_cast<const float4*>(gamma + chunk * kVec + k)
                                        : make_float4(1.f, 1.f, 1.f, 1.f);
      const float4 b = beta != nullptr ? *reinterpret_cast<const float4*>(beta + chunk * kVec + k)
                                       : make_float4(0.f, 0.f, 0.f, 0.f);
      scale[k] = g.x, scale[k + 1] = g.y, scale[k + 2] = g.z, scale[k + 3] = g.w;
      shift[k] = b.x, shift[k + 1] = b.y, shift[k + 2] = b.z, shift[k + 3] = b.w;
    }
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      Store(e, k, (row.v[c][k] - mean) * inv_std * scale[k] + shift[k]);
    }
    if (lane + 32 * c < chunks) *reinterpret_cast<uint4*>(out + base + chunk * kVec) = raw;
  }
}

template <typename T, int kChunks>
__global__ void __launch_bounds__(kThreads)
    VectorLayerNormKernel(const T* in, const T* residual, const float* gamma, const float* beta,
                          T* out, std::int64_t rows, int width, float eps) {
  // gamma and beta are read after the row's two reductions; in a pass whose weights outgrow
  // the L2 they come from DRAM, a round trip in series at the end of every row. Asked for
  // here, before the wait, they arrive while the rows are loaded and reduced: 3.20 -> 2.76 µs
  // a one-sequence BERT-base LayerNorm on an H100 (bench/RESULTS.md). By the first block's
  // first warp alone (48 requests at width 768): the other blocks' loads meet the same lines
  // in flight, and with every block asking, 512 blocks at 4,096 rows made the kernel 1.7 µs
  // slower, all their requests on the same few L2 lines.
  if (blockIdx.x == 0 && threadIdx.x < 32) {
    PrefetchAffineToL2(gamma, beta, width, static_cast<int>(threadIdx.x), 32);
  }
  WaitForPriorKernel();
  AllowDependentLaunch();
  constexpr int kVec = RowChunks<T, kChunks>::kVec;
  const std::int64_t row = blockIdx.x * static_cast<std::int64_t>(kRowsPerBlock) + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const int chunks = width / kVec;
  const std::int64_t base = row * width;
  RowChunks<T, kChunks> values;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const std::int64_t at = base + min(lane + 32 * c, chunks - 1) * kVec;
    values.Add(*reinterpret_cast<const uint4*>(in + at), c, /*first=*/true);
    if (residual != nullptr) values.Add(*reinterpret_cast<const uint4*>(residual + at), c, false);
  }
  NormalizeAndStoreRow(values, lane, chunks, width, eps, gamma, beta, out, base);
}

// The streaming schedule of the vector kernel (LayerNormSchedule::kStreaming): a grid no
// larger than the GPU holds at once, each warp walking rows at a stride of every warp in it.
// The one-row-a-warp kernel above keeps a row's loads in flight only between its start and
// its reductions, then the block must retire before the next one loads: at 16,384 rows it
// kept 35 % of DRAM bandwidth busy, and holding two rows a warp in registers halved its
// occupancy instead (bench/RESULTS.md). Here the next row is copied into shared memory with
// cp.async while this one is reduced and stored, so every warp has a row in flight all the
// time at the registers of one; gamma and beta are staged in shared memory once a block.
// Per warp a ring of two slots, each the row and its residual.
constexpr int kStreamThreads = 128;
constexpr int kStreamWarps = kStreamThreads / 32;

template <typename T, int kChunks>
__global__ void __launch_bounds__(kStreamThreads)
    StreamingLayerNormKernel(const T* in, const T* residual, const float* gamma,
                             const float* beta, T* out, std::int64_t rows, int width, float eps) {
  constexpr int kVec = RowChunks<T, kChunks>::kVec;
  constexpr int kWidth = kChunks * 32 * kVec;  // the widest row this instantiation takes
  __shared__ uint4 ring[kStreamWarps][2][2][kChunks * 32];  // [warp][slot][input, residual]
  __shared__ __align__(16) float affine[2][kWidth];         // gamma, beta
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int chunks = width / kVec;

  // Weights, not the kernel before's output: copied before waiting for it.
  for (int i = threadIdx.x; i < width / 4; i += kStreamThreads) {
    CopyAsync16(&affine[0][4 * i], gamma + 4 * i, gamma != nullptr);
    CopyAsync16(&affine[1][4 * i], beta + 4 * i, beta != nullptr);
  }
  CommitCopies();
  WaitForPriorKernel();
  AllowDependentLaunch();

  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kStreamWarps;
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(kStreamWarps) + warp;
  // Copies row `r` (when it exists) into `slot` as one commit group, an empty group otherwise,
  // so that every lane counts the same groups.
  const auto fetch = [&](std::int64_t r, int slot) {
    if (r < rows) {
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const bool valid = lane + 32 * c < chunks;
        const std::int64_t at = r * width + min(lane + 32 * c, chunks - 1) * kVec;
        CopyAsync16(&ring[warp][slot][0][32 * c + lane], in + at, valid);
        if (residual != nullptr) {
          CopyAsync16(&ring[warp][slot][1][32 * c + lane], residual + at, valid);
        }
      }
    }
    CommitCopies();
  };
  fetch(first, 0);
  fetch(first + stride, 1);
  WaitCopies<2>();  // gamma and beta, copied by the whole block
  __syncthreads();
  const float* scale = gamma != nullptr ? affine[0] : nullptr;
  const float* shift = beta != nullptr ? affine[1] : nullptr;

  int slot = 0;
  for (std::int64_t row = first; row < rows; row += stride, slot ^= 1) {
    WaitCopies<1>();  // this row's group; the next row's stays in flight
    // Each lane reads back only the 16-byte pieces it copied itself; the barrier keeps the
    // compiler from moving those reads above the wait (whose asm names no memory).
    __syncwarp();
    RowChunks<T, kChunks> values;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      values.Add(ring[warp][slot][0][32 * c + lane], c, /*first=*/true);
      if (residual != nullptr) values.Add(ring[warp][slot][1][32 * c + lane], c, false);
    }
    __syncwarp();  // the slot's reads are done before the copy into it is issued
    fetch(row + 2 * stride, slot);
    NormalizeAndStoreRow(values, lane, chunks, width, eps, scale, shift, out, row * width);
  }
  WaitCopies<0>();  // no copy may still be writing shared memory when the block exits
}

template <typename T, int kPerLane>
__global__ void __launch_bounds__(kThreads)
    WarpLayerNormKernel(const T* in, const T* residual, const float* gamma, const float* beta,
                        T* out, std::int64_t rows, int width, float eps) {
  WaitForPriorKernel();
  AllowDependentLaunch();
  const std::int64_t row = blockIdx.x * static_cast<std::int64_t>(kRowsPerBlock) + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const std::int64_t base = row * width;
  float v[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) v[i] = Load(in, base + min(lane + 32 * i, width - 1));
  if (residual != nullptr) {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) v[i] += Load(residual, base + min(lane + 32 * i, width - 1));
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    if (lane + 32 * i >= width) v[i] = 0.f;
  }
  const float2 stats = WarpRowStatistics(v, width, lane, eps);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int c = min(lane + 32 * i, width - 1);
    float y = (v[i] - stats.x) * stats.y;
    if (gamma != nullptr) y *= gamma[c];
    if (beta != nullptr) y += beta[c];
    if (lane + 32 * i < width) Store(out, base + c, y);
  }
}

unsigned Blocks(std::int64_t count) {
  const std::int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

template <typename Src>
cudaError_t ConvertFrom(const Src* src, void* dst, ElemType dst_type, std::int64_t count,
                        bool programmatic, cudaStream_t stream) {
  const dim3 grid(Blocks(count)), block(kThreads);
  switch (dst_type) {
    case ElemType::kFp32:
      return LaunchProgrammatic(programmatic, ConvertKernel<Src, float>, grid, block, stream, src,
                                static_cast<float*>(dst), count);
    case ElemType::kFp16:
      return LaunchProgrammatic(programmatic, ConvertKernel<Src, __half>, grid, block, stream, src,
                                static_cast<__half*>(dst), count);
    case ElemType::kBf16:
      return LaunchProgrammatic(programmatic, ConvertKernel<Src, __nv_bfloat16>, grid, block,
                                stream, src, static_cast<__nv_bfloat16*>(dst), count);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t Pointwise(const void* in, const void* bias, const void* residual, void* out,
                      std::int64_t rows, std::int64_t width, plan::Activation act,
                      cudaStream_t stream) {
  PointwiseKernel<T><<<Blocks(rows * width), kThreads, 0, stream>>>(
      static_cast<const T*>(in), static_cast<const T*>(bias), static_cast<const T*>(residual),
      static_cast<T*>(out), rows, width, act);
  return cudaGetLastError();
}

// Launches the streaming kernel with as many blocks as the GPU holds at once, fewer when the
// rows do not need them (device queries, not stream operations: allowed while capturing). The
// occupancy query costs microseconds, so its answer is kept per device for eager launches;
// concurrent first launches may both ask, and store the same answer.
template <typename T, int kChunks>
cudaError_t LaunchStreaming(const T* x, const T* r, const float* gamma, const float* beta, T* y,
                            std::int64_t rows, int width, float eps, bool programmatic,
                            cudaStream_t stream) {
  const auto kernel = StreamingLayerNormKernel<T, kChunks>;
  constexpr int kKeptDevices = 16;
  static std::atomic<std::int64_t> kept_resident[kKeptDevices] = {};
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  std::int64_t resident = device < kKeptDevices ? kept_resident[device].load() : 0;
  if (resident == 0) {
    int sms = 0;
    int per_sm = 0;
    if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
        e != cudaSuccess) {
      return e;
    }
    if (cudaError_t e =
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kStreamThreads, 0);
        e != cudaSuccess) {
      return e;
    }
    resident = static_cast<std::int64_t>(sms) * std::max(per_sm, 1);
    if (device < kKeptDevices) kept_resident[device].store(resident);
  }
  const std::int64_t needed = (rows + kStreamWarps - 1) / kStreamWarps;
  const dim3 grid(static_cast<unsigned>(std::min(needed, resident)));
  return LaunchProgrammatic(programmatic, kernel, grid, dim3(kStreamThreads), stream, x, r, gamma,
                            beta, y, rows, width, eps);
}

template <typename T>
cudaError_t LayerNorm(const void* in, const void* residual, const float* gamma,
                      const float* beta, void* out, std::int64_t rows, std::int64_t width,
                      float eps, LayerNormSchedule schedule, bool programmatic,
                      cudaStream_t stream) {
  const auto* x = static_cast<const T*>(in);
  const auto* r = static_cast<const T*>(residual);
  auto* y = static_cast<T*>(out);
  const dim3 warp_blocks(static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock));
  const int w = static_cast<int>(width);
  constexpr std::int64_t kVec = 16 / static_cast<std::int64_t>(sizeof(T));
  // Rows start on 16 bytes when the width is a multiple of the vector (buffers are
  // cudaMalloc'd, hence 256-byte aligned).
  const std::int64_t lane_chunks = (width / kVec + 31) / 32;
  const auto warps = [&](auto kernel) {
    return LaunchProgrammatic(programmatic, kernel, warp_blocks, dim3(kThreads), stream, x, r,
                              gamma, beta, y, rows, w, eps);
  };
  if (schedule == LayerNormSchedule::kStreaming) {  // width checked by LaunchLayerNorm
    const auto streaming = [&](auto chunks) {
      return LaunchStreaming<T, decltype(chunks)::value>(x, r, gamma, beta, y, rows, w, eps,
                                                        programmatic, stream);
    };
    if (lane_chunks == 1) return streaming(std::integral_constant<int, 1>{});
    if (lane_chunks == 2) return streaming(std::integral_constant<int, 2>{});
    if (lane_chunks == 3) return streaming(std::integral_constant<int, 3>{});
    return streaming(std::integral_constant<int, 4>{});
  }
  if (width % kVec == 0 && lane_chunks <= 4) {
    if (lane_chunks == 1) return warps(VectorLayerNormKernel<T, 1>);
    if (lane_chunks == 2) return warps(VectorLayerNormKernel<T, 2>);
    // 768 in 16-bit storage: no lane loads a chunk it drops.
    if (lane_chunks == 3) return warps(VectorLayerNormKernel<T, 3>);
    return warps(VectorLayerNormKernel<T, 4>);
  }
  if (width <= 32 * 8) return warps(WarpLayerNormKernel<T, 8>);
  return LaunchProgrammatic(programmatic, LayerNormKernel<T>, dim3(static_cast<unsigned>(rows)),
                            dim3(kThreads), stream, x, r, gamma, beta, y, width, eps);
}

}  // namespace

std::size_t ElemSize(ElemType type) { return type == ElemType::kFp32 ? 4 : 2; }

cudaError_t LaunchConvert(const void* src, ElemType src_type, void* dst, ElemType dst_type,
                          std::size_t count, bool programmatic, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const auto n = static_cast<std::int64_t>(count);
  switch (src_type) {
    case ElemType::kFp32:
      return ConvertFrom(static_cast<const float*>(src), dst, dst_type, n, programmatic, stream);
    case ElemType::kFp16:
      return ConvertFrom(static_cast<const __half*>(src), dst, dst_type, n, programmatic, stream);
    case ElemType::kBf16:
      return ConvertFrom(static_cast<const __nv_bfloat16*>(src), dst, dst_type, n, programmatic,
                         stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchFillRandom(void* data, ElemType type, std::size_t count, std::uint32_t seed,
                             cudaStream_t stream) {
  const auto n = static_cast<std::int64_t>(count);
  if (n == 0) return cudaSuccess;
  switch (type) {
    case ElemType::kFp32:
      FillRandomKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<float*>(data), n, seed);
      break;
    case ElemType::kFp16:
      FillRandomKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<__half*>(data), n, seed);
      break;
    case ElemType::kBf16:
      FillRandomKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), n,
                                                          seed);
      break;
  }
  return cudaGetLastError();
}

cudaError_t LaunchReadAll(void* data, std::size_t bytes, cudaStream_t stream) {
  const auto vectors = static_cast<std::int64_t>(bytes / sizeof(uint4));
  if (vectors == 0) return cudaSuccess;
  ReadAllKernel<<<Blocks(vectors), kThreads, 0, stream>>>(static_cast<const uint4*>(data), vectors,
                                                         static_cast<unsigned*>(data));
  return cudaGetLastError();
}

cudaError_t LaunchPointwise(const void* in, const void* bias, const void* residual, void* out,
                            std::int64_t rows, std::int64_t width, plan::Activation act,
                            ElemType type, cudaStream_t stream) {
  if (rows * width == 0) return cudaSuccess;
  switch (type) {
    case ElemType::kFp32: return Pointwise<float>(in, bias, residual, out, rows, width, act, stream);
    case ElemType::kFp16: return Pointwise<__half>(in, bias, residual, out, rows, width, act, stream);
    case ElemType::kBf16:
      return Pointwise<__nv_bfloat16>(in, bias, residual, out, rows, width, act, stream);
  }
  return cudaErrorInvalidValue;
}

bool StreamingLayerNormSupports(ElemType type, std::int64_t width) {
  const auto vec = static_cast<std::int64_t>(16 / ElemSize(type));
  return width > 0 && width % vec == 0 && width <= 4 * 32 * vec;
}

cudaError_t LaunchLayerNorm(const void* in, const void* residual, const float* gamma,
                            const float* beta, void* out, std::int64_t rows, std::int64_t width,
                            float eps, ElemType type, bool programmatic, cudaStream_t stream,
                            LayerNormSchedule schedule) {
  if (rows == 0) return cudaSuccess;
  if (schedule == LayerNormSchedule::kStreaming && !StreamingLayerNormSupports(type, width)) {
    return cudaErrorInvalidValue;
  }
  return ForElemType(type, [&](auto zero) {
    using T = decltype(zero);
    return LayerNorm<T>(in, residual, gamma, beta, out, rows, width, eps, schedule, programmatic,
                        stream);
  });
}

}  // namespace ltserve::gpu
