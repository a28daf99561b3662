// The split-K GEMM for few rows (skinny_gemm.h). Y = X·Wᵀ is computed as its transpose
// Yᵀ[N,M] = W[N,K]·Xᵀ so that W, the big operand, is mma's A (16 rows of N) and the few rows of
// X are mma's n (8 a tile): no tensor-core work is wasted on padding W, only on padding X.
//
// Loads without shuffles. mma.m16n8k16 gives thread (g = lane / 4, t = lane % 4) the K slots
// {2t, 2t+1, 2t+8, 2t+9} of A's rows g and g + 8 and of B's column g. Which real k a slot
// stands for is ours to choose, as long as A and B agree: here, over two mmas j = 0, 1, the
// slots of t are the 8 consecutive k at t·8 of a 32-wide step, in the order (j, slot). So each
// thread reads W rows g and g + 8 and X row g as one 16-byte load each, the four threads of a
// group cover 64 contiguous bytes of a row, and the 16-byte vector is the fragment as it is:
// components 2j and 2j + 1 are the slot pairs (2t, 2t+1) and (2t+8, 2t+9) of mma j.
//
// A block (4 warps) stages a K chunk of X in shared memory (cp.async, double-buffered), each
// warp multiplies its W rows, held in registers, against it, and the block moves to the chunk
// `cluster` chunks on. The blocks of a cluster share the same W rows and X rows and split K;
// each leaves its fp32 partial sums in its shared memory, and after a cluster barrier every
// thread of the cluster sums the partials of some outputs from all blocks (in rank order, so
// results are bit-reproducible) and applies bias, residual and activation.
//
// With the LayerNorm tail, a row is finished only when every cluster along the outputs (grid x)
// has stored its part, and no grid-wide barrier exists inside a launch. So each cluster, after
// its stores, makes them visible device-wide and counts itself on its row tile's counter; the
// cluster that brings the count to gridDim.x is the last and the only one that sees the whole
// rows: it reads them back from L2 and normalises them in place, one warp a row. The others
// leave at once, and nothing waits on anything, so no schedule of clusters can deadlock.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "gpu/cluster_launch.cuh"
#include "gpu/kernels_device.cuh"
#include "gpu/skinny_gemm.h"
#include "gpu/tensor_core_device.cuh"

namespace ltserve::gpu {
namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kVector = 8;  // 16-bit elements per 16-byte load
constexpr int kStep = 32;   // K per pair of mmas (two m16n8k16)
// Halves of padding per staged X row: a row's stride is then 64 bytes past a multiple of
// 128, so the 8 threads of a quarter-warp (rows g, g + 1 at 4 offsets each) read 8 distinct
// 16-byte bank groups.
constexpr int kPad = 32;
constexpr int kMaxCluster = 16;

template <int kMTile, int kRowTiles, int kUnroll>
struct Shape {
  static constexpr int kChunk = kStep * kUnroll;  // K per block step
  static constexpr int kStride = kChunk + kPad;   // halves per staged X row
  static constexpr int kBlockRows = kWarps * 16 * kRowTiles;  // outputs (W rows) per block
  static constexpr int kPartStride = kBlockRows + 4;  // floats per partial row: fewer bank conflicts
  static constexpr int kStageBytes = 2 * kMTile * kStride * 2;
  static constexpr int kPartBytes = kMTile * kPartStride * 4;
  // The partial sums reuse the staging buffers once the K loop is over.
  static constexpr int kSmemBytes = kStageBytes > kPartBytes ? kStageBytes : kPartBytes;
  static_assert(kSmemBytes <= 48 * 1024, "static shared memory");
};

// What the kernel does after the GEMM: bias, residual (the types of x) and activation before
// the store and, with row_tile_counters, the LayerNorm tail.
struct Epilogue {
  const void* bias = nullptr;
  const void* residual = nullptr;
  plan::Activation act = plan::Activation::kNone;
  const float* gamma = nullptr;  // the LayerNorm's; null: 1
  const float* beta = nullptr;   // null: 0
  float eps = 0.f;
  // The LayerNorm step's own residual: added in fp32 to the stored rows, as the LayerNorm
  // kernel adds it to the GEMM's stored output, not rounded into the GEMM's sum.
  const void* norm_residual = nullptr;
  int* row_tile_counters = nullptr;  // null: no LayerNorm
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// From L2, never a stale L1 line: other clusters wrote these rows during this launch.
__device__ __forceinline__ float LoadFromL2(const __half* p, std::int64_t i) {
  return __half2float(__ldcg(p + i));
}
__device__ __forceinline__ float LoadFromL2(const __nv_bfloat16* p, std::int64_t i) {
  return __bfloat162float(__ldcg(p + i));
}

// The LayerNorm tail, called by every thread of a cluster once its stores are issued: the
// last cluster of the row tile normalises rows [m0, m0 + m_tile) of y in place, each warp
// two rows at a time, with the warp LayerNorm kernel's statistics (WarpRowStatistics); the
// others return.
template <typename T>
__device__ void NormaliseRowTileIfLast(const Epilogue& e, T* y, int m0, int m_tile, int rows,
                                       int n_total) {
  __shared__ int last;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int splits = static_cast<int>(cluster.num_blocks());
  __threadfence();  // this thread's stores are visible device-wide before the count below
  cluster.sync();   // every thread of the cluster has stored and fenced
  if (rank == 0 && threadIdx.x == 0) {
    // A fence of the counting thread's own, after the barrier, orders every store the barrier
    // made it see before the count (the memory model's cumulativity), not only its own.
    __threadfence();
    // atomicInc wraps to 0 on the count that reaches gridDim.x - 1: the last cluster leaves
    // the counter zero for the next launch without a store of its own.
    const unsigned clusters = gridDim.x;
    auto* counter = reinterpret_cast<unsigned*>(e.row_tile_counters + blockIdx.z);
    const bool is_last = atomicInc(counter, clusters - 1) == clusters - 1;
    if (is_last) __threadfence();  // the other clusters' stores, seen through the count, first
    for (int s = 0; s < splits; ++s) *cluster.map_shared_rank(&last, s) = is_last ? 1 : 0;
  }
  cluster.sync();  // `last` is written in every block, and no block reads another's after this
  if (last == 0) return;

  // A warp holds two rows at once, so that their L2 round trips overlap: one cluster
  // normalises the whole tile (up to 64 rows over as few as 4 warps), and each row alone is a
  // chain of a round trip, two shuffle trees and the stores.
  constexpr int kPerLane = static_cast<int>(kSkinnyLayerNormMaxWidth / 32);
  constexpr int kRowsAtOnce = 2;
  const int lane = threadIdx.x % 32;
  const int warps = splits * kWarps;
  const int tile_rows = min(m_tile, rows - m0);
  const auto* norm_residual = static_cast<const T*>(e.norm_residual);
  for (int r0 = rank * kWarps + threadIdx.x / 32; r0 < tile_rows; r0 += kRowsAtOnce * warps) {
    float v[kRowsAtOnce][kPerLane];
#pragma unroll
    for (int j = 0; j < kRowsAtOnce; ++j) {
      const int r = r0 + j * warps;
      const std::int64_t base = static_cast<std::int64_t>(m0 + r) * n_total;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int c = lane + 32 * i;
        if (r < tile_rows && c < n_total) {
          v[j][i] = LoadFromL2(y, base + c);
          if (norm_residual != nullptr) v[j][i] += Load(norm_residual, base + c);
        } else {
          v[j][i] = 0.f;
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kRowsAtOnce; ++j) {
      const int r = r0 + j * warps;
      if (r >= tile_rows) break;  // warp-uniform
      const std::int64_t base = static_cast<std::int64_t>(m0 + r) * n_total;
      const float2 stats = WarpRowStatistics(v[j], n_total, lane, e.eps);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int c = lane + 32 * i;
        if (c >= n_total) break;
        float out = (v[j][i] - stats.x) * stats.y;
        if (e.gamma != nullptr) out *= e.gamma[c];
        if (e.beta != nullptr) out += e.beta[c];
        Store(y, base + c, out);
      }
    }
  }
}
#endif

// The L2 prefetch before the programmatic wait (SkinnyGemmKernel): the block's bias and, with
// the LayerNorm tail, gamma and beta, each otherwise a DRAM round trip in series with the sums.
// The block's later W chunks are not prefetched: requested all at once they made the one-row
// 4096 x 4096 GEMM 1.19x slower on the H200 for nothing at 128 rows (bench/RESULTS.md).
template <typename T, int kBlockRows, bool kLayerNorm>
__device__ __forceinline__ void PrefetchEpilogueInputs(const Epilogue& e, int block_n0,
                                                       int n_total) {
  constexpr int kLineElems = 128 / static_cast<int>(sizeof(T));
  const int lines_of_outputs = (kBlockRows + kLineElems - 1) / kLineElems;
  if (e.bias != nullptr && static_cast<int>(threadIdx.x) < lines_of_outputs) {
    const int n = block_n0 + static_cast<int>(threadIdx.x) * kLineElems;
    if (n < n_total) PrefetchToL2(static_cast<const T*>(e.bias) + n);
  }
  if constexpr (kLayerNorm) {
    PrefetchAffineToL2(e.gamma, e.beta, n_total, static_cast<int>(threadIdx.x), kThreads);
  }
}

// kLayerNorm: with the LayerNorm tail. A kernel of its own: the tail's registers (two rows of
// up to 1,024 a warp) would otherwise raise the plain GEMM's count (96 to 128 at 8-row tiles,
// with spills) and lower its occupancy.
template <typename T, int kMTile, int kRowTiles, int kUnroll, bool kLayerNorm>
__global__ void __launch_bounds__(kThreads)
    SkinnyGemmKernel(const T* __restrict__ x, const T* __restrict__ w, T* y, int rows,
                     int n_total, int k_total, Epilogue epilogue) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using S = Shape<kMTile, kRowTiles, kUnroll>;
  const auto* bias = static_cast<const T*>(epilogue.bias);
  const auto* residual = static_cast<const T*>(epilogue.residual);
  constexpr int kNTiles = kMTile / 8;  // mma n tiles of X rows
  __shared__ __align__(16) unsigned char smem[S::kSmemBytes];
  auto* staged = reinterpret_cast<std::uint16_t*>(smem);  // [2][kMTile][kStride]
  auto* partial = reinterpret_cast<float*>(smem);         // [kMTile][kPartStride], after the loop
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int splits = static_cast<int>(cluster.num_blocks());
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int block_n0 = blockIdx.x * S::kBlockRows;
  const int n0 = block_n0 + warp * 16 * kRowTiles;
  const int m0 = blockIdx.z * kMTile;
  const int chunks = (k_total + S::kChunk - 1) / S::kChunk;
  const auto* x16 = reinterpret_cast<const std::uint16_t*>(x);

  // This chunk's W and the next one's: the next chunk's loads are in flight while this one's
  // mmas run, so a block pays DRAM latency once, not once per chunk.
  uint4 wr[kRowTiles][2][kUnroll];
  uint4 wr_next[kRowTiles][2][kUnroll];
  const auto load_w = [&](uint4 (&dst)[kRowTiles][2][kUnroll], int chunk) {
#pragma unroll
    for (int r = 0; r < kRowTiles; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int n = n0 + r * 16 + h * 8 + g;
        const T* row = w + static_cast<std::int64_t>(n < n_total ? n : 0) * k_total;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int k = chunk * S::kChunk + u * kStep + t * kVector;
          dst[r][h][u] = n < n_total && k < k_total
                             ? __ldg(reinterpret_cast<const uint4*>(row + k))
                             : uint4{0u, 0u, 0u, 0u};
        }
      }
    }
  };
  const auto stage_x = [&](int chunk, int buffer) {
    constexpr int kVectors = S::kChunk / kVector;  // per staged row
    for (int e = threadIdx.x; e < kMTile * kVectors; e += kThreads) {
      const int r = e / kVectors;
      const int v = e % kVectors;
      const int m = m0 + r;
      const int k = chunk * S::kChunk + v * kVector;
      const bool valid = m < rows && k < k_total;
      CopyAsync16(staged + (buffer * kMTile + r) * S::kStride + v * kVector,
                  valid ? x16 + static_cast<std::int64_t>(m) * k_total + k : x16, valid);
    }
    CommitCopies();
  };

  float acc[kRowTiles][kNTiles][4];
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r) {
#pragma unroll
    for (int i = 0; i < kNTiles; ++i) acc[r][i][0] = acc[r][i][1] = acc[r][i][2] = acc[r][i][3] = 0.f;
  }

  // W is not the kernel before's output: under a programmatic launch its first chunk is in
  // flight while that kernel drains. X is, so it is staged only after the wait.
  int chunk = rank;
  if (chunk < chunks) load_w(wr, chunk);
  PrefetchEpilogueInputs<T, S::kBlockRows, kLayerNorm>(epilogue, block_n0, n_total);
  WaitForPriorKernel();
  AllowDependentLaunch();
  int buffer = 0;
  if (chunk < chunks) stage_x(chunk, 0);
  for (; chunk < chunks; chunk += splits) {
    const int next = chunk + splits;
    if (next < chunks) {
      load_w(wr_next, next);
      stage_x(next, buffer ^ 1);  // in flight during this chunk's mmas
      WaitCopies<1>();
    } else {
      WaitCopies<0>();
    }
    __syncthreads();  // this chunk's X is in shared memory for every warp
    const std::uint16_t* xs = staged + (buffer * kMTile + g) * S::kStride + t * kVector;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int i = 0; i < kNTiles; ++i) {
        const uint4 xv = *reinterpret_cast<const uint4*>(xs + i * 8 * S::kStride + u * kStep);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
          for (int r = 0; r < kRowTiles; ++r) {
            const std::uint32_t a[4] = {SlotPair(wr[r][0][u], 2 * j), SlotPair(wr[r][1][u], 2 * j),
                                        SlotPair(wr[r][0][u], 2 * j + 1), SlotPair(wr[r][1][u], 2 * j + 1)};
            Mma<T>::Run(acc[r][i], a, SlotPair(xv, 2 * j), SlotPair(xv, 2 * j + 1));
          }
        }
      }
    }
    __syncthreads();  // every warp is done with this buffer before it is staged again
    buffer ^= 1;
    if (next < chunks) {
#pragma unroll
      for (int r = 0; r < kRowTiles; ++r) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) wr[r][h][u] = wr_next[r][h][u];
        }
      }
    }
  }

  // Accumulator element e of tile (r, i) is Yᵀ[row g (+8 for e >= 2)][column 2t (+1 for odd e)].
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r) {
#pragma unroll
    for (int i = 0; i < kNTiles; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int n_local = warp * 16 * kRowTiles + r * 16 + g + (e >= 2 ? 8 : 0);
        const int m_local = i * 8 + 2 * t + (e & 1);
        partial[m_local * S::kPartStride + n_local] = acc[r][i][e];
      }
    }
  }
  cluster.sync();  // every block's partial sums are in its shared memory

  // Consecutive threads take consecutive outputs of a row of Y: coalesced stores. A thread
  // sums kOutputsInFlight outputs at a time with every load they need (the blocks' partials
  // through distributed shared memory, bias, residual) issued before the first add: at 64-row
  // tiles a thread has 8 outputs, and summed one after another each costs its round trips in
  // series. The adds keep rank order, so the bits are those of one output at a time.
  constexpr int kOutputsInFlight = 4;
  constexpr int kRanksAtOnce = 4;
  constexpr int kOutputs = kMTile * S::kBlockRows;
  const int output_stride = splits * kThreads;
  for (int o0 = rank * kThreads + threadIdx.x; o0 < kOutputs;
       o0 += kOutputsInFlight * output_stride) {
    int at[kOutputsInFlight];
    std::int64_t out[kOutputsInFlight];
    bool valid[kOutputsInFlight];
    float bias_v[kOutputsInFlight];
    float residual_v[kOutputsInFlight];
    float v[kOutputsInFlight];
#pragma unroll
    for (int b = 0; b < kOutputsInFlight; ++b) {
      const int o = o0 + b * output_stride;
      const int m_local = o / S::kBlockRows;
      const int n_local = o % S::kBlockRows;
      const int m = m0 + m_local;
      const int n = block_n0 + n_local;
      valid[b] = o < kOutputs && m < rows && n < n_total;
      at[b] = valid[b] ? m_local * S::kPartStride + n_local : 0;
      out[b] = valid[b] ? static_cast<std::int64_t>(m) * n_total + n : 0;
      bias_v[b] = valid[b] && bias != nullptr ? Load(bias, n) : 0.f;
      residual_v[b] = valid[b] && residual != nullptr ? Load(residual, out[b]) : 0.f;
      v[b] = 0.f;
    }
    // Past the cluster's ranks a slot adds 0.f, which changes no sum (v is never -0 here).
    for (int s0 = 0; s0 < splits; s0 += kRanksAtOnce) {
      float part[kRanksAtOnce][kOutputsInFlight];
#pragma unroll
      for (int j = 0; j < kRanksAtOnce; ++j) {
        const int s = s0 + j;
        const float* from = cluster.map_shared_rank(partial, s < splits ? s : rank);
#pragma unroll
        for (int b = 0; b < kOutputsInFlight; ++b) {
          part[j][b] = s < splits && valid[b] ? from[at[b]] : 0.f;
        }
      }
#pragma unroll
      for (int j = 0; j < kRanksAtOnce; ++j) {
#pragma unroll
        for (int b = 0; b < kOutputsInFlight; ++b) v[b] += part[j][b];
      }
    }
#pragma unroll
    for (int b = 0; b < kOutputsInFlight; ++b) {
      if (!valid[b]) continue;
      float sum = v[b];
      if (bias != nullptr) sum += bias_v[b];
      if (residual != nullptr) sum += residual_v[b];
      Store(y, out[b], Activate(epilogue.act, sum));
    }
  }
  if constexpr (kLayerNorm) {
    // Its first cluster barrier also keeps every block here until the partials are read.
    NormaliseRowTileIfLast(epilogue, y, m0, kMTile, rows, n_total);
  } else {
    cluster.sync();  // no block leaves while another may still read its shared memory
  }
#endif
}

template <typename T, int kMTile, int kRowTiles, int kUnroll, bool kLayerNorm>
cudaError_t LaunchShape(int cluster, const void* x, const void* w, void* y, std::int64_t rows,
                        std::int64_t n, std::int64_t k, const Epilogue& epilogue,
                        bool programmatic, cudaStream_t stream) {
  using S = Shape<kMTile, kRowTiles, kUnroll>;
  // The cluster's blocks split K along y; x covers the outputs, z the rows.
  const dim3 grid(static_cast<unsigned>((n + S::kBlockRows - 1) / S::kBlockRows),
                  static_cast<unsigned>(cluster),
                  static_cast<unsigned>((rows + kMTile - 1) / kMTile));
  return LaunchInClusters<SkinnyGemmKernel<T, kMTile, kRowTiles, kUnroll, kLayerNorm>>(
      dim3(1, static_cast<unsigned>(cluster)), grid, dim3(kThreads), 0, programmatic, stream,
      static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y),
      static_cast<int>(rows), static_cast<int>(n), static_cast<int>(k), epilogue);
}

// The LayerNorm tail is compiled for the unroll-4 shapes only (SkinnyGemmLayerNormCandidates).
template <typename T, int kMTile>
cudaError_t DispatchTiles(const SkinnyGemmConfig& c, const void* x, const void* w, void* y,
                          std::int64_t rows, std::int64_t n, std::int64_t k,
                          const Epilogue& epilogue, bool programmatic, cudaStream_t stream) {
  const bool norm = epilogue.row_tile_counters != nullptr;
  if (c.row_tiles == 1 && c.unroll == 4) {
    return norm ? LaunchShape<T, kMTile, 1, 4, true>(c.cluster, x, w, y, rows, n, k, epilogue,
                                                     programmatic, stream)
                : LaunchShape<T, kMTile, 1, 4, false>(c.cluster, x, w, y, rows, n, k, epilogue,
                                                      programmatic, stream);
  }
  if (c.row_tiles == 2 && c.unroll == 4) {
    return norm ? LaunchShape<T, kMTile, 2, 4, true>(c.cluster, x, w, y, rows, n, k, epilogue,
                                                     programmatic, stream)
                : LaunchShape<T, kMTile, 2, 4, false>(c.cluster, x, w, y, rows, n, k, epilogue,
                                                      programmatic, stream);
  }
  if constexpr (kMTile <= 32) {
    if (c.row_tiles == 1 && c.unroll == 8 && !norm) {
      return LaunchShape<T, kMTile, 1, 8, false>(c.cluster, x, w, y, rows, n, k, epilogue,
                                                 programmatic, stream);
    }
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t Dispatch(const SkinnyGemmConfig& c, const void* x, const void* w, void* y,
                     std::int64_t rows, std::int64_t n, std::int64_t k, const Epilogue& epilogue,
                     bool programmatic, cudaStream_t stream) {
  switch (c.m_tile) {
    case 8: return DispatchTiles<T, 8>(c, x, w, y, rows, n, k, epilogue, programmatic, stream);
    case 16: return DispatchTiles<T, 16>(c, x, w, y, rows, n, k, epilogue, programmatic, stream);
    case 32: return DispatchTiles<T, 32>(c, x, w, y, rows, n, k, epilogue, programmatic, stream);
    case 64: return DispatchTiles<T, 64>(c, x, w, y, rows, n, k, epilogue, programmatic, stream);
    default: return cudaErrorInvalidValue;
  }
}

// What both launches refuse: a shape the kernel does not take or a configuration it was not
// compiled for.
bool Launchable(const SkinnyGemmConfig& config, ElemType type, std::int64_t rows,
                std::int64_t out_features, std::int64_t in_features, bool layer_norm) {
  return SkinnyGemmSupports(9, type, rows, in_features) && out_features >= 1 &&
         out_features <= (std::int64_t{1} << 30) && SkinnyGemmCompiled(config, layer_norm) &&
         (rows + config.m_tile - 1) / config.m_tile <= 65535;
}

cudaError_t Launch(const SkinnyGemmConfig& config, const void* x, const void* w, void* y,
                   std::int64_t rows, std::int64_t n, std::int64_t k, ElemType type,
                   const Epilogue& epilogue, bool programmatic, cudaStream_t stream) {
  if (type == ElemType::kBf16) {
    return Dispatch<__nv_bfloat16>(config, x, w, y, rows, n, k, epilogue, programmatic, stream);
  }
  return Dispatch<__half>(config, x, w, y, rows, n, k, epilogue, programmatic, stream);
}

std::int64_t MTileFor(std::int64_t rows) {
  std::int64_t tile = 8;
  while (tile < rows && tile < 64) tile *= 2;
  return tile;
}

}  // namespace

bool SkinnyGemmCompiled(const SkinnyGemmConfig& c, bool layer_norm) {
  const bool m_tile = c.m_tile == 8 || c.m_tile == 16 || c.m_tile == 32 || c.m_tile == 64;
  const bool shape = c.unroll == 4 ? c.row_tiles == 1 || c.row_tiles == 2
                                   : c.unroll == 8 && c.row_tiles == 1 && c.m_tile <= 32 &&
                                         !layer_norm;
  const bool cluster =
      c.cluster >= 1 && c.cluster <= kMaxCluster && (c.cluster & (c.cluster - 1)) == 0;
  return m_tile && shape && cluster;
}

std::string SkinnyGemmConfig::Describe() const {
  return "split-K " + std::to_string(cluster) + " x " + std::to_string(kWarps * 16 * row_tiles) +
         " rows x " + std::to_string(kStep * unroll) + " K, " + std::to_string(m_tile) +
         "-row X tiles";
}

bool SkinnyGemmSupports(int sm_major, ElemType type, std::int64_t rows, std::int64_t in_features) {
  return sm_major >= 9 && type != ElemType::kFp32 && rows >= 1 && rows <= kSkinnyGemmMaxRows &&
         in_features >= kVector && in_features % kVector == 0 &&
         in_features < (std::int64_t{1} << 30);
}

namespace {

// Every compiled configuration with X tiles of `m_tile` rows (with the LayerNorm tail or
// without) and a cluster no larger than K's chunks, appended to `out`.
void AppendCandidates(std::uint8_t m_tile, bool layer_norm, std::int64_t in_features,
                      std::vector<SkinnyGemmConfig>& out) {
  const std::pair<int, int> shapes[] = {{1, 4}, {2, 4}, {1, 8}};  // (row_tiles, unroll)
  for (const auto& [row_tiles, unroll] : shapes) {
    const std::int64_t chunks = (in_features + kStep * unroll - 1) / (kStep * unroll);
    for (int cluster = 1; cluster <= kMaxCluster && cluster <= chunks; cluster *= 2) {
      const SkinnyGemmConfig config{m_tile, static_cast<std::uint8_t>(row_tiles),
                                    static_cast<std::uint8_t>(unroll),
                                    static_cast<std::uint8_t>(cluster)};
      if (SkinnyGemmCompiled(config, layer_norm)) out.push_back(config);
    }
  }
}

}  // namespace

std::vector<SkinnyGemmConfig> SkinnyGemmCandidates(std::int64_t rows, std::int64_t out_features,
                                                   std::int64_t in_features) {
  std::vector<SkinnyGemmConfig> candidates;
  if (rows < 1 || out_features < 1 || in_features < 1) return candidates;
  AppendCandidates(static_cast<std::uint8_t>(MTileFor(rows)), /*layer_norm=*/false, in_features,
                   candidates);
  return candidates;
}

cudaError_t LaunchSkinnyGemm(const SkinnyGemmConfig& config, const void* x, const void* w,
                             const void* bias, const void* residual, void* y, std::int64_t rows,
                             std::int64_t out_features, std::int64_t in_features,
                             plan::Activation act, ElemType type, bool programmatic,
                             cudaStream_t stream) {
  if (!Launchable(config, type, rows, out_features, in_features, /*layer_norm=*/false)) {
    return cudaErrorInvalidValue;
  }
  Epilogue epilogue;
  epilogue.bias = bias;
  epilogue.residual = residual;
  epilogue.act = act;
  return Launch(config, x, w, y, rows, out_features, in_features, type, epilogue, programmatic,
                stream);
}

std::vector<SkinnyGemmConfig> SkinnyGemmLayerNormCandidates(std::int64_t rows,
                                                            std::int64_t out_features,
                                                            std::int64_t in_features) {
  std::vector<SkinnyGemmConfig> candidates;
  if (rows < 1 || rows > kSkinnyGemmMaxRows || out_features < 1 ||
      out_features > kSkinnyLayerNormMaxWidth || in_features < 1) {
    return candidates;
  }
  // Smaller X tiles than the rows need, too: each row tile's last cluster normalises its rows
  // alone, so more tiles share the tail out (64 rows over as few as 4 warps is 8 round trips
  // in series), for W read once more from the L2 per extra tile. Which wins is the timing's.
  for (std::int64_t m_tile = 8; m_tile <= MTileFor(rows); m_tile *= 2) {
    AppendCandidates(static_cast<std::uint8_t>(m_tile), /*layer_norm=*/true, in_features,
                     candidates);
  }
  return candidates;
}

std::int64_t SkinnyGemmRowTiles(const SkinnyGemmConfig& config, std::int64_t rows) {
  return config.m_tile < 1 || rows < 1 ? 0 : (rows + config.m_tile - 1) / config.m_tile;
}

cudaError_t LaunchSkinnyGemmLayerNorm(const SkinnyGemmConfig& config, const void* x,
                                      const void* w, const void* bias, const void* residual,
                                      const void* norm_residual, const float* gamma,
                                      const float* beta, float eps, void* y,
                                      std::int64_t rows, std::int64_t out_features,
                                      std::int64_t in_features, ElemType type,
                                      int* row_tile_counters, std::int64_t counter_count,
                                      bool programmatic, cudaStream_t stream) {
  if (!Launchable(config, type, rows, out_features, in_features, /*layer_norm=*/true) ||
      out_features > kSkinnyLayerNormMaxWidth || row_tile_counters == nullptr ||
      SkinnyGemmRowTiles(config, rows) > counter_count ||
      (residual != nullptr && norm_residual != nullptr)) {
    return cudaErrorInvalidValue;
  }
  Epilogue epilogue;
  epilogue.bias = bias;
  epilogue.residual = residual;
  epilogue.gamma = gamma;
  epilogue.beta = beta;
  epilogue.eps = eps;
  epilogue.norm_residual = norm_residual;
  epilogue.row_tile_counters = row_tile_counters;
  return Launch(config, x, w, y, rows, out_features, in_features, type, epilogue, programmatic,
                stream);
}

}  // namespace ltserve::gpu
