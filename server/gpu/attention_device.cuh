// What the two tensor-core attention kernels share: attention.cu's, on mma.sync for every GPU
// since sm_80, and attention_sm90a.cu's, which computes q·kᵀ with Hopper's warpgroup MMAs.
// Both walk the same work items (attention.h) with the same grid, copy K and V tiles the same
// way, and keep each warp's 16 query rows' online softmax and P·V on mma.sync fragments; only
// where the scores come from differs.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "gpu/attention.h"
#include "gpu/attention_layout.h"
#include "gpu/tensor_core_device.cuh"

namespace ltserve::gpu::attention_tile {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarps = 4;
constexpr int kRows = 16;  // query rows per warp: mma's m
constexpr int kThreads = kWarps * kWarp;
constexpr int kVec = attention_layout::kChunkHalves;  // halves per 16-byte copy (a "chunk")
static_assert(kWarps * kRows == kAttentionQueriesPerItem, "one block covers one work item");

// Work items are spread over at most this many blocks per head (a grid-stride loop does the
// rest): enough to fill every SM, without launching blocks that only find nothing to do.
constexpr std::int64_t kMaxBlocksPerHead = 1024;
// Blocks for the extra items of short sequences, over all heads: ~4 resident blocks on each
// of 132 SMs.
constexpr std::int64_t kShortItemBlocks = 512;

// Blocks per head: enough for the items of `bucket_tokens` tokens in long sequences, plus
// about kShortItemBlocks over all heads for the extra items of short ones; a grid-stride loop
// covers batches of more short sequences. The extra blocks find nothing to do when the
// sequences are long, and each still has to be started: one sequence of 128 at 12 heads had
// 128 of them a head (1,536 empty blocks beside 24 working ones).
inline unsigned Blocks(std::int64_t bucket_tokens, int num_heads) {
  std::int64_t blocks = (bucket_tokens + kAttentionQueriesPerItem - 1) / kAttentionQueriesPerItem;
  const std::int64_t short_blocks = (kShortItemBlocks + num_heads - 1) / num_heads;
  blocks += bucket_tokens < short_blocks ? bucket_tokens : short_blocks;
  // Never more than the bucket's tokens: that many items at most (each covers a token), and
  // the bound that keeps each block's first-item read inside the work buffer (LaunchAttention).
  // Without it a bucket of 1 to ~43 tokens at the buffer's capacity read past its end.
  if (blocks > bucket_tokens) blocks = bucket_tokens;
  return static_cast<unsigned>(blocks < kMaxBlocksPerHead ? blocks : kMaxBlocksPerHead);
}

// softmax(x·scale) = 2^(x·scale·log2 e) / Σ: the kernels work in the exp2 domain.
inline float ScaleLog2(int head_dim) {
  return static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(head_dim)));
}

// The warpgroup kernel's launch (attention_sm90a.cu, built for sm_90a alone): head_dim 64, T
// __nv_bfloat16 or __half; the grid as the mma.sync kernel's.
template <typename T>
cudaError_t LaunchWarpgroupAttention(const void* qkv, void* out, const std::int32_t* batch,
                                     std::int64_t bucket_tokens, int num_heads, float scale_log2,
                                     bool programmatic, cudaStream_t stream);
constexpr int kWarpgroupHeadDim = 64;

// A block's walk over its work items (attention.h's layout): item blockIdx.y, then every
// gridDim.y-th, each one's fields read while the block works on the one before.
class ItemWalk {
 public:
  // The first item is read alongside the item count rather than after it: the grid has at
  // most max_tokens blocks, so its slot lies inside the buffer whether or not it is in use.
  __device__ __forceinline__ explicit ItemWalk(const std::int32_t* batch)
      : work_(batch + 1), next_(Read(batch + 1, blockIdx.y)), items_(batch[0]) {}

  // The next item's first token, its sequence's length and its first query; false past the
  // last item.
  __device__ __forceinline__ bool Next(std::int64_t* begin, int* length, int* q0) {
    if (item_ >= items_) return false;
    *begin = next_.x;
    *length = next_.y;
    *q0 = next_.z;
    item_ += static_cast<int>(gridDim.y);
    if (item_ < items_) next_ = Read(work_, item_);
    return true;
  }

 private:
  __device__ __forceinline__ static int3 Read(const std::int32_t* work, int item) {
    const std::int32_t* w = work + kAttentionItemInts * item;
    return make_int3(w[0], w[1], w[2]);
  }
  const std::int32_t* work_;
  int3 next_;
  int items_;
  int item_ = static_cast<int>(blockIdx.y);
};

// Copies keys [key0, key0 + kKeys) of one head into a K and a V tile (layout Tile) as one
// cp.async group: a fixed number of copies a thread, unrolled, so no loop test or index
// arithmetic beyond what the constants leave. Keys past `length` are zeros: their p is 0, and
// 0·V must not meet garbage (NaN).
template <typename Tile, int kKeys, int kRowVecs>
__device__ __forceinline__ void CopyKeyValueTile(std::uint16_t* k_tile, std::uint16_t* v_tile,
                                                 const std::uint16_t* keys,
                                                 const std::uint16_t* values, int key0,
                                                 int length, std::int64_t stride) {
  constexpr int kCopyVecs = kKeys * kRowVecs;  // 16-byte copies of K (and of V) a tile
  constexpr int kCopiesPerThread = (kCopyVecs + kThreads - 1) / kThreads;
#pragma unroll
  for (int it = 0; it < kCopiesPerThread; ++it) {
    const int e = threadIdx.x + it * kThreads;
    if (kCopyVecs % kThreads != 0 && e >= kCopyVecs) break;
    const int j = e / kRowVecs;
    const int chunk = e % kRowVecs;
    const bool valid = key0 + j < length;
    const std::int64_t offset = valid ? (key0 + j) * stride + chunk * kVec : 0;
    CopyAsync16(&k_tile[Tile::Offset(j, chunk)], keys + offset, valid);
    CopyAsync16(&v_tile[Tile::Offset(j, chunk)], values + offset, valid);
  }
  CommitCopies();
}

// A lane's places in the mma fragments and ldmatrix addresses, computed once a kernel.
struct LaneRoles {
  int g;         // mma fragment row group
  int t;         // and the lane's column pair within it
  int tile_row;  // ldmatrix: the row this lane addresses within its 8×8 tile,
  int tile;      // and which tile
  __device__ __forceinline__ LaneRoles()
      : g((threadIdx.x % kWarp) / 4),
        t(threadIdx.x % 4),
        tile_row(threadIdx.x % 8),
        tile((threadIdx.x % kWarp) / 8) {}
};

// One warp's step over a tile of kKeys keys starting at key0: `s` holds its 16 rows' raw
// scores q·kᵀ in mma accumulator layout (s[n][e]: row g + 8·(e >= 2), key 8n + 2t + (e & 1)).
// Masks keys past `length`, updates the running max `m` (log2 domain) and this lane's part of
// the running sums `l`, rescales the output `o` and adds P·V, V read from `v_tile` (layout
// Tile) by transposing ldmatrix.
//
// The softmax works on raw scores: the scale is positive, so the max comes first and the scale
// goes into the exp2's argument as one fma (FlashAttention-2's order), and only a partial tile
// is masked. This and the loop's other savings (row sums across the quad once, at the end; no
// rescale of the first tile's zeros) cut the PTX by 16 % and head_dim 48's spills to none, but
// not the time at 128 sequences (46.5 µs against 46.2, bench/RESULTS.md): issue slots were not
// the bound.
//
// kMaskEveryTile: compare every tile's keys with `length` instead of branching to the mask on
// a partial tile only; the warpgroup kernel's scores for the next tile are in flight here, and
// a branch would make the compiler serialise its MMAs (ptxas C7520).
template <typename T, typename Tile, int kKeys, int kDimTiles, bool kMaskEveryTile = false>
__device__ __forceinline__ void SoftmaxAndAccumulate(float (&s)[kKeys / 8][4],
                                                     float (&o)[kDimTiles][4], float (&m)[2],
                                                     float (&l)[2], int key0, int length,
                                                     float scale_log2,
                                                     const std::uint16_t* v_tile,
                                                     const LaneRoles& lane) {
  constexpr int kKeyTiles = kKeys / 8;
  const int t = lane.t;
  const int tile_row = lane.tile_row;
  const int tile = lane.tile;
  // Block-uniform: only a sequence's last tile is partial.
  if (kMaskEveryTile || key0 + kKeys > length) {
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (key0 + n * 8 + 2 * t + (e & 1) >= length) s[n][e] = -INFINITY;
      }
    }
  }
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) tile_max[e / 2] = fmaxf(tile_max[e / 2], s[n][e]);
  }
  float correction[2];
  float neg_max[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(kFullMask, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(kFullMask, tile_max[r], 2));
    // The tile holds key0 < length, so the max is finite and exp2(-inf) gives 0 on entry.
    const float m_new = fmaxf(m[r], tile_max[r] * scale_log2);
    correction[r] = exp2f(m[r] - m_new);
    m[r] = m_new;
    neg_max[r] = -m_new;
    l[r] *= correction[r];
  }
#pragma unroll
  for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] = exp2f(fmaf(s[n][e], scale_log2, neg_max[e / 2]));
      l[e / 2] += s[n][e];
    }
  }
  if (key0 > 0) {  // the first tile finds o all zeros: nothing to rescale
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) {
      o[n][0] *= correction[0];
      o[n][1] *= correction[0];
      o[n][2] *= correction[1];
      o[n][3] *= correction[1];
    }
  }
  // P·V, 16 keys a step: S's accumulators of key tiles 2k, 2k+1 are P's A fragment.
#pragma unroll
  for (int k = 0; k < kKeys / 16; ++k) {
    const std::uint32_t p[4] = {Mma<T>::Pack(s[2 * k][0], s[2 * k][1]),
                                Mma<T>::Pack(s[2 * k][2], s[2 * k][3]),
                                Mma<T>::Pack(s[2 * k + 1][0], s[2 * k + 1][1]),
                                Mma<T>::Pack(s[2 * k + 1][2], s[2 * k + 1][3])};
#pragma unroll
    for (int n = 0; n < kDimTiles; n += 2) {
      // Tiles: dims of n (keys lo, hi), then dims of n + 1 (keys lo, hi), transposed.
      std::uint32_t b[4];
      LoadTilesTransposed(b, &v_tile[Tile::Offset(k * 16 + (tile % 2) * 8 + tile_row, n + tile / 2)]);
      Mma<T>::Run(o[n], p, b[0], b[1]);
      Mma<T>::Run(o[n + 1], p, b[2], b[3]);
    }
  }
}

// The warp's 16 output rows (queries q0 on of the sequence starting at token `begin`),
// normalised by the row sums, into its own 16 rows of `o_tile` (shared memory laid out like a
// key tile, free by now) and from there out in 16-byte vectors. Rows past `length` hold 0/0
// and are not stored.
template <typename T, typename Tile, int kDimTiles, int kRowVecs>
__device__ __forceinline__ void StoreOutputRows(const float (&o)[kDimTiles][4], float (&l)[2],
                                                std::uint16_t* o_tile, std::uint16_t* dst,
                                                std::int64_t begin, int q0, int length,
                                                std::int64_t width, std::int64_t head,
                                                const LaneRoles& roles) {
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  const int g = roles.g;
  const int t = roles.t;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(kFullMask, l[r], 1);
    l[r] += __shfl_xor_sync(kFullMask, l[r], 2);
    const float inv = 1.f / l[r];
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) {
      *reinterpret_cast<std::uint32_t*>(&o_tile[Tile::Offset(warp * kRows + g + 8 * r, n) + 2 * t]) =
          Mma<T>::Pack(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
    }
  }
  __syncwarp();
  for (int e = lane; e < kRows * kRowVecs; e += kWarp) {
    const int row = e / kRowVecs;
    const int chunk = e % kRowVecs;
    if (q0 + row < length) {
      *reinterpret_cast<uint4*>(dst + (begin + q0 + row) * width + head + chunk * kVec) =
          *reinterpret_cast<const uint4*>(&o_tile[Tile::Offset(warp * kRows + row, chunk)]);
    }
  }
}

}  // namespace ltserve::gpu::attention_tile
