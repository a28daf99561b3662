// Attention on Hopper at head_dim 64 (BERT-family heads): attention.cu's tensor-core kernel
// with q·kᵀ computed by the block's warpgroup MMAs (wgmma) instead of each warp's mma.sync.
//
// Why: the mma.sync kernel's warps stall on one dependent chain a key tile (copy, q·kᵀ, max and
// exp2, P·V) with ~4 warps a scheduler to hide it, and fewer instructions on the same chain
// did not make it faster (bench/RESULTS.md, 2026-12-03). wgmma is asynchronous, so here the
// block asks for the next key tile's scores before this tile's softmax and P·V and collects
// them after: the tensor cores work on tile i + 1 while the warps exponentiate tile i
// (FlashAttention-3's overlap, on FlashAttention-2's tiles). It also drops the q·kᵀ fragment
// loads: 4 wgmma a tile for the warpgroup against 16 ldmatrix and 32 mma.sync a warp.
//
// What stays as in attention.cu (attention_device.cuh): the work items and grid, K and V
// copied by cp.async two stages deep, the online softmax and P·V on mma.sync from registers,
// the output through shared memory. The tiles' layout (attention_layout.h) at 128-byte rows
// is already the 128-byte swizzle that wgmma's descriptors describe, so the same copies feed
// both. Built for sm_90a alone (server/gpu/CMakeLists.txt).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "gpu/attention_device.cuh"
#include "gpu/kernels_device.cuh"
#include "gpu/warpgroup_mma_device.cuh"

namespace ltserve::gpu::attention_tile {
namespace {

constexpr int kHeadDim = kWarpgroupHeadDim;
constexpr int kKeys = 64;                  // keys a tile: wgmma's n
constexpr int kRowVecs = kHeadDim / kVec;  // 16-byte chunks a row
using Tile = attention_layout::SharedTile<kRowVecs>;
static_assert(Tile::kSwizzled && Tile::kStride == kSwizzledRowElements,
              "rows of 128 bytes XOR-permuted by their place among eight: the 128-byte swizzle");
constexpr int kTileHalves = kKeys * Tile::kStride;  // a K, V or query tile: 8 KB
static_assert(kWarps * kRows * Tile::kStride == kTileHalves, "the query tile is a key tile's size");
static_assert(kTileHalves * 2 % kSwizzleAtomBytes == 0, "tiles stay on swizzle-atom boundaries");
// Registers are capped for 3 blocks an SM (168 a thread): the next tile's 32 scores live beside
// this tile's through the softmax, and at the mma.sync kernel's cap of 128 they would spill.
constexpr int kMinBlocksPerSm = 3;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr int kChunks = kHeadDim / 16;   // k16 steps of q·kᵀ
constexpr int kDimTiles = kHeadDim / 8;  // n tiles of P·V
constexpr int kKeyTiles = kKeys / 8;     // 8-key column groups of the scores

// Starts s = q_tile · k_tileᵀ on the warpgroup (64 queries x 64 keys, K = head_dim): warp w's
// lanes get rows 16w on in mma accumulator layout, which is the layout SoftmaxAndAccumulate
// takes. Asynchronous: the scores are there after WarpgroupWait and FenceAccumulators.
template <typename T>
__device__ __forceinline__ void StartScores(float (&s)[kKeyTiles][4], const std::uint16_t* q_tile,
                                            const std::uint16_t* k_tile) {
  float(&d)[kKeyTiles * 4] = reinterpret_cast<float(&)[kKeyTiles * 4]>(s);
#pragma unroll
  for (int i = 0; i < kKeyTiles * 4; ++i) d[i] = 0.f;
  FenceAccumulators(d);  // the zeros are written before the fence, not moved after it
  WarpgroupFence();
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    WarpgroupMma<T, kKeys>::Run(d, SwizzledTileDescriptor(q_tile + 16 * c),
                                SwizzledTileDescriptor(k_tile + 16 * c));
  }
  WarpgroupCommit();
}

template <typename T>
__device__ __forceinline__ void FinishScores(float (&s)[kKeyTiles][4]) {
  WarpgroupWait<0>();
  FenceAccumulators(reinterpret_cast<float(&)[kKeyTiles * 4]>(s));
}
#endif

template <typename T>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    WarpgroupAttentionKernel(const T* qkv, T* out, const std::int32_t* batch, int num_heads,
                             float scale_log2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // The queries, then two stages of K, then of V; 8 KB each, so every tile starts on a
  // 1,024-byte boundary as the swizzle wants.
  __shared__ __align__(1024) std::uint16_t tiles[5 * kTileHalves];
  std::uint16_t* const q_s = tiles;
  auto k_tile = [&](int stage) { return tiles + (1 + stage) * kTileHalves; };
  auto v_tile = [&](int stage) { return tiles + (3 + stage) * kTileHalves; };
  WaitForPriorKernel();
  AllowDependentLaunch();

  const std::int64_t width = static_cast<std::int64_t>(num_heads) * kHeadDim;
  const std::int64_t stride = 3 * width;
  const std::int64_t head = static_cast<std::int64_t>(blockIdx.x) * kHeadDim;
  const auto* in = reinterpret_cast<const std::uint16_t*>(qkv);
  auto* dst = reinterpret_cast<std::uint16_t*>(out);
  const int warp = threadIdx.x / kWarp;
  const LaneRoles lane;

  ItemWalk items(batch);
  std::int64_t begin = 0;
  int length = 0;
  int item_q0 = 0;
  while (items.Next(&begin, &length, &item_q0)) {
    const int q0 = item_q0 + warp * kRows;
    // Every warp takes part in the warpgroup's MMAs; only the softmax and P·V skip a warp whose
    // rows are all past the end (their queries are zeros).
    const bool warp_active = q0 < length;
    const std::uint16_t* keys = in + begin * stride + width + head;
    const std::uint16_t* values = keys + width;
    __syncthreads();  // the previous item's warps are done with every tile
    for (int e = threadIdx.x; e < kWarps * kRows * kRowVecs; e += kThreads) {
      const int j = e / kRowVecs;
      const int chunk = e % kRowVecs;
      const bool valid = item_q0 + j < length;
      CopyAsync16(&q_s[Tile::Offset(j, chunk)],
                  in + (valid ? (begin + item_q0 + j) * stride + head + chunk * kVec : 0), valid);
    }
    // The queries land with the first tile's group; the second tile's follows.
    CopyKeyValueTile<Tile, kKeys, kRowVecs>(k_tile(0), v_tile(0), keys, values, 0, length, stride);
    const bool two_tiles = kKeys < length;
    if (two_tiles) {
      CopyKeyValueTile<Tile, kKeys, kRowVecs>(k_tile(1), v_tile(1), keys, values, kKeys, length,
                                              stride);
      WaitCopies<1>();
    } else {
      WaitCopies<0>();
    }
    FenceSharedForWarpgroupMma();
    __syncthreads();  // every thread's copies of the queries and the first tile are visible

    float o[kDimTiles][4];
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY};  // running max of rows g and g + 8 (log2 domain)
    float l[2] = {0.f, 0.f};  // running sums of this lane's columns; the row's 4 lanes add at the end
    float s[kKeyTiles][4];
    StartScores<T>(s, q_s, k_tile(0));
    FinishScores<T>(s);
    for (int key0 = 0, stage = 0; key0 < length; key0 += kKeys, stage ^= 1) {
      // The next tile's scores, asked for before this tile's softmax. After the last tile the
      // warpgroup still multiplies the other stage (stale keys), and the result is dropped:
      // with the MMAs behind a branch the compiler serialises them (ptxas C7518), and the
      // overlap is gone.
      WaitCopies<0>();  // the next tile's group, where there is one (the only one in flight)
      FenceSharedForWarpgroupMma();
      __syncthreads();
      float s_next[kKeyTiles][4];
      StartScores<T>(s_next, q_s, k_tile(stage ^ 1));
      SoftmaxAndAccumulate<T, Tile, kKeys, kDimTiles, /*kMaskEveryTile=*/true>(
          s, o, m, l, key0, length, scale_log2, v_tile(stage), lane);
      FinishScores<T>(s_next);
      // Every warp is done with this stage's V, and its K's MMAs completed before this tile's
      // softmax began: the stage takes the tile after next.
      __syncthreads();
      if (key0 + 2 * kKeys < length) {
        CopyKeyValueTile<Tile, kKeys, kRowVecs>(k_tile(stage), v_tile(stage), keys, values,
                                                key0 + 2 * kKeys, length, stride);
      }
#pragma unroll
      for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = s_next[n][e];
      }
    }
    if (!warp_active) continue;
    // Out through the warp's own 16 rows of the (now free) first key stage.
    StoreOutputRows<T, Tile, kDimTiles, kRowVecs>(o, l, k_tile(0), dst, begin, q0, length, width,
                                                  head, lane);
  }
#endif
}

}  // namespace

template <typename T>
cudaError_t LaunchWarpgroupAttention(const void* qkv, void* out, const std::int32_t* batch,
                                     std::int64_t bucket_tokens, int num_heads, float scale_log2,
                                     bool programmatic, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(num_heads), Blocks(bucket_tokens, num_heads));
  return LaunchProgrammatic(programmatic, WarpgroupAttentionKernel<T>, grid, dim3(kThreads),
                            stream, static_cast<const T*>(qkv), static_cast<T*>(out), batch,
                            num_heads, scale_log2);
}

template cudaError_t LaunchWarpgroupAttention<__nv_bfloat16>(const void*, void*, const std::int32_t*,
                                                             std::int64_t, int, float, bool,
                                                             cudaStream_t);
template cudaError_t LaunchWarpgroupAttention<__half>(const void*, void*, const std::int32_t*,
                                                      std::int64_t, int, float, bool,
                                                      cudaStream_t);

}  // namespace ltserve::gpu::attention_tile
