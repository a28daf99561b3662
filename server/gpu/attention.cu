#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>

#include "gpu/attention.h"
#include "gpu/attention_layout.h"
#include "gpu/kernels_device.cuh"
#include "gpu/tensor_core_device.cuh"

namespace ltserve::gpu {
namespace {

constexpr int kWarp = 32;
// The CUDA-core kernel: one query per warp, 8 warps, looping over its item's queries.
constexpr int kQueriesPerRound = 8;
constexpr int kThreads = kQueriesPerRound * kWarp;
// Keys per shared-memory tile: one per lane, so each lane scores one key of the tile.
constexpr int kKeyTile = kWarp;
constexpr int kMaxHeadDim = static_cast<int>(kAttentionMaxHeadDim);
// Accumulator elements per lane: lane i holds output dims i, i + 32, ...
constexpr int kPerLane = kMaxHeadDim / kWarp;
// Work items are spread over at most this many blocks per head (a grid-stride loop does the
// rest): enough to fill every SM, without launching blocks that only find nothing to do.
constexpr std::int64_t kMaxBlocksPerHead = 1024;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kRoundsPerItem = kAttentionQueriesPerItem / kQueriesPerRound;

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

// Variant 1, CUDA cores, any element type and head_dim: one block per (work item, head), 8 of
// the item's queries at a time, one per warp. The block streams the sequence's keys and values
// through shared memory a tile at a time; each warp keeps its query's running max `m`, sum
// `l` and output accumulator in registers and rescales them once per tile.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    AttentionKernel(const T* qkv, T* out, const std::int32_t* batch, int num_heads, int head_dim,
                    float scale) {
  __shared__ float q_s[kQueriesPerRound][kMaxHeadDim];
  __shared__ float k_s[kKeyTile][kMaxHeadDim + 1];  // +1: lanes read different rows conflict-free
  __shared__ float v_s[kKeyTile][kMaxHeadDim];
  WaitForPriorKernel();
  AllowDependentLaunch();
  const int items = batch[0];
  const std::int32_t* work = batch + 1;
  const std::int64_t width = static_cast<std::int64_t>(num_heads) * head_dim;
  const std::int64_t stride = 3 * width;
  // Heads in x, items in y: see the tensor-core kernel below.
  const std::int64_t head_offset = static_cast<std::int64_t>(blockIdx.x) * head_dim;
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;

  for (int round = blockIdx.y; round < items * kRoundsPerItem; round += gridDim.y) {
    const std::int32_t* w = work + kAttentionItemInts * (round / kRoundsPerItem);
    const std::int64_t begin = w[0];
    const int length = w[1];
    const int first = w[2] + (round % kRoundsPerItem) * kQueriesPerRound;
    if (first >= length) continue;  // block-uniform: the item ends before this round
    const int query = first + warp;
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

// Variant 2, tensor cores (bf16/fp16, head_dim a multiple of 16 up to 128): FlashAttention-2's
// forward pass. A block takes one work item (64 queries of one sequence) of one head; each of
// its 4 warps owns 16 query rows and keeps them in registers as mma A fragments. The block
// walks the sequence's keys in tiles, K and V copied row-major into shared memory with
// cp.async, two stages deep so the next tile's copy overlaps this tile's math; ldmatrix turns
// them into mma B fragments (transposing V on the way). Per tile a warp computes S = q·kᵀ
// (fp32 accumulators), masks keys past the end, updates the running max/sum (online softmax,
// in the exp2 domain with the scale folded in), rounds P to the input type in registers (the
// accumulator layout of S is the A layout of P·V) and accumulates P·V. Nothing of S or P leaves
// registers.
namespace tensor_core {

constexpr int kWarps = 4;
constexpr int kRows = 16;                       // query rows per warp: mma's m
constexpr int kThreads = kWarps * kWarp;
constexpr int kVec = 8;                         // halves per 16-byte vector (a "chunk")
static_assert(kWarps * kRows == kAttentionQueriesPerItem, "one block covers one work item");

using attention_layout::SharedTile;
static_assert(kVec == attention_layout::kChunkHalves, "a copy moves one chunk");

__device__ __forceinline__ std::uint32_t Load32(const std::uint16_t* p) {
  return *reinterpret_cast<const std::uint32_t*>(p);
}

// One block per work item and head, as many blocks as the bucket could have items. A
// persistent schedule (only resident blocks, each copying its next item's queries and first
// keys while it computes the current item's last tile) measured 1.03–1.27× slower
// (bench/RESULTS.md, 2026-12-03): under Nsight Compute both kernels run at ~23 % warps active,
// held to 4 blocks an SM by registers and shared memory alike, with the tensor pipe ~21 % and
// DRAM ~37 % busy at 128 sequences. So the first tile's round trip, which that schedule hid,
// is not what bounds this kernel. Nor are the warps an SM holds: 32-key tiles with registers
// capped for 5 blocks raised warps active to 29 % in the same time (6 blocks spilled and lost).
// Queries and outputs through shared memory in 16-byte vectors took it from 51 to 46 µs at 128
// sequences (bench/RESULTS.md); there, per issued instruction, warps wait 1.3 cycles on fixed
// latencies (mma and exp2 results), 1.0 on global memory, 0.8 on shared memory, 0.3 at barriers.
// Up to head_dim 64, registers are capped for 4 blocks (16 warps) an SM: at 140 free-running
// registers only 3 fit, and a kernel this latency-bound needs the warps more.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads, kHeadDim <= 64 ? 4 : 1)
    AttentionKernel(const T* qkv, T* out, const std::int32_t* batch, int num_heads,
                    float scale_log2) {
  // Keys per tile: 64, or 32 for wide heads, so two stages of K and V fit 48 KB of static
  // shared memory.
  constexpr int kKeys = kHeadDim <= 80 ? 64 : 32;
  constexpr int kChunks = kHeadDim / 16;   // k steps of q·kᵀ
  constexpr int kDimTiles = kHeadDim / 8;  // n tiles of P·V (even: kHeadDim % 16 == 0)
  constexpr int kKeyTiles = kKeys / 8;     // n tiles of q·kᵀ
  constexpr int kRowVecs = kHeadDim / kVec;
  using Tile = SharedTile<kRowVecs>;
  constexpr int kStride = Tile::kStride;
  constexpr int kItemRows = kWarps * kRows;
  // Queries and outputs go through shared memory so that global memory sees whole 16-byte
  // vectors: an mma fragment's 4-byte pieces, 8 rows an instruction, use half of each sector
  // they touch (Nsight Compute counted 40 % of the kernel's sectors excess at 128 sequences).
  // The queries get a tile of their own where it fits beside both stages in 48 KB of static
  // shared memory (head_dim 80, 96 and 112, padded, do not: they read fragments from global
  // memory; 128, unpadded, fills the 48 KB exactly); the outputs reuse the key stages, free
  // once the last tile is done.
  constexpr bool kStageQueries = (4 * kKeys + kItemRows) * kStride * 2 <= 48 * 1024;
  static_assert(2 * kKeys >= kItemRows, "the output tile fits in the key stages");
  constexpr int kCopyVecs = kKeys * kRowVecs;  // 16-byte copies of K (and of V) a tile
  constexpr int kCopiesPerThread = (kCopyVecs + kThreads - 1) / kThreads;
  // Two stages: the copy of tile i + 1 runs while the warps compute on tile i.
  __shared__ __align__(128) std::uint16_t k_s[2][kKeys * kStride];
  __shared__ __align__(128) std::uint16_t v_s[2][kKeys * kStride];
  __shared__ __align__(128) std::uint16_t q_s[(kStageQueries ? kItemRows : 1) * kStride];
  WaitForPriorKernel();
  AllowDependentLaunch();

  const std::int32_t* work = batch + 1;
  const std::int64_t width = static_cast<std::int64_t>(num_heads) * kHeadDim;
  const std::int64_t stride = 3 * width;
  // Heads in x, items in y: blocks start in linear order, x first, so every head's first
  // items start before any block of a later item. With items in x, one sequence of 128 (2
  // items a head in a grid sized for many short ones) ran 24 working blocks among 1,560,
  // each head's behind the empty blocks of the heads before it.
  const std::int64_t head = static_cast<std::int64_t>(blockIdx.x) * kHeadDim;
  const auto* in = reinterpret_cast<const std::uint16_t*>(qkv);
  auto* dst = reinterpret_cast<std::uint16_t*>(out);
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  const int g = lane / 4;  // mma fragment row group
  const int t = lane % 4;  // and the thread's column pair within it
  // ldmatrix: the row this lane addresses within its 8×8 tile, and which tile.
  const int tile_row = lane % 8;
  const int tile = lane / 8;

  // The first item is read alongside the item count rather than after it: the grid has at
  // most max_tokens blocks, so its slot lies inside the buffer whether or not it is in use.
  int3 next = make_int3(work[kAttentionItemInts * blockIdx.y],
                        work[kAttentionItemInts * blockIdx.y + 1],
                        work[kAttentionItemInts * blockIdx.y + 2]);
  const int items = batch[0];
  for (int item = blockIdx.y; item < items; item += gridDim.y) {
    const std::int64_t begin = next.x;
    const int length = next.y;
    const int item_q0 = next.z;
    const int q0 = item_q0 + warp * kRows;
    if (item + static_cast<int>(gridDim.y) < items) {
      const std::int32_t* w = work + kAttentionItemInts * (item + gridDim.y);
      next = make_int3(w[0], w[1], w[2]);
    }
    const bool warp_active = q0 < length;  // block-uniform loop below, warp-uniform compute
    const std::uint16_t* keys = in + begin * stride + width + head;
    const std::uint16_t* values = keys + width;
    auto load_tile = [&](int key0, int stage) {
      // A fixed number of copies a thread, unrolled: no loop test or index arithmetic beyond
      // what the constants leave (where a row's vectors divide the block, each thread keeps
      // one column and steps down the rows).
#pragma unroll
      for (int it = 0; it < kCopiesPerThread; ++it) {
        const int e = threadIdx.x + it * kThreads;
        if (kCopyVecs % kThreads != 0 && e >= kCopyVecs) break;
        const int j = e / kRowVecs;
        const int chunk = e % kRowVecs;
        // Keys past the end are zeros: their p is 0, and 0·V must not meet garbage (NaN).
        const bool valid = key0 + j < length;
        const std::int64_t offset = valid ? (key0 + j) * stride + chunk * kVec : 0;
        CopyAsync16(&k_s[stage][Tile::Offset(j, chunk)], keys + offset, valid);
        CopyAsync16(&v_s[stage][Tile::Offset(j, chunk)], values + offset, valid);
      }
      CommitCopies();
    };
    __syncthreads();  // the previous item's warps are done with both stages and the queries
    // This warp's 16 query rows as A fragments, in registers where the queries are not staged;
    // rows past the end are zeros and never stored. Staged queries are read from shared memory
    // every tile instead: held across the loop, their 16 registers made the head_dim-64 kernel
    // spill 40 bytes under its cap of 128 (8 now; local loads a launch at 128 sequences from
    // 12.6 to 3.1 MB, 45.7 to 44.4 µs under Nsight Compute, bench/RESULTS.md).
    std::uint32_t q[kStageQueries ? 1 : kChunks][4] = {};
    if constexpr (kStageQueries) {
      // In the first tile's copy group, read by ldmatrix once that group has landed.
      for (int e = threadIdx.x; e < kItemRows * kRowVecs; e += kThreads) {
        const int j = e / kRowVecs;
        const int chunk = e % kRowVecs;
        const bool valid = item_q0 + j < length;
        CopyAsync16(&q_s[Tile::Offset(j, chunk)],
                    in + (valid ? (begin + item_q0 + j) * stride + head + chunk * kVec : 0), valid);
      }
    }
    load_tile(0, 0);
    if constexpr (!kStageQueries) {
      // Straight into registers, while the first tile is in flight.
      const int row0 = q0 + g;
      const int row1 = q0 + g + 8;
      const std::uint16_t* q_row0 = in + (begin + row0) * stride + head + 2 * t;
      const std::uint16_t* q_row1 = in + (begin + row1) * stride + head + 2 * t;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        q[c][0] = row0 < length ? Load32(q_row0 + c * 16) : 0u;
        q[c][1] = row1 < length ? Load32(q_row1 + c * 16) : 0u;
        q[c][2] = row0 < length ? Load32(q_row0 + c * 16 + 8) : 0u;
        q[c][3] = row1 < length ? Load32(q_row1 + c * 16 + 8) : 0u;
      }
    }
    float o[kDimTiles][4];
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY};  // running max of rows g and g + 8 (log2 domain)
    float l[2] = {0.f, 0.f};  // running sums of this lane's columns; the row's 4 lanes add at the end

    for (int key0 = 0, stage = 0; key0 < length; key0 += kKeys, stage ^= 1) {
      if (key0 + kKeys < length) {
        load_tile(key0 + kKeys, stage ^ 1);
        WaitCopies<1>();  // this tile's group is done; the next one may still be in flight
      } else {
        WaitCopies<0>();
      }
      __syncthreads();  // every thread's copies of this tile are visible
      if (warp_active) {
        float s[kKeyTiles][4];
#pragma unroll
        for (int n = 0; n < kKeyTiles; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          std::uint32_t q_frag[4];
          if constexpr (kStageQueries) {
            // Tiles: rows lo, rows hi of dims lo, then of dims hi: the A fragment's order.
            LoadTiles(q_frag, &q_s[Tile::Offset(warp * kRows + (tile % 2) * 8 + tile_row,
                                                2 * c + tile / 2)]);
          } else {
#pragma unroll
            for (int i = 0; i < 4; ++i) q_frag[i] = q[c][i];
          }
#pragma unroll
          for (int n = 0; n < kKeyTiles; n += 2) {
            // Tiles: keys of n (dims lo, hi), then keys of n + 1 (lo, hi).
            std::uint32_t b[4];
            LoadTiles(b, &k_s[stage][Tile::Offset((n + tile / 2) * 8 + tile_row, 2 * c + tile % 2)]);
            Mma<T>::Run(s[n], q_frag, b[0], b[1]);
            Mma<T>::Run(s[n + 1], q_frag, b[2], b[3]);
          }
        }
        // The softmax works on raw scores: the scale is positive, so the max comes first and
        // the scale goes into the exp2's argument as one fma (FlashAttention-2's order), and
        // only a partial tile is masked. This and the loop's other savings (row sums across
        // the quad once, at the end; no rescale of the first tile's zeros; unrolled copies)
        // cut the PTX by 16 % and head_dim 48's spills to none, but not the time at 128
        // sequences (46.5 µs against 46.2, bench/RESULTS.md): issue slots were not the bound.
        if (key0 + kKeys > length) {  // block-uniform: only a sequence's last tile is partial
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
            LoadTilesTransposed(
                b, &v_s[stage][Tile::Offset(k * 16 + (tile % 2) * 8 + tile_row, n + tile / 2)]);
            Mma<T>::Run(o[n], p, b[0], b[1]);
            Mma<T>::Run(o[n + 1], p, b[2], b[3]);
          }
        }
      }
      __syncthreads();  // done with this stage before the next iteration's copy overwrites it
    }
    if (!warp_active) continue;
    // The warp's rows into its own 16 rows of the (now free) key stages, then out in 16-byte
    // vectors. Rows past the end hold 0/0 and are not stored.
    std::uint16_t* o_s = &k_s[0][0];  // rows warp * kRows on, laid out like a key tile
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[r] += __shfl_xor_sync(kFullMask, l[r], 1);
      l[r] += __shfl_xor_sync(kFullMask, l[r], 2);
      const float inv = 1.f / l[r];
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n) {
        *reinterpret_cast<std::uint32_t*>(&o_s[Tile::Offset(warp * kRows + g + 8 * r, n) + 2 * t]) =
            Mma<T>::Pack(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
      }
    }
    __syncwarp();
    for (int e = lane; e < kRows * kRowVecs; e += kWarp) {
      const int row = e / kRowVecs;
      const int chunk = e % kRowVecs;
      if (q0 + row < length) {
        *reinterpret_cast<uint4*>(dst + (begin + q0 + row) * width + head + chunk * kVec) =
            *reinterpret_cast<const uint4*>(&o_s[Tile::Offset(warp * kRows + row, chunk)]);
      }
    }
  }
}

// Blocks per head: enough for the items of `bucket_tokens` tokens in long sequences, plus
// about kShortItemBlocks over all heads for the extra items of short ones; a grid-stride loop
// covers batches of more short sequences. The extra blocks find nothing to do when the
// sequences are long, and each still has to be started: one sequence of 128 at 12 heads had
// 128 of them a head (1,536 empty blocks beside 24 working ones).
constexpr std::int64_t kShortItemBlocks = 512;  // ~4 resident blocks on each of 132 SMs

unsigned Blocks(std::int64_t bucket_tokens, int num_heads) {
  std::int64_t blocks = (bucket_tokens + kAttentionQueriesPerItem - 1) / kAttentionQueriesPerItem;
  const std::int64_t short_blocks = (kShortItemBlocks + num_heads - 1) / num_heads;
  blocks += bucket_tokens < short_blocks ? bucket_tokens : short_blocks;
  // Never more than the bucket's tokens: that many items at most (each covers a token), and
  // the bound that keeps each block's first-item read inside the work buffer (LaunchAttention).
  // Without it a bucket of 1 to ~43 tokens at the buffer's capacity read past its end.
  if (blocks > bucket_tokens) blocks = bucket_tokens;
  return static_cast<unsigned>(blocks < kMaxBlocksPerHead ? blocks : kMaxBlocksPerHead);
}

template <typename T, int kHeadDim>
cudaError_t Launch(const void* qkv, void* out, const std::int32_t* batch,
                   std::int64_t bucket_tokens, int num_heads, float scale_log2,
                   bool programmatic, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(num_heads), Blocks(bucket_tokens, num_heads));
  return LaunchProgrammatic(programmatic, AttentionKernel<T, kHeadDim>, grid, dim3(kThreads),
                            stream, static_cast<const T*>(qkv), static_cast<T*>(out), batch,
                            num_heads, scale_log2);
}

bool Supports(int head_dim) { return head_dim % 16 == 0 && head_dim <= kMaxHeadDim; }

template <typename T>
cudaError_t Dispatch(const void* qkv, void* out, const std::int32_t* batch,
                     std::int64_t bucket_tokens, int num_heads, int head_dim, bool programmatic,
                     cudaStream_t stream) {
  // softmax(x·scale) = 2^(x·scale·log2 e) / Σ: the kernel works in the exp2 domain.
  const float scale_log2 =
      static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(head_dim)));
  switch (head_dim) {
#define LTSERVE_ATTENTION_HEAD_DIM(D) \
  case D:                              \
    return Launch<T, D>(qkv, out, batch, bucket_tokens, num_heads, scale_log2, programmatic, stream);
    LTSERVE_ATTENTION_HEAD_DIM(16)
    LTSERVE_ATTENTION_HEAD_DIM(32)
    LTSERVE_ATTENTION_HEAD_DIM(48)
    LTSERVE_ATTENTION_HEAD_DIM(64)
    LTSERVE_ATTENTION_HEAD_DIM(80)
    LTSERVE_ATTENTION_HEAD_DIM(96)
    LTSERVE_ATTENTION_HEAD_DIM(112)
    LTSERVE_ATTENTION_HEAD_DIM(128)
#undef LTSERVE_ATTENTION_HEAD_DIM
  }
  return cudaErrorInvalidValue;
}

}  // namespace tensor_core

template <typename T>
cudaError_t Attention(const void* qkv, void* out, const std::int32_t* batch,
                      std::int64_t bucket_tokens, int num_heads, int head_dim, bool programmatic,
                      cudaStream_t stream) {
  // A batch of bucket_tokens tokens has at most that many work items (each covers a token).
  const std::int64_t blocks = bucket_tokens < kMaxBlocksPerHead ? bucket_tokens : kMaxBlocksPerHead;
  const dim3 grid(static_cast<unsigned>(num_heads), static_cast<unsigned>(blocks));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  return LaunchProgrammatic(programmatic, AttentionKernel<T>, grid, dim3(kThreads), stream,
                            static_cast<const T*>(qkv), static_cast<T*>(out), batch, num_heads,
                            head_dim, scale);
}

}  // namespace

cudaError_t LaunchAttention(const void* qkv, void* out, const std::int32_t* batch,
                            std::int64_t max_tokens, std::int64_t bucket_tokens,
                            std::int64_t num_heads, std::int64_t head_dim, ElemType type,
                            bool programmatic, cudaStream_t stream) {
  if (head_dim < 1 || head_dim > kAttentionMaxHeadDim || num_heads < 1 || num_heads > 65535) {
    return cudaErrorInvalidValue;
  }
  // Blocks read their first work item's slot before the item count, which is inside the
  // buffer only while the grid, bounded by the bucket, stays within its capacity.
  if (bucket_tokens > max_tokens) return cudaErrorInvalidValue;
  if (bucket_tokens < 1) return cudaSuccess;
  const int heads = static_cast<int>(num_heads);
  const int dim = static_cast<int>(head_dim);
  switch (type) {
    case ElemType::kFp32:
      return Attention<float>(qkv, out, batch, bucket_tokens, heads, dim, programmatic, stream);
    case ElemType::kFp16:
      if (tensor_core::Supports(dim)) {
        return tensor_core::Dispatch<__half>(qkv, out, batch, bucket_tokens, heads, dim,
                                             programmatic, stream);
      }
      return Attention<__half>(qkv, out, batch, bucket_tokens, heads, dim, programmatic, stream);
    case ElemType::kBf16:
      if (tensor_core::Supports(dim)) {
        return tensor_core::Dispatch<__nv_bfloat16>(qkv, out, batch, bucket_tokens, heads,
                                                     dim, programmatic, stream);
      }
      return Attention<__nv_bfloat16>(qkv, out, batch, bucket_tokens, heads, dim, programmatic, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace ltserve::gpu
