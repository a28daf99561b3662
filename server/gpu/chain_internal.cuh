// What the layer-chain kernel's two schedules share (chain_gemm.cu: the warp schedule and the
// public entry points; chain_ring.cu: the ring schedule): how layers are cut into units, the
// kernel's arguments, the scratch's layout, and the flags' loads and stores. Not for use
// outside those two files.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "gpu/chain_gemm.h"
#include "gpu/kernels_device.cuh"

namespace ltserve::gpu::chain {

constexpr int kGroup = 16;  // outputs per unit: one mma tile of W rows
constexpr int kVector = 8;  // 16-bit elements per 16-byte load
constexpr int kStep = 32;   // K per pair of mmas
constexpr int kRingChunk = 512;  // ring schedule: K a stage, the smallest slice it cuts

struct LayerArgs {
  const void* weight;
  const void* bias;
  const void* residual;
  void* output;
  int n;
  int k;
  int groups;
  int slices;
  int slice_k;
  int first_unit;   // the chain-wide number of its first unit
  int sync_offset;  // its counters [groups], then its ready flags [groups], in ChainArgs::sync
  long long partial_offset;  // floats into ChainArgs::partials: [slices][rows][n]
  plan::Activation act;
};

struct ChainArgs {
  LayerArgs layer[kChainMaxLayers];
  const void* input;
  float* partials;
  int* sync;  // [0]: blocks finished; then per layer counters and flags
  int sync_ints;
  int layers;
  int rows;
  int total_units;
  int prefetch;     // warp schedule
  int ring_stages;  // ring schedule
  int x_stride;     // ring schedule: halves between rows of X's slice in shared memory
  unsigned long long* trace;  // ring schedule, benchmarks only: kChainTraceFields a unit, or null
};

// How one layer is cut: groups of 16 outputs, slices of K (whole chunks of `chunk`, at most
// `max_slice_chunks` of them), as many units as `units_target` asks for where K allows: at
// least that many (kAtLeast), or the slice count nearest to it (kNearest: the ring schedule,
// where every slice past the first costs the group a serial count and sum, so that 256 groups
// on 264 blocks stay 256 units rather than 512).
enum class SliceCount { kAtLeast, kNearest };

struct Division {
  std::int64_t groups;
  std::int64_t slices;
  std::int64_t slice_k;
};

inline Division Divide(std::int64_t n, std::int64_t k, std::int64_t units_target,
                       std::int64_t chunk, std::int64_t max_slice_chunks, SliceCount count) {
  const std::int64_t groups = (n + kGroup - 1) / kGroup;
  const std::int64_t chunks = (k + chunk - 1) / chunk;
  const std::int64_t rounding = count == SliceCount::kAtLeast ? groups - 1 : groups / 2;
  const std::int64_t slices_wanted = std::max<std::int64_t>(1, (units_target + rounding) / groups);
  const std::int64_t slice_chunks = std::clamp<std::int64_t>(
      (chunks + slices_wanted - 1) / slices_wanted, 1, max_slice_chunks);
  return Division{groups, (chunks + slice_chunks - 1) / slice_chunks, slice_chunks * chunk};
}

// The scratch's synchronisation ints: [0] counts the blocks that finished; then, per layer,
// one counter per group (its K slices done) and one ready flag per group. Rounded up to 256
// bytes; the partial sums follow.
inline std::size_t SyncBytes(const ChainLayer* layers, std::size_t count) {
  std::size_t ints = 1;
  for (std::size_t l = 0; l < count; ++l) {
    ints += 2 * static_cast<std::size_t>((layers[l].out_features + kGroup - 1) / kGroup);
  }
  return (ints * sizeof(int) + 255) / 256 * 256;
}

// The partial sums' bytes for one division of the layers (kChainMaxRows rows a slice).
inline std::size_t PartialBytes(const ChainLayer* layers, std::size_t count,
                                std::int64_t units_target, std::int64_t chunk,
                                std::int64_t max_slice_chunks, SliceCount slice_count) {
  std::size_t bytes = 0;
  for (std::size_t l = 0; l < count; ++l) {
    const Division d = Divide(layers[l].out_features, layers[l].in_features, units_target, chunk,
                              max_slice_chunks, slice_count);
    if (d.slices > 1) {
      bytes += static_cast<std::size_t>(d.slices * kChainMaxRows * layers[l].out_features) *
               sizeof(float);
    }
  }
  return bytes;
}

// The arguments of one launch over `layers` (already checked by ChainGemmSupports), cut as
// Divide says; false where a layer has no weight or output, the units overflow an int or the
// scratch is too small for the counters, flags and partial sums.
inline bool BuildArgs(const void* input, const ChainLayer* layers, std::size_t count,
                      std::int64_t rows, void* scratch, std::size_t scratch_bytes,
                      std::int64_t units_target, std::int64_t chunk,
                      std::int64_t max_slice_chunks, SliceCount slice_count, ChainArgs* args) {
  const std::size_t sync_bytes = SyncBytes(layers, count);
  if (sync_bytes +
          PartialBytes(layers, count, units_target, chunk, max_slice_chunks, slice_count) >
      scratch_bytes) {
    return false;
  }
  *args = ChainArgs{};
  args->input = input;
  args->sync = static_cast<int*>(scratch);
  args->sync_ints = static_cast<int>(sync_bytes / sizeof(int));
  args->partials = reinterpret_cast<float*>(static_cast<unsigned char*>(scratch) + sync_bytes);
  args->layers = static_cast<int>(count);
  args->rows = static_cast<int>(rows);
  std::int64_t units = 0;
  std::int64_t sync_offset = 1;
  std::int64_t partial_offset = 0;
  for (std::size_t l = 0; l < count; ++l) {
    const ChainLayer& layer = layers[l];
    if (layer.weight == nullptr || layer.output == nullptr) return false;
    const Division d = Divide(layer.out_features, layer.in_features, units_target, chunk,
                              max_slice_chunks, slice_count);
    LayerArgs& a = args->layer[l];
    a.weight = layer.weight;
    a.bias = layer.bias;
    a.residual = layer.residual;
    a.output = layer.output;
    a.n = static_cast<int>(layer.out_features);
    a.k = static_cast<int>(layer.in_features);
    a.groups = static_cast<int>(d.groups);
    a.slices = static_cast<int>(d.slices);
    a.slice_k = static_cast<int>(d.slice_k);
    a.first_unit = static_cast<int>(units);
    a.sync_offset = static_cast<int>(sync_offset);
    a.partial_offset = partial_offset;
    a.act = layer.act;
    units += d.groups * d.slices;
    sync_offset += 2 * d.groups;
    if (d.slices > 1) partial_offset += d.slices * kChainMaxRows * layer.out_features;
  }
  if (units >= (std::int64_t{1} << 30)) return false;
  args->total_units = static_cast<int>(units);
  return true;
}

// Enqueues one launch of a chain kernel: `blocks` blocks of `threads`, cooperative (blocks wait
// on each other's flags, so every block must be resident at once), with `programmatic` also a
// programmatic dependent launch.
template <typename Kernel>
cudaError_t LaunchCooperative(Kernel kernel, const ChainArgs& args, int blocks, int threads,
                              std::size_t smem_bytes, bool programmatic, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attributes[2]{};
  attributes[0].id = cudaLaunchAttributeCooperative;
  attributes[0].val.cooperative = 1;
  attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[1].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attributes;
  config.numAttrs = programmatic ? 2 : 1;
  return cudaLaunchKernelEx(&config, kernel, args);
}

// The ring schedule (chain_ring.cu).

// Whether its blocks fit `blocks_per_sm` to an SM at `rows` with `stages` stages (the ring,
// X's slice for the rows' tile and the warps' sums in shared memory).
bool RingFits(std::int64_t rows, int blocks_per_sm, int stages);

// The partial sums' bytes it may need for these layers, over every configuration
// ChainGemmCandidates offers it.
std::size_t RingPartialBytes(const ChainLayer* layers, std::size_t count, int sm_count);

// LaunchChainGemm for a ring configuration, after LaunchChainGemm's checks (ChainGemmSupports,
// the configuration offered at `rows`, non-null input and scratch, sm_count >= 1).
cudaError_t LaunchRing(const ChainGemmConfig& config, const void* input, const ChainLayer* layers,
                       std::size_t count, std::int64_t rows, ElemType type, void* scratch,
                       std::size_t scratch_bytes, int sm_count, bool programmatic,
                       cudaStream_t stream, std::uint64_t* trace);

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ int LoadRelaxed(const int* p) {
  int v;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void StoreRelease(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// One thread's release and acquire at GPU scope. After a barrier of the block's threads it
// releases their writes too (the barrier orders them before it), and a barrier after it
// hands its acquire on: one thread's fence where __threadfence() in every thread was a
// sequentially consistent fence each (MEMBAR.SC), waited out by the whole block.
__device__ __forceinline__ void FenceAcqRel() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

__device__ __forceinline__ int AtomicAddAcqRel(int* p, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

// Which layer chain-wide unit `unit` belongs to.
__device__ __forceinline__ int LayerOf(const ChainArgs& a, int unit) {
  int l = 0;
  while (l + 1 < a.layers && unit >= a.layer[l + 1].first_unit) ++l;
  return l;
}

// Waits until the groups of the previous layer whose outputs are K [k0, k1) of layer `l` are
// flagged ready, threads `first_thread`, `first_thread` + `threads`, ... each polling some.
// Relaxed polls and one acquire fence after, in the threads that polled: an acquire per poll,
// thousands of threads polling, would order every poll against the SM's other loads. The
// caller then syncs the threads that read the inputs with the pollers.
__device__ __forceinline__ void WaitForInputs(const ChainArgs& a, int l, int k0, int k1,
                                              int thread, int threads) {
  if (l == 0) return;
  const LayerArgs& prev = a.layer[l - 1];
  const int first = k0 / kGroup;
  const int count = (k1 - 1) / kGroup - first + 1;
  const int* flags = a.sync + prev.sync_offset + prev.groups + first;
  for (int i = thread; i < count; i += threads) {
    while (LoadRelaxed(flags + i) == 0) __nanosleep(64);
  }
  if (thread < count) FenceAcqRel();
}

// Output n's bias in layer L (0 without one, or past its outputs).
template <typename T>
__device__ __forceinline__ float BiasAt(const LayerArgs& L, int n) {
  return L.bias != nullptr && n < L.n ? Load(static_cast<const T*>(L.bias), n) : 0.f;
}

// Output (m, n) of layer L from its sum with the bias added: residual and activation, then the
// store.
template <typename T>
__device__ __forceinline__ void FinishBiasedOutput(const LayerArgs& L, int m, int n, float v) {
  const long long at = static_cast<long long>(m) * L.n + n;
  if (L.residual != nullptr) v += Load(static_cast<const T*>(L.residual), at);
  Store(static_cast<T*>(L.output), at, Activate(L.act, v));
}

// Output (m, n) of layer L from its sum: bias, residual and activation, then the store.
template <typename T>
__device__ __forceinline__ void FinishOutput(const LayerArgs& L, int m, int n, float v) {
  FinishBiasedOutput<T>(L, m, n, v + BiasAt<T>(L, n));
}

// Where slice `slice`'s partial sum of output (m, n) of layer L goes.
__device__ __forceinline__ float* PartialAt(const ChainArgs& a, const LayerArgs& L, int slice,
                                            int m, int n) {
  return a.partials + L.partial_offset + (static_cast<long long>(slice) * a.rows + m) * L.n + n;
}

// Output (m, n)'s partial sums over the layer's slices, added in slice order: the same bits
// whichever worker adds them. Every slice's loads of a batch in flight together.
__device__ __forceinline__ float SumSlices(const ChainArgs& a, const LayerArgs& L, int m, int n) {
  constexpr int kBatch = 8;
  const float* p = PartialAt(a, L, 0, m, n);
  const long long slice_stride = static_cast<long long>(a.rows) * L.n;
  float v = 0.f;
  for (int s0 = 0; s0 < L.slices; s0 += kBatch) {
    float part[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      part[b] = s0 + b < L.slices ? __ldcg(p + (s0 + b) * slice_stride) : 0.f;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) v += part[b];
  }
  return v;
}

// The end of a launch, by every thread of every block once it has finished its units: the
// last block to get here zeroes the counters and flags for the next launch (every other block
// has finished every unit, so nobody reads them any more). Which block is last reaches its
// threads through the barrier's own OR, not through shared memory.
__device__ __forceinline__ void ResetWhenLastBlock(const ChainArgs& a) {
  __syncthreads();  // the block's last reads of the flags are done
  const int is_last = threadIdx.x == 0 &&
                      AtomicAddAcqRel(a.sync, 1) == static_cast<int>(gridDim.x) - 1;
  if (__syncthreads_or(is_last) != 0) {
    for (int i = 1 + static_cast<int>(threadIdx.x); i < a.sync_ints;
         i += static_cast<int>(blockDim.x)) {
      a.sync[i] = 0;
    }
    if (threadIdx.x == 0) a.sync[0] = 0;
  }
}
#endif

}  // namespace ltserve::gpu::chain
