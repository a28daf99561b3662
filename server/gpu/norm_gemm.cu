// A Linear and the LayerNorm after it in one kernel (norm_gemm.h). As in the split-K kernel
// (skinny_gemm.cu, whose header comment explains the fragment layout), Yᵀ = W·Xᵀ is computed
// with W as mma's A, each thread's 16 bytes (8 consecutive k) used as its fragments as they
// are, and the few rows of X as mma's n. What differs is who owns what:
//
// - A cluster owns `m_tile` whole rows of Y. Its blocks split the outputs (16 × col_tiles
//   each), so the LayerNorm's row statistics are a sum over the cluster's blocks, exchanged
//   through distributed shared memory: no global round trip, no second kernel.
// - A block streams its W rows and X rows through a ring of shared-memory stages, 128 K wide,
//   every thread copying a share of each (cp.async), all stages but the one being multiplied
//   in flight. A first version loaded each warp's W and X straight into registers one step
//   ahead and ran DRAM at a few percent of its rate (bench/RESULTS.md); bulk copies into the
//   ring were slower still. The chunk's four 32-wide K steps go to the block's 8 warps in
//   turn.
// - The warps' partial sums meet in shared memory and are added in warp order; the row sums
//   are added lane by lane in a fixed shuffle tree and the blocks' sums in rank order by every
//   block alike, so each block normalises with bit-identical statistics and reruns are
//   bit-equal.
//
// The statistics are the executor's LayerNorm's (kernels.cu): mean first, then the mean of
// squared deviations from it, in fp32, on the pre-norm sum before it is rounded to 16 bits
// (the separate kernel reads it rounded; the tests hold both to the same double reference).
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/cluster_launch.cuh"
#include "gpu/kernels_device.cuh"
#include "gpu/norm_gemm.h"
#include "gpu/tensor_core_device.cuh"

namespace ltserve::gpu {
namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kVector = 8;  // 16-bit elements per 16-byte load
constexpr int kStep = 32;   // K per pair of mmas (two m16n8k16)
constexpr int kMaxCluster = 16;

template <int kMTile, int kColTiles, int kStages>
struct Shape {
  static constexpr int kBlockCols = 16 * kColTiles;  // outputs per block
  static constexpr int kNTiles = kMTile / 8;         // mma n tiles of X rows
  static constexpr int kStride = kBlockCols + 4;     // floats per row of a partial: fewer bank conflicts
  static constexpr int kTile = kMTile * kStride;     // floats per warp's partial
  static constexpr int kPerThread = (kMTile * kBlockCols + kThreads - 1) / kThreads;
  // A stage: K columns kChunk wide of the block's W rows, then of its X rows. A staged row is
  // padded to 64 bytes past a multiple of 128, so the 8 threads of a quarter-warp (rows g and
  // g + 1 at four 16-byte offsets) read 8 distinct 16-byte bank groups.
  static constexpr int kChunk = 128;
  static constexpr int kStepsPerChunk = kChunk / kStep;
  static constexpr int kRowHalves = kChunk + 32;
  static constexpr int kStageRows = kBlockCols + kMTile;
  static constexpr int kStageHalves = kStageRows * kRowHalves;
  static constexpr int kVectorsPerRow = kChunk / kVector;
  // The ring, reused for the warps' partial sums once the K loop is over.
  static constexpr int kRingBytes = kStages * kStageHalves * 2;
  static constexpr int kSmemBytes =
      kRingBytes > kWarps * kTile * 4 ? kRingBytes : kWarps * kTile * 4;
  static_assert(kBlockCols <= 64, "a warp's lanes cover a block's outputs in two passes");
  static_assert(kSmemBytes + (kTile + 4 * kMTile) * 4 <= 227 * 1024, "shared memory");
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// The sum of `v` over a warp's lanes, the same tree for every warp (and so the same bits).
__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
#endif

template <typename T, int kMTile, int kColTiles, int kStages>
__global__ void __launch_bounds__(kThreads, 1)
    NormGemmKernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                   const T* __restrict__ residual, const float* __restrict__ gamma,
                   const float* __restrict__ beta, float eps, T* __restrict__ y, int rows,
                   int n_total, int k_total) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using S = Shape<kMTile, kColTiles, kStages>;
  extern __shared__ __align__(16) unsigned char smem[];
  auto* ring = reinterpret_cast<std::uint16_t*>(smem);  // [kStages][kStageRows][kRowHalves]
  auto* partial = reinterpret_cast<float*>(smem);       // [warp][m][n], after the K loop
  __shared__ float pre_norm[S::kTile];                  // [m][n]: this block's slice of each row
  __shared__ float row_sum[kMTile];                     // read by every block of the cluster
  __shared__ float row_squares[kMTile];                 // likewise
  __shared__ float row_mean[kMTile];
  __shared__ float row_rstd[kMTile];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int blocks = static_cast<int>(cluster.num_blocks());
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int block_n0 = rank * S::kBlockCols;
  const int m0 = blockIdx.y * kMTile;
  const int chunks = (k_total + S::kChunk - 1) / S::kChunk;
  const auto* w16 = reinterpret_cast<const std::uint16_t*>(w);
  const auto* x16 = reinterpret_cast<const std::uint16_t*>(x);

  // Every thread copies a share of a stage: W's rows first, then X's (zeros past the matrices).
  const auto stage_w = [&](int chunk) {
    std::uint16_t* stage = ring + (chunk % kStages) * S::kStageHalves;
    for (int e = threadIdx.x; e < S::kBlockCols * S::kVectorsPerRow; e += kThreads) {
      const int r = e / S::kVectorsPerRow;
      const int k = chunk * S::kChunk + (e % S::kVectorsPerRow) * kVector;
      const int n = block_n0 + r;
      const bool valid = n < n_total && k < k_total;
      CopyAsync16(stage + r * S::kRowHalves + (e % S::kVectorsPerRow) * kVector,
                  valid ? w16 + static_cast<std::int64_t>(n) * k_total + k : w16, valid);
    }
  };
  const auto stage_x = [&](int chunk) {
    std::uint16_t* stage = ring + (chunk % kStages) * S::kStageHalves + S::kBlockCols * S::kRowHalves;
    for (int e = threadIdx.x; e < kMTile * S::kVectorsPerRow; e += kThreads) {
      const int r = e / S::kVectorsPerRow;
      const int k = chunk * S::kChunk + (e % S::kVectorsPerRow) * kVector;
      const int m = m0 + r;
      const bool valid = m < rows && k < k_total;
      CopyAsync16(stage + r * S::kRowHalves + (e % S::kVectorsPerRow) * kVector,
                  valid ? x16 + static_cast<std::int64_t>(m) * k_total + k : x16, valid);
    }
  };

  float acc[kColTiles][S::kNTiles][4];
#pragma unroll
  for (int c = 0; c < kColTiles; ++c) {
#pragma unroll
    for (int i = 0; i < S::kNTiles; ++i) acc[c][i][0] = acc[c][i][1] = acc[c][i][2] = acc[c][i][3] = 0.f;
  }

  // The first kStages − 1 stages in flight before any mma. W is not the kernel before's
  // output: under a programmatic launch its copies start while that kernel drains. X is, so
  // it is copied only after the wait. One commit group per stage, empty ones too, so that
  // "stage c has landed" is always "at most kStages − 2 groups pending".
  for (int c = 0; c < kStages - 1 && c < chunks; ++c) stage_w(c);
  WaitForPriorKernel();
  AllowDependentLaunch();
  for (int c = 0; c < kStages - 1; ++c) {
    if (c < chunks) stage_x(c);
    CommitCopies();
  }
  for (int c = 0; c < chunks; ++c) {
    WaitCopies<kStages - 2>();
    // Stage c is visible to every warp, and every warp is done with the stage refilled below
    // (chunk c − 1's).
    __syncthreads();
    if (const int next = c + kStages - 1; next < chunks) {
      stage_w(next);
      stage_x(next);
    }
    CommitCopies();
    const std::uint16_t* stage = ring + (c % kStages) * S::kStageHalves;
    // The chunk's 32-wide K steps go to the warps round-robin across chunks.
#pragma unroll
    for (int q = 0; q < S::kStepsPerChunk; ++q) {
      if ((c * S::kStepsPerChunk + q) % kWarps != warp) continue;
      const int k_off = q * kStep + t * kVector;
      uint4 xv[S::kNTiles];
#pragma unroll
      for (int i = 0; i < S::kNTiles; ++i) {
        xv[i] = *reinterpret_cast<const uint4*>(
            stage + (S::kBlockCols + i * 8 + g) * S::kRowHalves + k_off);
      }
#pragma unroll
      for (int c_tile = 0; c_tile < kColTiles; ++c_tile) {
        const uint4 w_lo = *reinterpret_cast<const uint4*>(
            stage + (c_tile * 16 + g) * S::kRowHalves + k_off);
        const uint4 w_hi = *reinterpret_cast<const uint4*>(
            stage + (c_tile * 16 + 8 + g) * S::kRowHalves + k_off);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const std::uint32_t a[4] = {SlotPair(w_lo, 2 * j), SlotPair(w_hi, 2 * j),
                                      SlotPair(w_lo, 2 * j + 1), SlotPair(w_hi, 2 * j + 1)};
#pragma unroll
          for (int i = 0; i < S::kNTiles; ++i) {
            Mma<T>::Run(acc[c_tile][i], a, SlotPair(xv[i], 2 * j), SlotPair(xv[i], 2 * j + 1));
          }
        }
      }
    }
  }
  WaitCopies<0>();
  __syncthreads();  // the ring is free for the partial sums

  // Accumulator element e of tile (c, i) is Yᵀ[output c·16 + g (+8 for e >= 2)]
  // [row i·8 + 2t (+1 for odd e)].
  float* mine = partial + warp * S::kTile;
#pragma unroll
  for (int c = 0; c < kColTiles; ++c) {
#pragma unroll
    for (int i = 0; i < S::kNTiles; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int n_local = c * 16 + g + (e >= 2 ? 8 : 0);
        const int m_local = i * 8 + 2 * t + (e & 1);
        mine[m_local * S::kStride + n_local] = acc[c][i][e];
      }
    }
  }
  __syncthreads();

  // The pre-norm value of this thread's elements: the warps' partials in warp order, bias and
  // residual; outputs past n_total are 0 and left out of the statistics below.
  float value[S::kPerThread];
#pragma unroll
  for (int j = 0; j < S::kPerThread; ++j) {
    const int o = threadIdx.x + j * kThreads;
    value[j] = 0.f;
    if (o >= kMTile * S::kBlockCols) continue;
    const int m_local = o / S::kBlockCols;
    const int n_local = o % S::kBlockCols;
    const int n = block_n0 + n_local;
    const int m = m0 + m_local;
    const int at = m_local * S::kStride + n_local;
    if (n < n_total) {
      float v = 0.f;
#pragma unroll
      for (int p = 0; p < kWarps; ++p) v += partial[p * S::kTile + at];
      if (bias != nullptr) v += Load(bias, n);
      if (residual != nullptr && m < rows) v += Load(residual, static_cast<std::int64_t>(m) * n_total + n);
      value[j] = v;
    }
    pre_norm[at] = value[j];
  }
  __syncthreads();

  // Per row, this block's share of a statistic: lanes take outputs lane and lane + 32.
  const auto block_share = [&](int m_local, auto&& term) {
    float s = 0.f;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int n_local = lane + 32 * half;
      if (n_local < S::kBlockCols && block_n0 + n_local < n_total) {
        s += term(pre_norm[m_local * S::kStride + n_local]);
      }
    }
    return WarpSum(s);
  };
  // Per row, the cluster's total of a statistic, from every block's share in rank order.
  const auto cluster_total = [&](float* shares, int m_local) {
    return WarpSum(lane < blocks ? cluster.map_shared_rank(shares, lane)[m_local] : 0.f);
  };

  for (int m_local = warp; m_local < kMTile; m_local += kWarps) {
    const float s = block_share(m_local, [](float v) { return v; });
    if (lane == 0) row_sum[m_local] = s;
  }
  cluster.sync();  // every block's row sums are readable
  for (int m_local = warp; m_local < kMTile; m_local += kWarps) {
    const float mean = cluster_total(row_sum, m_local) / static_cast<float>(n_total);
    const float s = block_share(m_local, [mean](float v) { return (v - mean) * (v - mean); });
    if (lane == 0) {
      row_mean[m_local] = mean;
      row_squares[m_local] = s;
    }
  }
  cluster.sync();  // every block's sums of squares are readable
  for (int m_local = warp; m_local < kMTile; m_local += kWarps) {
    const float variance = cluster_total(row_squares, m_local) / static_cast<float>(n_total);
    if (lane == 0) row_rstd[m_local] = rsqrtf(variance + eps);
  }
  // Past this barrier no block reads another's shared memory, so any block may exit; it
  // also makes row_mean and row_rstd visible within the block.
  cluster.sync();

#pragma unroll
  for (int j = 0; j < S::kPerThread; ++j) {
    const int o = threadIdx.x + j * kThreads;
    if (o >= kMTile * S::kBlockCols) continue;
    const int m_local = o / S::kBlockCols;
    const int n = block_n0 + o % S::kBlockCols;
    const int m = m0 + m_local;
    if (m >= rows || n >= n_total) continue;
    float v = (value[j] - row_mean[m_local]) * row_rstd[m_local];
    if (gamma != nullptr) v *= gamma[n];
    if (beta != nullptr) v += beta[n];
    Store(y, static_cast<std::int64_t>(m) * n_total + n, v);
  }
#endif
}

template <typename T, int kMTile, int kColTiles, int kStages>
cudaError_t LaunchShape(int cluster, const void* x, const void* w, const void* bias,
                        const void* residual, const float* gamma, const float* beta, float eps,
                        void* y, std::int64_t rows, std::int64_t n, std::int64_t k,
                        bool programmatic, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(cluster), static_cast<unsigned>((rows + kMTile - 1) / kMTile));
  return LaunchInClusters<NormGemmKernel<T, kMTile, kColTiles, kStages>>(
      dim3(static_cast<unsigned>(cluster)), grid, dim3(kThreads),
      Shape<kMTile, kColTiles, kStages>::kSmemBytes, programmatic, stream, static_cast<const T*>(x),
      static_cast<const T*>(w), static_cast<const T*>(bias), static_cast<const T*>(residual),
      gamma, beta, eps, static_cast<T*>(y), static_cast<int>(rows), static_cast<int>(n),
      static_cast<int>(k));
}

template <typename T, int kMTile, int kColTiles>
cudaError_t DispatchStages(const NormGemmConfig& c, int cluster, const void* x, const void* w,
                           const void* bias, const void* residual, const float* gamma,
                           const float* beta, float eps, void* y, std::int64_t rows,
                           std::int64_t n, std::int64_t k, bool programmatic,
                           cudaStream_t stream) {
  if (c.stages == 4) {
    return LaunchShape<T, kMTile, kColTiles, 4>(cluster, x, w, bias, residual, gamma, beta, eps,
                                                y, rows, n, k, programmatic, stream);
  }
  if (c.stages == 8) {
    return LaunchShape<T, kMTile, kColTiles, 8>(cluster, x, w, bias, residual, gamma, beta, eps,
                                                y, rows, n, k, programmatic, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T, int kMTile>
cudaError_t DispatchCols(const NormGemmConfig& c, int cluster, const void* x, const void* w,
                         const void* bias, const void* residual, const float* gamma,
                         const float* beta, float eps, void* y, std::int64_t rows, std::int64_t n,
                         std::int64_t k, bool programmatic, cudaStream_t stream) {
  switch (c.col_tiles) {
    case 1: return DispatchStages<T, kMTile, 1>(c, cluster, x, w, bias, residual, gamma, beta, eps, y, rows, n, k, programmatic, stream);
    case 2: return DispatchStages<T, kMTile, 2>(c, cluster, x, w, bias, residual, gamma, beta, eps, y, rows, n, k, programmatic, stream);
    case 3: return DispatchStages<T, kMTile, 3>(c, cluster, x, w, bias, residual, gamma, beta, eps, y, rows, n, k, programmatic, stream);
    case 4: return DispatchStages<T, kMTile, 4>(c, cluster, x, w, bias, residual, gamma, beta, eps, y, rows, n, k, programmatic, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T>
cudaError_t Dispatch(const NormGemmConfig& c, int cluster, const void* x, const void* w,
                     const void* bias, const void* residual, const float* gamma,
                     const float* beta, float eps, void* y, std::int64_t rows, std::int64_t n,
                     std::int64_t k, bool programmatic, cudaStream_t stream) {
  switch (c.m_tile) {
    case 8: return DispatchCols<T, 8>(c, cluster, x, w, bias, residual, gamma, beta, eps, y, rows, n, k, programmatic, stream);
    case 16: return DispatchCols<T, 16>(c, cluster, x, w, bias, residual, gamma, beta, eps, y, rows, n, k, programmatic, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

std::string NormGemmConfig::Describe(std::int64_t out_features) const {
  if (split_k.has_value()) return "split-K GEMM with a LayerNorm tail, " + split_k->Describe();
  return "GEMM + LayerNorm, " + std::to_string(NormGemmClusterSize(*this, out_features)) +
         " blocks x " + std::to_string(16 * col_tiles) + " outputs, " + std::to_string(m_tile) +
         "-row tiles, " + std::to_string(stages) + " stages of 128 K";
}

int NormGemmClusterSize(const NormGemmConfig& config, std::int64_t out_features) {
  if (config.split_k.has_value()) return config.split_k->cluster;
  if (config.col_tiles < 1 || out_features < 1) return 0;
  const std::int64_t cols = 16 * static_cast<std::int64_t>(config.col_tiles);
  const std::int64_t blocks = (out_features + cols - 1) / cols;
  return blocks > kMaxCluster ? 0 : static_cast<int>(blocks);
}

bool NormGemmSupports(int sm_major, ElemType type, std::int64_t rows, std::int64_t out_features,
                      std::int64_t in_features) {
  return sm_major >= 9 && type != ElemType::kFp32 && rows >= 1 && rows <= kNormGemmMaxRows &&
         out_features >= 1 && out_features <= kNormGemmMaxOutFeatures &&
         in_features >= kVector && in_features % kVector == 0 &&
         in_features < (std::int64_t{1} << 30);
}

std::vector<NormGemmConfig> NormGemmCandidates(std::int64_t rows, std::int64_t out_features,
                                               std::int64_t in_features) {
  std::vector<NormGemmConfig> candidates;
  if (!NormGemmSupports(9, ElemType::kBf16, rows, out_features, in_features)) return candidates;
  // 8-row tiles for up to 8 rows; beyond that 16-row tiles, and 8-row ones too while twice the
  // clusters still fit the SMs about once (up to 128 rows).
  std::vector<std::uint8_t> m_tiles;
  if (rows > 8) m_tiles.push_back(16);
  if (rows <= 128) m_tiles.push_back(8);
  for (const std::uint8_t m_tile : m_tiles) {
    for (std::uint8_t col_tiles = 1; col_tiles <= 4; ++col_tiles) {
      for (const std::uint8_t stages : {std::uint8_t{4}, std::uint8_t{8}}) {
        const NormGemmConfig config{m_tile, col_tiles, stages};
        // Fewer than 2 blocks leave the SMs idle for no saving; a cluster of more than 16 is
        // refused.
        const int blocks = NormGemmClusterSize(config, out_features);
        if (blocks < 2 && col_tiles > 1) continue;
        if (blocks >= 1) candidates.push_back(config);
      }
    }
  }
  for (const SkinnyGemmConfig& split :
       SkinnyGemmLayerNormCandidates(rows, out_features, in_features)) {
    candidates.push_back(NormGemmConfig::SplitK(split));
  }
  return candidates;
}

cudaError_t LaunchNormGemm(const NormGemmConfig& config, const void* x, const void* w,
                           const void* bias, const void* residual, const void* norm_residual,
                           const float* gamma, const float* beta, float eps, void* y,
                           std::int64_t rows, std::int64_t out_features,
                           std::int64_t in_features, ElemType type, int* row_tile_counters,
                           bool programmatic, cudaStream_t stream) {
  if (!NormGemmSupports(9, type, rows, out_features, in_features) ||
      (residual != nullptr && norm_residual != nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (config.split_k.has_value()) {
    return LaunchSkinnyGemmLayerNorm(*config.split_k, x, w, bias, residual, norm_residual, gamma,
                                     beta, eps, y, rows, out_features, in_features, type,
                                     row_tile_counters, kNormGemmMaxRowTiles, programmatic,
                                     stream);
  }
  const int cluster = NormGemmClusterSize(config, out_features);
  if (cluster < 1 || (config.m_tile != 8 && config.m_tile != 16)) return cudaErrorInvalidValue;
  // The cluster kernel adds the residual to the fp32 sum and never rounds before normalising:
  // either residual joins the same way.
  if (residual == nullptr) residual = norm_residual;
  if (type == ElemType::kBf16) {
    return Dispatch<__nv_bfloat16>(config, cluster, x, w, bias, residual, gamma, beta, eps, y,
                                   rows, out_features, in_features, programmatic, stream);
  }
  return Dispatch<__half>(config, cluster, x, w, bias, residual, gamma, beta, eps, y, rows,
                          out_features, in_features, programmatic, stream);
}

}  // namespace ltserve::gpu
