// The persistent kernel for a run of Linear layers at few rows (chain_gemm.h).
//
// Work. Every layer is cut into units of 16 outputs (a group: one mma tile of W rows) by one
// slice of K (a multiple of 128). Units are numbered layer after layer, and every warp of the
// grid is a worker of its own: warp w takes units w, w + warps, w + 2·warps, ... in order.
// For a unit, a warp
//   1. asks the L2 for the weights of its next unit (so DRAM streams while it waits below),
//   2. loads its first 128 K of weights into registers (they depend on nothing),
//   3. waits until the groups of the previous layer that its K slice reads are flagged ready,
//   4. multiplies: Yᵀ = W·Xᵀ on mma.m16n8k16, W's 16-byte loads used as A fragments as they
//      are (the slot order of skinny_gemm.cu) and X's as B fragments, read from the L2
//      (another SM wrote them during this launch: never through L1), the next 128 K of W in
//      flight during each chunk's mmas,
//   5. with one slice: applies bias, residual and activation and stores the group's outputs;
//      with more: stores its fp32 partial sums, and the warp that finishes a group's last
//      slice sums all slices in slice order (bit-reproducible, whoever finishes last) and
//      stores the outputs,
//   6. flags the group ready (release), which is what step 3 of the next layer waits for.
// No unit waits for a later one, and all warps are resident (a cooperative launch), so the
// lowest unfinished unit can always run: no deadlock. The last block to finish zeroes the
// counters and flags for the next launch.
//
// Why per warp: each unit is a chain of latencies (a flag, the first weights, the partial
// sums' round trip) with little streaming in it. A block working on one unit at a time left
// DRAM at about a third of its bandwidth (bench/RESULTS.md); 16 warps an SM, each on its own
// unit, keep 16 such chains in flight.
//
// Why it beats one kernel per layer at few rows: a layer's kernel pays its launch, its first
// DRAM round trip and its tail in series with the next (bench/RESULTS.md: 6–7 µs a kernel that
// bytes do not explain). Here the next layer's weights are already streaming while the last
// groups of this one are reduced.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <utility>

#include "gpu/chain_gemm.h"
#include "gpu/chain_internal.cuh"
#include "gpu/kernels_device.cuh"
#include "gpu/tensor_core_device.cuh"

namespace ltserve::gpu {
namespace {

using chain::ChainArgs;
using chain::kGroup;
using chain::kStep;
using chain::kVector;
using chain::LayerArgs;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kChunk = 128;  // K per register load of W
constexpr int kStepsPerChunk = kChunk / kStep;
constexpr int kPossibleUnitsPerWarp[] = {1, 2, 4};
constexpr int kPossibleBlocksPerSm[] = {1, 2};

// The warp schedule's units: slices of whole 128-K chunks, as many as K allows.
std::size_t WarpPartialBytes(const ChainLayer* layers, std::size_t count,
                             std::int64_t units_target) {
  return chain::PartialBytes(layers, count, units_target, kChunk, std::int64_t{1} << 30,
                             chain::SliceCount::kAtLeast);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
using chain::LayerOf;

// One bulk L2 prefetch per W row of the unit (lane i: row i of the group).
__device__ __forceinline__ void PrefetchUnit(const ChainArgs& a, int unit, int lane) {
  if (unit >= a.total_units || lane >= kGroup) return;
  const LayerArgs& L = a.layer[LayerOf(a, unit)];
  const int local = unit - L.first_unit;
  const int n = (local / L.slices) * kGroup + lane;
  const int k0 = (local % L.slices) * L.slice_k;
  const int k1 = min(k0 + L.slice_k, L.k);
  if (n >= L.n) return;
  const auto* row = static_cast<const std::uint16_t*>(L.weight) + static_cast<long long>(n) * L.k + k0;
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(row), "r"((k1 - k0) * 2)
               : "memory");
}

// 16 bytes another SM may have written during this launch: from the L2, never a stale L1.
__device__ __forceinline__ uint4 LoadFromL2(const std::uint16_t* p) {
  return __ldcg(reinterpret_cast<const uint4*>(p));
}
#endif

// Up to 16 rows, registers for two blocks an SM (128 a thread); 32 rows may need more.
template <typename T, int kNTiles>
__global__ void __launch_bounds__(kThreads, kNTiles <= 2 ? 2 : 1) ChainGemmKernel(const ChainArgs args) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int rows = args.rows;
  const int warps = static_cast<int>(gridDim.x) * kWarps;
  const int first_unit = static_cast<int>(blockIdx.x) * kWarps + static_cast<int>(threadIdx.x) / 32;
  bool waited = false;
  const auto wait_prior = [&] {
    if (waited) return;
    // Everything below may touch memory the kernel before wrote (its outputs, or this
    // scratch's counters, which the previous launch zeroes last thing).
    WaitForPriorKernel();
    AllowDependentLaunch();
    waited = true;
  };

  if (args.prefetch) PrefetchUnit(args, first_unit, lane);
  for (int unit = first_unit; unit < args.total_units; unit += warps) {
    const int l = LayerOf(args, unit);
    const LayerArgs& L = args.layer[l];
    const int local = unit - L.first_unit;
    const int group = local / L.slices;
    const int slice = local % L.slices;
    const int k0 = slice * L.slice_k;
    const int k1 = min(k0 + L.slice_k, L.k);
    const int chunks = (k1 - k0 + kChunk - 1) / kChunk;
    const int n0 = group * kGroup;
    const auto* w = static_cast<const std::uint16_t*>(L.weight);
    if (args.prefetch) PrefetchUnit(args, unit + warps, lane);

    uint4 wr[2][kStepsPerChunk];
    uint4 wr_next[2][kStepsPerChunk];
    const auto load_w = [&](uint4 (&dst)[2][kStepsPerChunk], int k_base) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int n = n0 + h * 8 + g;
        const std::uint16_t* row = w + static_cast<long long>(n < L.n ? n : 0) * L.k;
#pragma unroll
        for (int u = 0; u < kStepsPerChunk; ++u) {
          const int k = k_base + u * kStep + t * kVector;
          dst[h][u] = n < L.n && k < k1 ? __ldg(reinterpret_cast<const uint4*>(row + k))
                                        : uint4{0u, 0u, 0u, 0u};
        }
      }
    };
    load_w(wr, k0);
    wait_prior();

    // The groups of the previous layer whose outputs are this slice of K, a lane each.
    chain::WaitForInputs(args, l, k0, k1, lane, 32);
    __syncwarp();

    // Rows past `rows` and K past k1 read as zeros: W is zero there too, but 0 × garbage
    // could be NaN.
    const auto* x = static_cast<const std::uint16_t*>(l == 0 ? args.input : args.layer[l - 1].output);
    float acc[kNTiles][4];
#pragma unroll
    for (int i = 0; i < kNTiles; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
    for (int c = 0; c < chunks; ++c) {
      const int k_chunk = k0 + c * kChunk;
      if (c + 1 < chunks) load_w(wr_next, k_chunk + kChunk);
      uint4 xr[kNTiles][kStepsPerChunk];
#pragma unroll
      for (int i = 0; i < kNTiles; ++i) {
        const int m = i * 8 + g;
#pragma unroll
        for (int u = 0; u < kStepsPerChunk; ++u) {
          const int k = k_chunk + u * kStep + t * kVector;
          xr[i][u] = m < rows && k < k1 ? LoadFromL2(x + static_cast<long long>(m) * L.k + k)
                                        : uint4{0u, 0u, 0u, 0u};
        }
      }
#pragma unroll
      for (int u = 0; u < kStepsPerChunk; ++u) {
#pragma unroll
        for (int i = 0; i < kNTiles; ++i) {
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const std::uint32_t a[4] = {SlotPair(wr[0][u], 2 * j), SlotPair(wr[1][u], 2 * j),
                                        SlotPair(wr[0][u], 2 * j + 1), SlotPair(wr[1][u], 2 * j + 1)};
            Mma<T>::Run(acc[i], a, SlotPair(xr[i][u], 2 * j), SlotPair(xr[i][u], 2 * j + 1));
          }
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int u = 0; u < kStepsPerChunk; ++u) wr[h][u] = wr_next[h][u];
      }
    }

    // Accumulator element e of tile i is Yᵀ[output n0 + g (+8 for e >= 2)][row 8i + 2t (+1 for
    // odd e)].
    if (L.slices == 1) {
#pragma unroll
      for (int i = 0; i < kNTiles; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int n = n0 + g + (e >= 2 ? 8 : 0);
          const int m = i * 8 + 2 * t + (e & 1);
          if (m < rows && n < L.n) chain::FinishOutput<T>(L, m, n, acc[i][e]);
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < kNTiles; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int n = n0 + g + (e >= 2 ? 8 : 0);
          const int m = i * 8 + 2 * t + (e & 1);
          if (m < rows && n < L.n) __stcg(chain::PartialAt(args, L, slice, m, n), acc[i][e]);
        }
      }
      __threadfence();
      __syncwarp();
      int last = 0;
      if (lane == 0) last = atomicAdd(args.sync + L.sync_offset + group, 1) == L.slices - 1;
      last = __shfl_sync(0xffffffffu, last, 0);
      if (last == 0) continue;
      __threadfence();  // the other slices' partial sums are visible below
      // The group's rows × 16 outputs, a lane each at a time.
      for (int o = lane; o < rows * kGroup; o += 32) {
        const int m = o / kGroup;
        const int n = n0 + o % kGroup;
        if (n < L.n) chain::FinishOutput<T>(L, m, n, chain::SumSlices(args, L, m, n));
      }
    }
    __threadfence();
    __syncwarp();
    if (lane == 0) chain::StoreRelease(args.sync + L.sync_offset + L.groups + group, 1);
  }

  wait_prior();
  chain::ResetWhenLastBlock(args);
#endif
}

template <typename T, int kNTiles>
cudaError_t LaunchTyped(const ChainArgs& args, int blocks, bool programmatic,
                        cudaStream_t stream) {
  return chain::LaunchCooperative(ChainGemmKernel<T, kNTiles>, args, blocks, kThreads, 0,
                                  programmatic, stream);
}

}  // namespace

std::string ChainGemmConfig::Describe() const {
  const std::string units = std::to_string(units_per_worker) + " unit" +
                            (units_per_worker == 1 ? "" : "s");
  const std::string blocks = std::to_string(blocks_per_sm) +
                             (blocks_per_sm == 1 ? " block" : " blocks") + " an SM";
  if (ring()) {
    return "chain ring, " + std::to_string(ring_stages) + " stages, " + blocks + ", " + units +
           " a block";
  }
  return "chain, " + units + " a warp, " + blocks + (prefetch ? ", L2 prefetch" : "");
}

bool ChainGemmSupports(int sm_major, ElemType type, std::int64_t rows, const ChainLayer* layers,
                       std::size_t layer_count) {
  if (sm_major < 9 || type == ElemType::kFp32 || rows < 1 || rows > kChainMaxRows ||
      layers == nullptr || layer_count < static_cast<std::size_t>(kChainMinLayers) ||
      layer_count > kChainMaxLayers) {
    return false;
  }
  for (std::size_t l = 0; l < layer_count; ++l) {
    const ChainLayer& layer = layers[l];
    if (layer.in_features < kVector || layer.in_features % kVector != 0 ||
        layer.in_features >= (std::int64_t{1} << 30) || layer.out_features < 1 ||
        layer.out_features >= (std::int64_t{1} << 30) ||
        (l > 0 && layer.in_features != layers[l - 1].out_features)) {
      return false;
    }
  }
  return true;
}

std::vector<ChainGemmConfig> ChainGemmCandidates(std::int64_t rows) {
  std::vector<ChainGemmConfig> candidates;
  for (const int blocks : kPossibleBlocksPerSm) {
    if (blocks > 1 && rows > kChainTwoBlocksMaxRows) continue;
    for (const int units : kPossibleUnitsPerWarp) {
      for (const bool prefetch : {true, false}) {
        candidates.push_back(ChainGemmConfig{static_cast<std::uint8_t>(units), prefetch,
                                             static_cast<std::uint8_t>(blocks)});
      }
    }
  }
  // The ring: two blocks an SM with 2 or 4 stages, or three with 2, where they fit.
  for (const auto& [blocks, stages] : {std::pair{2, 2}, {2, 4}, {3, 2}}) {
    if (!chain::RingFits(rows, blocks, stages)) continue;
    for (const int units : {1, 2}) {
      candidates.push_back(ChainGemmConfig{static_cast<std::uint8_t>(units), false,
                                           static_cast<std::uint8_t>(blocks),
                                           static_cast<std::uint8_t>(stages)});
    }
  }
  return candidates;
}

std::size_t ChainGemmScratchBytes(const ChainLayer* layers, std::size_t layer_count, int sm_count) {
  std::size_t partials = chain::RingPartialBytes(layers, layer_count, sm_count);
  for (const int blocks : kPossibleBlocksPerSm) {
    for (const int units : kPossibleUnitsPerWarp) {
      partials = std::max(partials, WarpPartialBytes(layers, layer_count,
                                                     std::int64_t{sm_count} * blocks * kWarps * units));
    }
  }
  return chain::SyncBytes(layers, layer_count) + partials;
}

std::int64_t ChainTraceUnits(const ChainLayer* layers, std::size_t layer_count) {
  std::int64_t units = 0;
  for (std::size_t l = 0; l < layer_count; ++l) {
    units += (layers[l].out_features + kGroup - 1) / kGroup *
             ((layers[l].in_features + chain::kRingChunk - 1) / chain::kRingChunk);
  }
  return units;
}

cudaError_t LaunchChainGemm(const ChainGemmConfig& config, const void* input,
                            const ChainLayer* layers, std::size_t layer_count, std::int64_t rows,
                            ElemType type, void* scratch, std::size_t scratch_bytes,
                            int sm_count, bool programmatic, cudaStream_t stream,
                            std::uint64_t* ring_trace) {
  if (!ChainGemmSupports(9, type, rows, layers, layer_count) || sm_count < 1 ||
      input == nullptr || scratch == nullptr) {
    return cudaErrorInvalidValue;
  }
  const std::vector<ChainGemmConfig> offered = ChainGemmCandidates(rows);
  if (std::find(offered.begin(), offered.end(), config) == offered.end()) {
    return cudaErrorInvalidValue;
  }
  if (config.ring()) {
    return chain::LaunchRing(config, input, layers, layer_count, rows, type, scratch,
                             scratch_bytes, sm_count, programmatic, stream, ring_trace);
  }
  const int blocks = sm_count * config.blocks_per_sm;
  ChainArgs args;
  if (!chain::BuildArgs(input, layers, layer_count, rows, scratch, scratch_bytes,
                        std::int64_t{blocks} * kWarps * config.units_per_worker, kChunk,
                        std::int64_t{1} << 30, chain::SliceCount::kAtLeast, &args)) {
    return cudaErrorInvalidValue;
  }
  args.prefetch = config.prefetch ? 1 : 0;
  const auto launch = [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    if (rows <= 8) return LaunchTyped<T, 1>(args, blocks, programmatic, stream);
    if (rows <= 16) return LaunchTyped<T, 2>(args, blocks, programmatic, stream);
    return LaunchTyped<T, 4>(args, blocks, programmatic, stream);
  };
  return type == ElemType::kBf16 ? launch(__nv_bfloat16{}) : launch(__half{});
}

}  // namespace ltserve::gpu
