// The staged-weights GEMM (staged_gemm.h). Y = X·Wᵀ is computed as its transpose Yᵀ = W·Xᵀ,
// W as mma's A (16 outputs a tile) and X as its B (8 rows a tile), as in the split-K kernel.
//
// A block (4 warps) owns 64 outputs and `kMTile` rows, and one slice of K: the `cluster`
// blocks of a cluster take consecutive slices. It copies its W slice into shared memory first
// (two cp.async groups, halves of the slice), then waits for the kernel ahead, then copies
// its X slice the same way, so that the multiply over the first half of K starts while the
// second half of X is still arriving. Each warp multiplies 32 outputs by half the rows, with
// fragments read by ldmatrix: per 16 of K a warp reads 2 A and kMTile/16 B fragment quads for
// 2·kMTile/16 mmas, where the split-K kernel reads one X vector for every two mmas.
//
// The partial sums then go to shared memory (the staging area is reused) and, after a
// cluster barrier, every thread of the cluster sums some outputs over all blocks in rank
// order (bit-reproducible), adds bias and residual, applies the activation and stores.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/cluster_launch.cuh"
#include "gpu/kernels_device.cuh"
#include "gpu/staged_gemm.h"
#include "gpu/tensor_core_device.cuh"

namespace ltserve::gpu {
namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kVector = 8;  // 16-bit elements per 16-byte copy
constexpr int kNTile = static_cast<int>(kStagedGemmBlockOutputs);
// A slice is a multiple of this much K: two k16 steps, and its two halves whole k16 steps.
constexpr int kSliceStep = 32;
// Halves of padding per staged row: 2·slice is a multiple of 64 bytes, so with 16 more the
// eight rows one ldmatrix reads start 4 or 20 banks apart and never share a bank.
constexpr int kPad = 8;
constexpr int kPartStride = kNTile + 4;  // floats per row of partial sums
// Portable clusters only: a block takes most of an SM's shared memory, and 16 such blocks
// would need 16 SMs of one GPC free at once.
constexpr int kMaxCluster = 8;

struct Epilogue {
  const void* bias = nullptr;
  const void* residual = nullptr;
  plan::Activation act = plan::Activation::kNone;
};

// Copies rows [0, row_count) x K [k_from, k_to) of a slice from global (row stride k_total,
// rows from `first_row`, K from `k0`) into shared memory (row stride `stride` halves), 16 bytes
// a copy, zero-filled past `valid_rows` or past k_end: the multiply then reads zeros there.
__device__ __forceinline__ void StageRows(std::uint16_t* dst, int stride, const std::uint16_t* src,
                                          int first_row, int row_count, int valid_rows,
                                          int k_total, int k0, int k_end, int k_from, int k_to) {
  const int vectors = (k_to - k_from) / kVector;
  for (int e = threadIdx.x; e < row_count * vectors; e += kThreads) {
    const int r = e / vectors;
    const int k = k_from + (e % vectors) * kVector;
    const int row = first_row + r;
    const bool valid = row < valid_rows && k0 + k < k_end;
    CopyAsync16(dst + r * stride + k,
                valid ? src + static_cast<std::int64_t>(row) * k_total + k0 + k : src, valid);
  }
  CommitCopies();
}

template <typename T, int kMTile>
__global__ void __launch_bounds__(kThreads)
    StagedGemmKernel(const T* __restrict__ x, const T* __restrict__ w, T* y, int rows,
                     int n_total, int k_total, int slice, Epilogue epilogue) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kWarpRows = kMTile / 2;        // X rows a warp multiplies
  constexpr int kBTiles = kWarpRows / 8;       // its mma n tiles
  extern __shared__ __align__(16) unsigned char smem[];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int splits = static_cast<int>(cluster.num_blocks());
  const int stride = slice + kPad;
  auto* ws = reinterpret_cast<std::uint16_t*>(smem);  // [kNTile][stride]
  std::uint16_t* xs = ws + kNTile * stride;           // [kMTile][stride]
  auto* partial = reinterpret_cast<float*>(smem);     // [kMTile][kPartStride], after the multiply
  const int block_n0 = blockIdx.x * kNTile;
  const int m0 = blockIdx.z * kMTile;
  const int k0 = rank * slice;
  const int k_end = min(k_total, k0 + slice);
  // Halves of the slice: whole k16 steps each.
  const int half = (slice / 2 + 15) / 16 * 16;
  const auto* w16 = reinterpret_cast<const std::uint16_t*>(w) +
                    static_cast<std::int64_t>(block_n0) * k_total;
  const auto* x16 = reinterpret_cast<const std::uint16_t*>(x) + static_cast<std::int64_t>(m0) * k_total;

  // W does not depend on the kernel ahead: its copies are in flight while that one drains.
  StageRows(ws, stride, w16, 0, kNTile, n_total - block_n0, k_total, k0, k_end, 0, half);
  StageRows(ws, stride, w16, 0, kNTile, n_total - block_n0, k_total, k0, k_end, half, slice);
  if (epilogue.bias != nullptr && threadIdx.x == 0 && block_n0 < n_total) {
    PrefetchToL2(static_cast<const T*>(epilogue.bias) + block_n0);
  }
  WaitForPriorKernel();
  AllowDependentLaunch();
  StageRows(xs, stride, x16, 0, kMTile, rows - m0, k_total, k0, k_end, 0, half);
  StageRows(xs, stride, x16, 0, kMTile, rows - m0, k_total, k0, k_end, half, slice);

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int warp_n = warp % 2;  // outputs [32·warp_n, +32)
  const int warp_m = warp / 2;  // rows [kWarpRows·warp_m, +kWarpRows)
  float acc[2][kBTiles][4];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int i = 0; i < kBTiles; ++i) acc[r][i][0] = acc[r][i][1] = acc[r][i][2] = acc[r][i][3] = 0.f;
  }
  // ldmatrix addresses: for A (a 16 x 16 W tile), lane L gives row L % 16 at K + 8·(L / 16),
  // so the four 8 x 8 tiles come back as a0..a3 of mma's A; for B (two 8-row X tiles), lane L
  // gives row 8·(L / 16) + L % 8 at K + 8·((L / 8) % 2): b0, b1 of the first X tile, then of
  // the second.
  const std::uint16_t* a_row = ws + (warp_n * 32 + lane % 16) * stride + (lane / 16) * 8;
  const std::uint16_t* b_row =
      xs + (warp_m * kWarpRows + (lane / 16) * 8 + lane % 8) * stride + ((lane / 8) % 2) * 8;
  const auto multiply = [&](int k_from, int k_to) {
#pragma unroll 2
    for (int k = k_from; k < k_to; k += 16) {
      std::uint32_t a[2][4];
      LoadTiles(a[0], a_row + k);
      LoadTiles(a[1], a_row + 16 * stride + k);
      std::uint32_t b[kBTiles / 2][4];
#pragma unroll
      for (int p = 0; p < kBTiles / 2; ++p) LoadTiles(b[p], b_row + p * 16 * stride + k);
#pragma unroll
      for (int i = 0; i < kBTiles; ++i) {
        const std::uint32_t b0 = b[i / 2][(i % 2) * 2];
        const std::uint32_t b1 = b[i / 2][(i % 2) * 2 + 1];
        Mma<T>::Run(acc[0][i], a[0], b0, b1);
        Mma<T>::Run(acc[1][i], a[1], b0, b1);
      }
    }
  };
  WaitCopies<1>();  // W and the first half of X, for this thread's copies
  __syncthreads();  // and for every thread's
  multiply(0, half);
  WaitCopies<0>();
  __syncthreads();
  multiply(half, slice);
  __syncthreads();  // every warp is done with the staged slices before they are overwritten

  // Accumulator element e of tile (r, i) is Yᵀ[output g (+8 for e >= 2)][row 2t (+1 if odd e)].
  const int g = lane / 4;
  const int t = lane % 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int i = 0; i < kBTiles; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int n_local = warp_n * 32 + r * 16 + g + (e >= 2 ? 8 : 0);
        const int m_local = warp_m * kWarpRows + i * 8 + 2 * t + (e & 1);
        partial[m_local * kPartStride + n_local] = acc[r][i][e];
      }
    }
  }
  cluster.sync();  // every block's partial sums are in its shared memory

  // Consecutive threads take consecutive outputs of a row: coalesced stores. Each thread
  // issues the loads of kInFlight outputs (partials of every rank, bias, residual) before
  // adding, so that their round trips overlap; the adds keep rank order.
  constexpr int kInFlight = 4;
  constexpr int kOutputs = kMTile * kNTile;
  const auto* bias = static_cast<const T*>(epilogue.bias);
  const auto* residual = static_cast<const T*>(epilogue.residual);
  const int output_stride = splits * kThreads;
  for (int o0 = rank * kThreads + threadIdx.x; o0 < kOutputs; o0 += kInFlight * output_stride) {
    int at[kInFlight];
    std::int64_t out[kInFlight];
    bool valid[kInFlight];
    float bias_v[kInFlight];
    float residual_v[kInFlight];
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      const int o = o0 + j * output_stride;
      const int m = m0 + o / kNTile;
      const int n = block_n0 + o % kNTile;
      valid[j] = o < kOutputs && m < rows && n < n_total;
      at[j] = valid[j] ? (o / kNTile) * kPartStride + o % kNTile : 0;
      out[j] = valid[j] ? static_cast<std::int64_t>(m) * n_total + n : 0;
      bias_v[j] = valid[j] && bias != nullptr ? Load(bias, n) : 0.f;
      residual_v[j] = valid[j] && residual != nullptr ? Load(residual, out[j]) : 0.f;
    }
    float sum[kInFlight] = {};
    for (int s = 0; s < splits; ++s) {
      const float* from = cluster.map_shared_rank(partial, s);
#pragma unroll
      for (int j = 0; j < kInFlight; ++j) sum[j] += valid[j] ? from[at[j]] : 0.f;
    }
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      if (!valid[j]) continue;
      // The split-K kernel's order: the sum, then bias, then residual.
      float value = sum[j];
      if (bias != nullptr) value += bias_v[j];
      if (residual != nullptr) value += residual_v[j];
      Store(y, out[j], Activate(epilogue.act, value));
    }
  }
  cluster.sync();  // no block leaves while another may still read its shared memory
#endif
}

template <typename T, int kMTile>
cudaError_t LaunchTile(int cluster, const void* x, const void* w, void* y, std::int64_t rows,
                       std::int64_t n, std::int64_t k, int slice, std::size_t smem_bytes,
                       const Epilogue& epilogue, bool programmatic, cudaStream_t stream) {
  // The cluster's blocks split K along y; x covers the outputs, z the rows.
  const dim3 grid(static_cast<unsigned>((n + kNTile - 1) / kNTile),
                  static_cast<unsigned>(cluster),
                  static_cast<unsigned>((rows + kMTile - 1) / kMTile));
  return LaunchInClustersUpTo<StagedGemmKernel<T, kMTile>>(
      static_cast<std::size_t>(kStagedGemmMaxSharedBytes), dim3(1, static_cast<unsigned>(cluster)),
      grid, dim3(kThreads), smem_bytes, programmatic, stream, static_cast<const T*>(x),
      static_cast<const T*>(w), static_cast<T*>(y), static_cast<int>(rows), static_cast<int>(n),
      static_cast<int>(k), slice, epilogue);
}

template <typename T>
cudaError_t Dispatch(const StagedGemmConfig& c, const void* x, const void* w, void* y,
                     std::int64_t rows, std::int64_t n, std::int64_t k, int slice,
                     std::size_t smem_bytes, const Epilogue& epilogue, bool programmatic,
                     cudaStream_t stream) {
  if (c.m_tile == 64) {
    return LaunchTile<T, 64>(c.cluster, x, w, y, rows, n, k, slice, smem_bytes, epilogue,
                             programmatic, stream);
  }
  return LaunchTile<T, 128>(c.cluster, x, w, y, rows, n, k, slice, smem_bytes, epilogue,
                            programmatic, stream);
}

bool Compiled(const StagedGemmConfig& c) {
  return (c.m_tile == 64 || c.m_tile == 128) && c.cluster >= 1 && c.cluster <= kMaxCluster &&
         (c.cluster & (c.cluster - 1)) == 0;
}

}  // namespace

std::string StagedGemmConfig::Describe() const {
  return "staged " + std::to_string(cluster) + " x " + std::to_string(kNTile) + " rows, " +
         std::to_string(m_tile) + "-row X tiles";
}

bool StagedGemmSupports(int sm_major, ElemType type, std::int64_t rows, std::int64_t in_features) {
  return sm_major >= 9 && type != ElemType::kFp32 && rows >= 1 && rows <= kStagedGemmMaxRows &&
         in_features >= kVector && in_features % kVector == 0 &&
         in_features < (std::int64_t{1} << 30);
}

std::int64_t StagedGemmSlice(const StagedGemmConfig& config, std::int64_t in_features) {
  if (config.cluster < 1 || in_features < 1) return 0;
  const std::int64_t per_block = (in_features + config.cluster - 1) / config.cluster;
  return (per_block + kSliceStep - 1) / kSliceStep * kSliceStep;
}

std::int64_t StagedGemmSharedBytes(const StagedGemmConfig& config, std::int64_t in_features) {
  const std::int64_t staged =
      (kNTile + config.m_tile) * (StagedGemmSlice(config, in_features) + kPad) * 2;
  const std::int64_t partials = std::int64_t{config.m_tile} * kPartStride * 4;
  return staged > partials ? staged : partials;
}

std::vector<StagedGemmConfig> StagedGemmCandidates(std::int64_t rows, std::int64_t out_features,
                                                   std::int64_t in_features) {
  std::vector<StagedGemmConfig> candidates;
  if (!StagedGemmSupports(9, ElemType::kBf16, rows, in_features) || out_features < 1) {
    return candidates;
  }
  const auto m_tile = static_cast<std::uint8_t>(rows <= 64 ? 64 : 128);
  for (int cluster = 1; cluster <= kMaxCluster; cluster *= 2) {
    const StagedGemmConfig config{m_tile, static_cast<std::uint8_t>(cluster)};
    // Every block gets some K: the last slice starts before in_features.
    const bool every_block_works = (cluster - 1) * StagedGemmSlice(config, in_features) < in_features;
    if (every_block_works && StagedGemmSharedBytes(config, in_features) <= kStagedGemmMaxSharedBytes) {
      candidates.push_back(config);
    }
  }
  return candidates;
}

cudaError_t LaunchStagedGemm(const StagedGemmConfig& config, const void* x, const void* w,
                             const void* bias, const void* residual, void* y, std::int64_t rows,
                             std::int64_t out_features, std::int64_t in_features,
                             plan::Activation act, ElemType type, bool programmatic,
                             cudaStream_t stream) {
  if (!Compiled(config) || !StagedGemmSupports(9, type, rows, in_features) ||
      out_features < 1 || out_features > (std::int64_t{1} << 30) ||
      (rows + config.m_tile - 1) / config.m_tile > 65535 ||
      StagedGemmSharedBytes(config, in_features) > kStagedGemmMaxSharedBytes) {
    return cudaErrorInvalidValue;
  }
  Epilogue epilogue;
  epilogue.bias = bias;
  epilogue.residual = residual;
  epilogue.act = act;
  const int slice = static_cast<int>(StagedGemmSlice(config, in_features));
  const auto smem = static_cast<std::size_t>(StagedGemmSharedBytes(config, in_features));
  if (type == ElemType::kBf16) {
    return Dispatch<__nv_bfloat16>(config, x, w, y, rows, out_features, in_features, slice,
                                   smem, epilogue, programmatic, stream);
  }
  return Dispatch<__half>(config, x, w, y, rows, out_features, in_features, slice, smem,
                          epilogue, programmatic, stream);
}

}  // namespace ltserve::gpu
