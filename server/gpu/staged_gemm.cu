// The staged-weights GEMM (staged_gemm.h) on Hopper's own instructions: the copy engine stages
// the tiles (tensor-map copies) and the warpgroup multiplies them (wgmma). Y = X·Wᵀ is computed
// as its transpose Yᵀ = W·Xᵀ, W as wgmma's A (64 outputs) and X as its B (the kMTile rows).
//
// Why this form: the first version (16-byte cp.async copies from every thread, mma.sync from
// ldmatrix fragments) issued 11,000-18,000 instructions an SM at 128 rows where cuBLASLt issues
// ~2,600, and was bound by them; a second one (a bulk copy per row from one warp) moved the wait
// to its barriers, since copies of a few hundred bytes keep the copy engine far from busy
// (bench/RESULTS.md, 2026-12-07). Here one thread asks for whole 64 x 64 boxes (8 KiB of W,
// 8-16 KiB of X), and a 64-element step of K is 4 wgmmas for the whole block.
//
// A block (one warpgroup) owns 64 outputs, kMTile rows and one slice of K; the `cluster` blocks
// of a cluster take consecutive slices. Its W slice is asked for before the wait for the kernel
// ahead (the weights depend on nothing), its X slice after, a barrier per 64 of K, so that the
// multiply over the first box starts while the others arrive. Boxes reaching past K, N or the
// rows arrive as zeros and add nothing. The partial sums then go to shared memory (the staging
// area is reused) and, after a cluster barrier, every thread of the cluster sums some outputs
// over all blocks in rank order (bit-reproducible), adds bias and residual, applies the
// activation and stores.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/bulk_copy_device.cuh"
#include "gpu/cluster_launch.cuh"
#include "gpu/kernels_device.cuh"
#include "gpu/staged_gemm.h"
#include "gpu/warpgroup_mma_device.cuh"

namespace ltserve::gpu {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 128;  // one warpgroup
constexpr int kNTile = static_cast<int>(kStagedGemmBlockOutputs);
// K a tensor-map box spans: one 128-byte swizzled row. A slice is whole boxes.
constexpr int kBoxK = kSwizzledRowElements;
// Boxes a slice has at most: 12 x (64 + 64) rows x 128 bytes is the most that fits
// kStagedGemmMaxSharedBytes, so every launch the launcher takes has a barrier per box.
constexpr int kMaxBoxes = 12;
constexpr int kPartStride = kNTile + 4;  // floats per row of partial sums
// Swizzled boxes start on this boundary.
constexpr int kSwizzleAlignment = kSwizzleAtomBytes;
// Portable clusters only: 16 blocks of this size would need 16 SMs of one GPC free at once.
constexpr int kMaxCluster = 8;

struct Epilogue {
  const void* bias = nullptr;
  const void* residual = nullptr;
  plan::Activation act = plan::Activation::kNone;
};

template <typename T, int kMTile>
__global__ void __launch_bounds__(kThreads, 1)
    StagedGemmKernel(const __grid_constant__ CUtensorMap w_map,
                     const __grid_constant__ CUtensorMap x_map, T* y, int rows, int n_total,
                     int slice, Epilogue epilogue) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kWBox = kNTile * kBoxK;  // elements
  constexpr int kXBox = kMTile * kBoxK;
  extern __shared__ unsigned char smem_raw[];
  __shared__ std::uint64_t w_ready;
  __shared__ std::uint64_t x_ready[kMaxBoxes];
  // The same padding in every block (the same static layout), so the partial sums sit at the
  // same address in each and the cluster can map them.
  unsigned char* smem = smem_raw + ((kSwizzleAlignment - SharedAddress(smem_raw) % kSwizzleAlignment) %
                                    kSwizzleAlignment);
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int splits = static_cast<int>(cluster.num_blocks());
  const int boxes = slice / kBoxK;
  auto* ws = reinterpret_cast<T*>(smem);  // boxes x [kNTile][kBoxK], swizzled
  T* xs = ws + boxes * kWBox;             // boxes x [kMTile][kBoxK], swizzled
  auto* partial = reinterpret_cast<float*>(smem);  // [kMTile][kPartStride], after the multiply
  const int block_n0 = blockIdx.x * kNTile;
  const int m0 = blockIdx.z * kMTile;
  const int k0 = rank * slice;
  const bool issuer = threadIdx.x == 0;

  if (issuer) {
    BarrierInit(&w_ready, 1);
    for (int b = 0; b < boxes; ++b) BarrierInit(&x_ready[b], 1);
    FenceBarrierInit();
  }
  __syncthreads();
  // W does not depend on the kernel ahead: its copies are in flight while that one drains.
  if (issuer) {
    BarrierArriveExpecting(&w_ready, static_cast<unsigned>(boxes * kWBox * sizeof(T)));
    for (int b = 0; b < boxes; ++b) {
      TensorCopy2D(ws + b * kWBox, &w_map, k0 + b * kBoxK, block_n0, &w_ready);
    }
    if (epilogue.bias != nullptr && block_n0 < n_total) {
      PrefetchToL2(static_cast<const T*>(epilogue.bias) + block_n0);
    }
  }
  WaitForPriorKernel();
  AllowDependentLaunch();
  if (issuer) {
    for (int b = 0; b < boxes; ++b) {
      BarrierArriveExpecting(&x_ready[b], static_cast<unsigned>(kXBox * sizeof(T)));
      TensorCopy2D(xs + b * kXBox, &x_map, k0 + b * kBoxK, m0, &x_ready[b]);
    }
  }

  float acc[kMTile / 2];
#pragma unroll
  for (int i = 0; i < kMTile / 2; ++i) acc[i] = 0.f;
  BarrierWait(&w_ready, 0);
  for (int b = 0; b < boxes; ++b) {
    BarrierWait(&x_ready[b], 0);
    WarpgroupFence();
#pragma unroll
    for (int k = 0; k < kBoxK; k += 16) {
      WarpgroupMma<T, kMTile>::Run(acc, SwizzledTileDescriptor(ws + b * kWBox + k),
                                   SwizzledTileDescriptor(xs + b * kXBox + k));
    }
    WarpgroupCommit();
  }
  WarpgroupWait<0>();
  FenceAccumulators(acc);
  __syncthreads();  // every warp's multiplies are done with the boxes before they are overwritten

  // acc[4i + e] is Yᵀ[output 16·warp + g (+8 for e >= 2)][row 8i + 2t (+1 if odd e)]. With
  // kPartStride = 68 the 32 lanes of one store hit 32 different banks.
  const int warp = threadIdx.x / 32;
  const int g = (threadIdx.x % 32) / 4;
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int i = 0; i < kMTile / 8; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int n_local = 16 * warp + g + (e >= 2 ? 8 : 0);
      const int m_local = 8 * i + 2 * t + (e & 1);
      partial[m_local * kPartStride + n_local] = acc[4 * i + e];
    }
  }
  cluster.sync();  // every block's partial sums are in its shared memory

  // A thread takes 4 consecutive outputs of a row at a time (consecutive threads the next 4:
  // coalesced stores) and loads them from every block of the cluster, one 16-byte load a block,
  // all before the first add, so that their round trips overlap; the adds keep rank order.
  constexpr int kGroupOutputs = 4;
  constexpr int kRowGroups = kNTile / kGroupOutputs;
  const auto* bias = static_cast<const T*>(epilogue.bias);
  const auto* residual = static_cast<const T*>(epilogue.residual);
  for (int group = rank * kThreads + threadIdx.x; group < kMTile * kRowGroups;
       group += splits * kThreads) {
    const int m_local = group / kRowGroups;
    const int n_local = (group % kRowGroups) * kGroupOutputs;
    const int m = m0 + m_local;
    if (m >= rows || block_n0 + n_local >= n_total) continue;
    float bias_v[kGroupOutputs];
    float residual_v[kGroupOutputs];
#pragma unroll
    for (int j = 0; j < kGroupOutputs; ++j) {
      const int n = block_n0 + n_local + j;
      const bool valid = n < n_total;
      bias_v[j] = valid && bias != nullptr ? Load(bias, n) : 0.f;
      residual_v[j] = valid && residual != nullptr
                          ? Load(residual, static_cast<std::int64_t>(m) * n_total + n)
                          : 0.f;
    }
    float4 from[kMaxCluster];
#pragma unroll
    for (int s = 0; s < kMaxCluster; ++s) {
      if (s < splits) {
        from[s] = *reinterpret_cast<const float4*>(
            cluster.map_shared_rank(partial, s) + m_local * kPartStride + n_local);
      }
    }
    float sum[kGroupOutputs] = {};
#pragma unroll
    for (int s = 0; s < kMaxCluster; ++s) {
      if (s < splits) {
        sum[0] += from[s].x;
        sum[1] += from[s].y;
        sum[2] += from[s].z;
        sum[3] += from[s].w;
      }
    }
#pragma unroll
    for (int j = 0; j < kGroupOutputs; ++j) {
      const int n = block_n0 + n_local + j;
      if (n >= n_total) continue;
      // The split-K kernel's order: the sum, then bias, then residual.
      float value = sum[j];
      if (bias != nullptr) value += bias_v[j];
      if (residual != nullptr) value += residual_v[j];
      Store(y, static_cast<std::int64_t>(m) * n_total + n, Activate(epilogue.act, value));
    }
  }
  cluster.sync();  // no block leaves while another may still read its shared memory
#endif
}

// cuTensorMapEncodeTiled, from the driver the runtime has loaded (no link to libcuda).
PFN_cuTensorMapEncodeTiled_v12000 TensorMapEncoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000,
                                         cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      return PFN_cuTensorMapEncodeTiled_v12000{nullptr};
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  return encoder;
}

// A row-major [rows][k] matrix of 16-bit elements, copied as boxes of box_rows x kBoxK laid out
// with the 128-byte swizzle that SwizzledTileDescriptor reads; outside the matrix, zeros.
cudaError_t DescribeRowMajor(CUtensorMap* map, const void* base, std::int64_t rows,
                             std::int64_t k, int box_rows) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = TensorMapEncoder();
  if (encode == nullptr) return cudaErrorNotSupported;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
  const cuuint64_t row_bytes[1] = {static_cast<cuuint64_t>(k) * 2};
  const cuuint32_t box[2] = {kBoxK, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result =
      encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<void*>(base), dims, row_bytes,
             box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  // The encoder refuses what the copy engine cannot take (a base not 16-byte aligned above all).
  return result == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

template <typename T, int kMTile>
cudaError_t LaunchTile(int cluster, const void* x, const void* w, void* y, std::int64_t rows,
                       std::int64_t n, std::int64_t k, int slice, std::size_t smem_bytes,
                       const Epilogue& epilogue, bool programmatic, cudaStream_t stream) {
  CUtensorMap w_map;
  CUtensorMap x_map;
  if (const cudaError_t error = DescribeRowMajor(&w_map, w, n, k, kNTile); error != cudaSuccess) {
    return error;
  }
  if (const cudaError_t error = DescribeRowMajor(&x_map, x, rows, k, kMTile); error != cudaSuccess) {
    return error;
  }
  // The cluster's blocks split K along y; x covers the outputs, z the rows.
  const dim3 grid(static_cast<unsigned>((n + kNTile - 1) / kNTile),
                  static_cast<unsigned>(cluster),
                  static_cast<unsigned>((rows + kMTile - 1) / kMTile));
  return LaunchInClustersUpTo<StagedGemmKernel<T, kMTile>>(
      static_cast<std::size_t>(kStagedGemmMaxSharedBytes), dim3(1, static_cast<unsigned>(cluster)),
      grid, dim3(kThreads), smem_bytes, programmatic, stream, w_map, x_map, static_cast<T*>(y),
      static_cast<int>(rows), static_cast<int>(n), slice, epilogue);
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

}  // namespace

bool StagedGemmCompiled(const StagedGemmConfig& c) {
  return (c.m_tile == 64 || c.m_tile == 128) && c.cluster >= 1 && c.cluster <= kMaxCluster;
}

std::string StagedGemmConfig::Describe() const {
  return "staged " + std::to_string(cluster) + " x " + std::to_string(kNTile) + " rows, " +
         std::to_string(m_tile) + "-row X tiles";
}

bool StagedGemmSupports(int sm_major, ElemType type, std::int64_t rows, std::int64_t in_features) {
  return sm_major == 9 && type != ElemType::kFp32 && rows >= 1 && rows <= kStagedGemmMaxRows &&
         in_features >= 8 && in_features % 8 == 0 && in_features < (std::int64_t{1} << 30);
}

std::int64_t StagedGemmSlice(const StagedGemmConfig& config, std::int64_t in_features) {
  if (config.cluster < 1 || in_features < 1) return 0;
  const std::int64_t per_block = (in_features + config.cluster - 1) / config.cluster;
  return (per_block + kBoxK - 1) / kBoxK * kBoxK;
}

std::int64_t StagedGemmSharedBytes(const StagedGemmConfig& config, std::int64_t in_features) {
  const std::int64_t staged = (kNTile + config.m_tile) * StagedGemmSlice(config, in_features) * 2;
  const std::int64_t partials = std::int64_t{config.m_tile} * kPartStride * 4;
  return (staged > partials ? staged : partials) + kSwizzleAlignment;
}

std::vector<StagedGemmConfig> StagedGemmCandidates(std::int64_t rows, std::int64_t out_features,
                                                   std::int64_t in_features) {
  std::vector<StagedGemmConfig> candidates;
  if (!StagedGemmSupports(9, ElemType::kBf16, rows, in_features) || out_features < 1) {
    return candidates;
  }
  const auto m_tile = static_cast<std::uint8_t>(rows <= 64 ? 64 : 128);
  for (int cluster = 1; cluster <= kMaxCluster; ++cluster) {
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
  if (!StagedGemmCompiled(config) || !StagedGemmSupports(9, type, rows, in_features) ||
      out_features < 1 || out_features > (std::int64_t{1} << 30) ||
      (rows + config.m_tile - 1) / config.m_tile > 65535 ||
      StagedGemmSharedBytes(config, in_features) > kStagedGemmMaxSharedBytes ||
      StagedGemmSlice(config, in_features) / kBoxK > kMaxBoxes) {
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
