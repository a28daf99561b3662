// The streamed GEMM for few rows (streamed_gemm.h).
//
// Why: at one to 32 rows a Linear reads each weight once, so its time is the weights' bytes
// at the DRAM's rate plus whatever latency the kernel cannot hide. The split-K kernel holds
// its weights in registers, a chunk or two a warp, and each warp waits on its own loads
// (bench/RESULTS.md: the layer-chain kernel's warps at 1.5 TB/s, 44 % of their issue slots
// waiting on their own loads). Here the loads belong to no consumer's chain: one producer
// warp keeps a ring of 16 KiB stages full with bulk copies (one per weight row slice,
// completing on the stage's mbarrier), and the consumers only wait for full stages.
//
// Work: W's rows go in tiles of 16 (mma's m). The grid has one to three blocks an SM, no more
// than can be resident at once. A cluster of `split` blocks takes tiles
// c, c + C, c + 2C... (C clusters); each block of it a fixed K slice of every tile, of X held
// whole in shared memory. A stage is one tile's next 512 K of that slice. Like the split-K
// kernel, Yᵀ = W·Xᵀ: W is mma's A, the rows of X its n, and each thread's 16-byte reads are
// its fragments as they are (skinny_gemm.cu explains the slot order). Each consumer warp
// takes every fourth 32-K step of a stage; at a tile's end its fp32 sums go to shared memory,
// the four warps' are added in warp order, then the cluster's in rank order: the same bits
// every run.
//
// Under a programmatic launch the producer fills the ring before waiting for the kernel
// before (the weights are not its output), so up to `stages` × 16 KiB a block are in flight
// while that kernel drains; X, which is its output, is read only after the wait.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "gpu/bulk_copy_device.cuh"
#include "gpu/cluster_launch.cuh"
#include "gpu/kernels_device.cuh"
#include "gpu/streamed_gemm.h"
#include "gpu/tensor_core_device.cuh"

namespace ltserve::gpu {
namespace {

namespace cg = cooperative_groups;

constexpr int kConsumerWarps = 4;
constexpr int kThreads = (kConsumerWarps + 1) * 32;  // and one producer warp
constexpr int kTileRows = 16;                        // W rows a tile: mma's m
constexpr int kChunk = 512;                          // K a stage
constexpr int kStep = 32;                            // K a pair of m16n8k16
constexpr int kVector = 8;                           // 16-bit elements a 16-byte read
// Halves of padding a staged row: a row's stride is then 64 bytes past a multiple of 128, so
// the 8 threads of a quarter-warp (rows g, g + 1 at 4 offsets each) read 8 distinct 16-byte
// bank groups. Each row is its own bulk copy, so the padding costs no extra copies.
constexpr int kPad = 32;
constexpr int kStageStride = kChunk + kPad;  // halves
static_assert(kStageStride == kStreamedGemmPackedRow, "a packed row is a staged row");
constexpr int kStageBytes = kTileRows * kStageStride * 2;
constexpr int kMaxSplit = 8;
constexpr int kMaxXBytes = 96 * 1024;
constexpr int kMaxSmemBytes = 227 * 1024;  // sm_90's opt-in maximum a block
constexpr int kSmSmemBytes = 228 * 1024;   // and an SM's

// Shared memory: the stages' full and empty barriers, the ring, X's slice, each consumer
// warp's partial sums of the tile just finished, and the block's sums a tile (read by the
// cluster at the end).
struct Layout {
  int stages, x_stride, x_rows, max_tiles, tile_floats;
  __host__ __device__ int BarrierBytes() const { return ((2 * stages * 8 + 127) / 128) * 128; }
  __host__ __device__ int RingOffset() const { return BarrierBytes(); }
  __host__ __device__ int XOffset() const { return RingOffset() + stages * kStageBytes; }
  __host__ __device__ int PartOffset() const { return XOffset() + x_rows * x_stride * 2; }
  __host__ __device__ int SumOffset() const {
    return PartOffset() + kConsumerWarps * tile_floats * 4;
  }
  __host__ __device__ int Bytes() const { return SumOffset() + max_tiles * tile_floats * 4; }
};


template <typename T, int kNTiles>
__global__ void __launch_bounds__(kThreads)
    StreamedGemmKernel(const T* __restrict__ x, const T* __restrict__ w,
                       const T* __restrict__ bias, const T* residual, T* __restrict__ y,
                       int rows, int n_total, int k_total, int k_slice, plan::Activation act,
                       Layout layout, bool packed) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  auto* full = reinterpret_cast<std::uint64_t*>(smem);
  auto* empty = full + layout.stages;
  auto* ring = reinterpret_cast<std::uint16_t*>(smem + layout.RingOffset());
  auto* xs = reinterpret_cast<std::uint16_t*>(smem + layout.XOffset());
  auto* part = reinterpret_cast<float*>(smem + layout.PartOffset());
  auto* sums = reinterpret_cast<float*>(smem + layout.SumOffset());
  const int stages = layout.stages;
  const int tile_floats = layout.tile_floats;

  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int splits = static_cast<int>(cluster.num_blocks());
  const int cluster_id = static_cast<int>(blockIdx.x) / splits;
  const int clusters = static_cast<int>(gridDim.x) / splits;
  const int tiles_total = (n_total + kTileRows - 1) / kTileRows;
  const int my_tiles =
      cluster_id < tiles_total ? (tiles_total - cluster_id + clusters - 1) / clusters : 0;
  const int k_begin = min(k_total, rank * k_slice);
  const int k_len = min(k_total, k_begin + k_slice) - k_begin;
  const int chunks = (k_len + kChunk - 1) / kChunk;
  const int items = my_tiles * chunks;  // stages' worth of W this block streams
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      BarrierInit(&full[s], 1);
      BarrierInit(&empty[s], kConsumerWarps * 32);
    }
    FenceBarrierInit();
  }
  __syncthreads();

  if (warp == kConsumerWarps) {
    // The producer: item j (tile j / chunks, chunk j % chunks) into stage j % stages, once the
    // consumers have released that stage's previous item. The first `stages` items need no
    // release and do not depend on the kernel before, so they go before the wait.
    for (int j = 0; j < items; ++j) {
      const int s = j % stages;
      if (j == stages) {
        WaitForPriorKernel();
        AllowDependentLaunch();
      }
      if (j >= stages) BarrierWait(&empty[s], ((j / stages) - 1) & 1);
      const int tile = cluster_id + (j / chunks) * clusters;
      const int k0 = k_begin + (j % chunks) * kChunk;
      const int len = min(kChunk, k_begin + k_len - k0);
      const int valid_rows = min(kTileRows, n_total - tile * kTileRows);
      if (packed) {  // the stage is one contiguous block: one copy
        if (lane == 0) {
          const std::int64_t block = static_cast<std::int64_t>(tile) * ((k_total + kChunk - 1) / kChunk) +
                                     k0 / kChunk;
          BarrierArriveExpecting(&full[s], kStageBytes);
          BulkCopy(ring + s * kTileRows * kStageStride, w + block * kTileRows * kStageStride,
                   kStageBytes, &full[s]);
        }
        continue;
      }
      if (lane == 0) BarrierArriveExpecting(&full[s], static_cast<unsigned>(valid_rows * len * 2));
      __syncwarp();
      if (lane < valid_rows) {
        BulkCopy(ring + (s * kTileRows + lane) * kStageStride,
                 w + static_cast<std::int64_t>(tile * kTileRows + lane) * k_total + k0,
                 static_cast<unsigned>(len * 2), &full[s]);
      }
    }
    if (items <= stages) {
      WaitForPriorKernel();
      AllowDependentLaunch();
    }
  } else {
    WaitForPriorKernel();
    AllowDependentLaunch();
    // X's K slice, rows beyond `rows` left unread (their fragments are zeros below).
    const int vectors = k_len / kVector;
    for (int e = static_cast<int>(threadIdx.x); e < rows * vectors; e += kConsumerWarps * 32) {
      const int m = e / vectors;
      const int v = e % vectors;
      *reinterpret_cast<uint4*>(xs + m * layout.x_stride + v * kVector) =
          *reinterpret_cast<const uint4*>(x + static_cast<std::int64_t>(m) * k_total + k_begin +
                                          v * kVector);
    }
    ConsumersSync<kConsumerWarps * 32>();

    const int g = lane / 4;
    const int t = lane % 4;
    float acc[kNTiles][4];
#pragma unroll
    for (int i = 0; i < kNTiles; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
    for (int j = 0; j < items; ++j) {
      const int s = j % stages;
      const int chunk = j % chunks;
      const int k0 = chunk * kChunk;  // within the slice
      const int len = min(kChunk, k_len - k0);
      BarrierWait(&full[s], (j / stages) & 1);
      const std::uint16_t* stage = ring + s * kTileRows * kStageStride;
      for (int step = warp; step * kStep < len; step += kConsumerWarps) {
        const int k = step * kStep + t * kVector;
        // K is whole vectors: a vector is all in or all out.
        MmaStepFromShared<T, kNTiles>(acc, stage, kStageStride, xs + k0, layout.x_stride, k,
                                      k < len, rows, g);
      }
      // Every consumer thread releases its own reads of the stage (an arrival orders only
      // the arriving thread's accesses before the producer's next copy into it).
      BarrierArrive(&empty[s]);
      if (chunk == chunks - 1) {  // this tile's slice is done: add the warps' sums in order
        float* out = part + warp * tile_floats;
#pragma unroll
        for (int i = 0; i < kNTiles; ++i) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            out[(i * 4 + e) * 32 + lane] = acc[i][e];
            acc[i][e] = 0.f;
          }
        }
        ConsumersSync<kConsumerWarps * 32>();
        float* tile_sums = sums + (j / chunks) * tile_floats;
        for (int r = static_cast<int>(threadIdx.x); r < tile_floats; r += kConsumerWarps * 32) {
          float v = 0.f;
          for (int p = 0; p < kConsumerWarps; ++p) v += part[p * tile_floats + r];
          tile_sums[r] = v;
        }
        ConsumersSync<kConsumerWarps * 32>();  // `part` is free for the next tile
      }
    }
  }
  cluster.sync();  // every block's sums are in its shared memory

  // Sum element r of a tile is accumulator e of mma tile i of lane (g, t):
  // Yᵀ[row g (+8 for e >= 2)][column i·8 + 2t (+1 for odd e)].
  for (int o = rank * kThreads + static_cast<int>(threadIdx.x); o < my_tiles * tile_floats;
       o += splits * kThreads) {
    const int tile = o / tile_floats;
    const int r = o % tile_floats;
    const int i = r / 128;
    const int e = (r / 32) % 4;
    const int l = r % 32;
    const int n = (cluster_id + tile * clusters) * kTileRows + l / 4 + (e >= 2 ? 8 : 0);
    const int m = i * 8 + 2 * (l % 4) + (e & 1);
    if (m >= rows || n >= n_total) continue;
    float v = 0.f;
    for (int s = 0; s < splits; ++s) v += cluster.map_shared_rank(sums, s)[o];
    const std::int64_t at = static_cast<std::int64_t>(m) * n_total + n;
    if (bias != nullptr) v += Load(bias, n);
    if (residual != nullptr) v += Load(residual, at);
    Store(y, at, Activate(act, v));
  }
  cluster.sync();  // no block leaves while another may still read its shared memory
#endif
}

// The launch's shape; PlanLaunch says false where the configuration cannot run this GEMM.
struct LaunchShape {
  int clusters = 0;
  int k_slice = 0;
  Layout layout{};
};

bool PlanLaunch(const StreamedGemmConfig& c, std::int64_t rows, std::int64_t n, std::int64_t k,
                int sm_count, LaunchShape* shape, int max_clusters = 1 << 30) {
  if ((c.m_tile != 8 && c.m_tile != 16 && c.m_tile != 32) || rows > c.m_tile ||
      (c.split != 1 && c.split != 2 && c.split != 4 && c.split != kMaxSplit) ||
      (c.stages != 2 && c.stages != 4 && c.stages != 8) || c.blocks_per_sm < 1 ||
      c.blocks_per_sm > 3 || sm_count < c.split) {
    return false;
  }
  const std::int64_t tiles = (n + kTileRows - 1) / kTileRows;
  const std::int64_t slice = ((k + c.split - 1) / c.split + kVector - 1) / kVector * kVector;
  if (slice * (c.split - 1) >= k) return false;  // a block of the cluster would have no K
  shape->clusters = static_cast<int>(
      std::min<std::int64_t>({tiles, std::int64_t{sm_count} * c.blocks_per_sm / c.split,
                              std::max(max_clusters, 1)}));
  shape->k_slice = static_cast<int>(slice);
  const std::int64_t x_stride = (slice + 63) / 64 * 64 + kPad;
  if (rows * x_stride * 2 > kMaxXBytes) return false;  // only the rows there are
  const std::int64_t max_tiles = (tiles + shape->clusters - 1) / shape->clusters;
  shape->layout = Layout{c.stages, static_cast<int>(x_stride), static_cast<int>(rows),
                        static_cast<int>(std::min<std::int64_t>(max_tiles, 1 << 20)),
                        c.m_tile / 8 * 128};
  // Blocks sharing an SM share its shared memory, less 1 KiB the system keeps for each.
  const int block_bytes =
      c.blocks_per_sm == 1 ? kMaxSmemBytes : kSmSmemBytes / c.blocks_per_sm - 1024;
  return max_tiles <= (1 << 20) && shape->layout.Bytes() <= block_bytes;
}

int SmCount() {
  int device = 0;
  int sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return 0;
  }
  return sms;
}

// How many clusters of this launch the GPU holds at once: clusters are placed within a GPC,
// so fewer than the planned sm_count × blocks_per_sm / split may fit, and a cluster past them
// would run in a second wave, doubling the kernel's time. 0 where it cannot say.
template <auto kKernel>
int ActiveClusters(const StreamedGemmConfig& c, const LaunchShape& shape) {
  if (OptInToClusters<kKernel>(kMaxSmemBytes) != cudaSuccess) return 0;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(shape.clusters * c.split));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = static_cast<std::size_t>(shape.layout.Bytes());
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = c.split;
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kKernel, &config) != cudaSuccess) return 0;
  return clusters;
}

template <typename T, int kNTiles>
cudaError_t LaunchTiles(const StreamedGemmConfig& c, LaunchShape shape, const void* x,
                        const void* w, const void* bias, const void* residual, void* y,
                        std::int64_t rows, std::int64_t n, std::int64_t k, plan::Activation act,
                        bool programmatic, cudaStream_t stream, StreamedWeights layout,
                        int sm_count) {
  constexpr auto kKernel = StreamedGemmKernel<T, kNTiles>;
  if (const int active = ActiveClusters<kKernel>(c, shape); active > 0 && active < shape.clusters) {
    if (!PlanLaunch(c, rows, n, k, sm_count, &shape, active)) return cudaErrorInvalidValue;
  }
  return LaunchInClustersUpTo<kKernel>(
      kMaxSmemBytes, dim3(c.split), dim3(static_cast<unsigned>(shape.clusters * c.split)),
      dim3(kThreads), static_cast<std::size_t>(shape.layout.Bytes()), programmatic,
      stream, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias),
      static_cast<const T*>(residual), static_cast<T*>(y), static_cast<int>(rows),
      static_cast<int>(n), static_cast<int>(k), shape.k_slice, act, shape.layout,
      layout == StreamedWeights::kPacked);
}

template <typename T>
cudaError_t Dispatch(const StreamedGemmConfig& c, const LaunchShape& shape, const void* x, const void* w,
                     const void* bias, const void* residual, void* y, std::int64_t rows,
                     std::int64_t n, std::int64_t k, plan::Activation act, bool programmatic,
                     cudaStream_t stream, StreamedWeights layout, int sm_count) {
  switch (c.m_tile) {
    case 8: return LaunchTiles<T, 1>(c, shape, x, w, bias, residual, y, rows, n, k, act, programmatic, stream, layout, sm_count);
    case 16: return LaunchTiles<T, 2>(c, shape, x, w, bias, residual, y, rows, n, k, act, programmatic, stream, layout, sm_count);
    case 32: return LaunchTiles<T, 4>(c, shape, x, w, bias, residual, y, rows, n, k, act, programmatic, stream, layout, sm_count);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

std::string StreamedGemmConfig::Describe() const {
  return "streamed, K split " + std::to_string(split) + ", " + std::to_string(stages) +
         " stages, " + std::to_string(blocks_per_sm) + " block" + (blocks_per_sm > 1 ? "s" : "") +
         " an SM, " + std::to_string(m_tile) + "-row X tiles";
}

bool StreamedGemmSupports(int sm_major, ElemType type, std::int64_t rows,
                          std::int64_t in_features) {
  return sm_major >= 9 && type != ElemType::kFp32 && rows >= 1 && rows <= kStreamedGemmMaxRows &&
         in_features >= kVector && in_features % kVector == 0 &&
         in_features < (std::int64_t{1} << 30);
}

bool StreamedGemmRuns(const StreamedGemmConfig& config, std::int64_t rows,
                      std::int64_t out_features, std::int64_t in_features, int sm_count) {
  // With as few as half the clusters resident at once (LaunchTiles), a block takes up to
  // twice the tiles and needs their sums' shared memory.
  LaunchShape shape;
  return rows >= 1 && out_features >= 1 && in_features >= kVector && config.split >= 1 &&
         PlanLaunch(config, rows, out_features, in_features, sm_count, &shape,
                    std::max(1, sm_count * config.blocks_per_sm / config.split / 2));
}

std::vector<StreamedGemmConfig> StreamedGemmCandidates(std::int64_t rows,
                                                       std::int64_t out_features,
                                                       std::int64_t in_features, int sm_count) {
  std::vector<StreamedGemmConfig> candidates;
  if (rows < 1 || rows > kStreamedGemmMaxRows || out_features < 1 || in_features < kVector) {
    return candidates;
  }
  const auto m_tile = static_cast<std::uint8_t>(rows <= 8 ? 8 : rows <= 16 ? 16 : 32);
  for (int split = 1; split <= kMaxSplit; split *= 2) {
    // One block an SM with a deep ring, or two or three with shallower ones (more producers).
    for (const auto& [blocks, stages] : {std::pair{1, 4}, {1, 8}, {2, 2}, {2, 4}, {3, 2}, {3, 4}}) {
      const StreamedGemmConfig config{m_tile, static_cast<std::uint8_t>(split),
                                      static_cast<std::uint8_t>(stages),
                                      static_cast<std::uint8_t>(blocks)};
      if (StreamedGemmRuns(config, rows, out_features, in_features, sm_count)) {
        candidates.push_back(config);
      }
    }
  }
  return candidates;
}

cudaError_t LaunchStreamedGemm(const StreamedGemmConfig& config, const void* x, const void* w,
                               const void* bias, const void* residual, void* y,
                               std::int64_t rows, std::int64_t out_features,
                               std::int64_t in_features, plan::Activation act, ElemType type,
                               bool programmatic, cudaStream_t stream, StreamedWeights layout) {
  if (!StreamedGemmSupports(9, type, rows, in_features) || out_features < 1 ||
      out_features > (std::int64_t{1} << 30) ||
      (layout == StreamedWeights::kPacked && !StreamedGemmTakesPacked(config, in_features))) {
    return cudaErrorInvalidValue;
  }
  LaunchShape shape;
  const int sm_count = std::max(SmCount(), 1);
  if (!PlanLaunch(config, rows, out_features, in_features, sm_count, &shape)) {
    return cudaErrorInvalidValue;
  }
  if (type == ElemType::kBf16) {
    return Dispatch<__nv_bfloat16>(config, shape, x, w, bias, residual, y, rows, out_features,
                                   in_features, act, programmatic, stream, layout, sm_count);
  }
  return Dispatch<__half>(config, shape, x, w, bias, residual, y, rows, out_features, in_features,
                          act, programmatic, stream, layout, sm_count);
}

std::int64_t StreamedGemmPackedElements(std::int64_t out_features, std::int64_t in_features) {
  return (out_features + kTileRows - 1) / kTileRows * ((in_features + kChunk - 1) / kChunk) *
         kTileRows * kStageStride;
}

std::vector<std::uint16_t> PackStreamedGemmWeights(const std::uint16_t* w,
                                                   std::int64_t out_features,
                                                   std::int64_t in_features) {
  std::vector<std::uint16_t> packed(
      static_cast<std::size_t>(StreamedGemmPackedElements(out_features, in_features)), 0);
  const std::int64_t chunks = (in_features + kChunk - 1) / kChunk;
  for (std::int64_t n = 0; n < out_features; ++n) {
    for (std::int64_t k = 0; k < in_features; ++k) {
      const std::int64_t block = n / kTileRows * chunks + k / kChunk;
      packed[static_cast<std::size_t>((block * kTileRows + n % kTileRows) * kStageStride + k % kChunk)] =
          w[n * in_features + k];
    }
  }
  return packed;
}

bool StreamedGemmTakesPacked(const StreamedGemmConfig& config, std::int64_t in_features) {
  if (config.split < 1) return false;
  const std::int64_t slice =
      ((in_features + config.split - 1) / config.split + kVector - 1) / kVector * kVector;
  return config.split == 1 || slice % kChunk == 0;
}

}  // namespace ltserve::gpu
