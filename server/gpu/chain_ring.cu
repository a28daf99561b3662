// The layer-chain kernel's ring schedule (chain_gemm.h, ChainGemmConfig::ring_stages).
//
// Why: the warp schedule (chain_gemm.cu) streamed the MLP's 48 MB at 1.4 TB/s, its warps
// waiting on their own loads, each in its own chain of weight loads, input reads and partial
// sums (bench/RESULTS.md, "The layer-chain kernel"). The streamed GEMM (streamed_gemm.cu) took
// the loads out of the consumers' chains: one producer warp a block issues bulk copies into a
// shared-memory ring, and at two or three blocks an SM it streamed a layer as fast as the
// split-K kernel did alone; but as one kernel a layer it lost at every kernel boundary what it
// gained (bench/RESULTS.md, "two or three blocks an SM"). Here that producer runs through all
// the layers in one launch: the weights depend on nothing, so at a layer's end, while the
// consumers wait for the inputs of the next, the rings go on filling with its weights.
//
// Work. Units are numbered layer after layer (chain_internal.cuh: 16 outputs × one slice of
// K, at most 16,384 / the rows of K so that X's slice fits in shared memory); block b
// takes units b, b + B, b + 2B, ... Its producer warp copies each unit's 16 weight rows, 512 K
// at a time (one bulk copy a row, completing on the stage's full barrier), into the ring's
// next stage once the consumers have released it. Its four consumer warps, per unit:
//   1. wait until the previous layer's groups that this K slice reads are flagged ready,
//   2. copy X's rows of the slice into shared memory (from the L2: other SMs wrote them),
//   3. for each stage as it fills, each warp takes every fourth 32-K step: Yᵀ = W·Xᵀ on
//      mma.m16n8k16 with the split-K kernel's fragment layout (skinny_gemm.cu), and releases
//      the stage,
//   4. add the four warps' sums in warp order, then finish as the warp schedule does: with one
//      slice, bias, residual, activation and the store; with more, the partial sums out, and
//      the block that completes the group's last slice sums every slice in slice order,
//   5. flag the group ready (release).
//
// No deadlock: all blocks are resident (a cooperative launch), a unit waits only for units of
// the layer before, which are numbered lower, and each block's producer and consumers walk its
// units in the same order, so the lowest unfinished unit has its weights in its block's ring
// (nothing later is ahead of them) and its inputs done.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>

#include "gpu/bulk_copy_device.cuh"
#include "gpu/chain_internal.cuh"
#include "gpu/kernels_device.cuh"
#include "gpu/tensor_core_device.cuh"

namespace ltserve::gpu::chain {
namespace {

constexpr int kConsumerWarps = 4;
constexpr int kConsumers = kConsumerWarps * 32;
constexpr int kThreads = kConsumers + 32;  // and one producer warp
constexpr int kChunk = kRingChunk;         // K a stage
constexpr SliceCount kSliceCount = SliceCount::kNearest;
// Halves of padding a staged row (as in streamed_gemm.cu): a row's stride is then 64 bytes
// past a multiple of 128, so a quarter-warp's 16-byte reads (rows g, g + 1 at 4 offsets
// each) meet no bank conflict. The same for X's rows.
constexpr int kPad = 32;
constexpr int kStageStride = kChunk + kPad;  // halves
constexpr int kStageBytes = kGroup * kStageStride * 2;
constexpr int kBarrierBytes = 128;        // full and empty barriers of up to 4 stages
constexpr int kMaxStages = 4;
constexpr int kXSliceHalves = 16384;      // the rows × the largest K slice
constexpr int kStaticSmemBytes = 256;     // the kernel's own __shared__ ints, rounded up
constexpr int kSmSmemBytes = 228 * 1024;   // sm_90's shared memory an SM
static_assert(2 * kMaxStages * 8 <= kBarrierBytes, "barriers");
static_assert(kStageBytes % 128 == 0, "stages stay 128-byte aligned");

int RowTile(std::int64_t rows) { return rows <= 8 ? 8 : rows <= 16 ? 16 : 32; }
// X's slice holds only the real rows (the mma reads rows past `rows` as zeros), so fewer rows
// take a longer slice: at 1 row the whole K of 16,384, one unit a group and no partial sums.
// Whole stages, and within the area the rows' tile reserves (XSliceAreaHalves).
int MaxSliceK(std::int64_t rows) {
  return static_cast<int>(std::max<std::int64_t>(1, kXSliceHalves / rows / kChunk)) * kChunk;
}
constexpr int XSliceAreaHalves(int row_tile) { return kXSliceHalves + row_tile * kPad; }

// Shared memory: barriers, ring, X's slice (row_tile rows), the four warps' sums of a unit.
std::size_t SmemBytes(int row_tile, int stages) {
  return static_cast<std::size_t>(kBarrierBytes + stages * kStageBytes +
                                   XSliceAreaHalves(row_tile) * 2 +
                                   kConsumerWarps * (row_tile / 8) * 128 * 4);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned SmId() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}
__device__ __forceinline__ unsigned long long GlobalTimer() {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}
#endif

// Up to 16 rows, registers for three blocks an SM (136 a thread); 32 rows, for two.
template <typename T, int kNTiles>
__global__ void __launch_bounds__(kThreads, kNTiles <= 2 ? 3 : 2)
    ChainRingKernel(const ChainArgs args) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kTileFloats = kNTiles * 128;  // a unit's sums: kNTiles mma tiles × 32 lanes × 4
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int group_is_last;
  const int stages = args.ring_stages;
  auto* full = reinterpret_cast<std::uint64_t*>(smem);
  auto* empty = full + stages;
  auto* ring = reinterpret_cast<std::uint16_t*>(smem + kBarrierBytes);
  std::uint16_t* xs = ring + stages * kGroup * kStageStride;
  auto* part = reinterpret_cast<float*>(xs + XSliceAreaHalves(kNTiles * 8));
  const int blocks = static_cast<int>(gridDim.x);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int rows = args.rows;

  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      BarrierInit(&full[s], 1);
      BarrierInit(&empty[s], kConsumers);
    }
    FenceBarrierInit();
  }
  __syncthreads();

  if (warp == kConsumerWarps) {
    // The producer: stage j of the block's walk into ring slot j % stages once the consumers
    // have released that slot's previous stage. It reads only weights, which no kernel
    // writes, so it never waits for the kernel before.
    int j = 0;
    for (int unit = static_cast<int>(blockIdx.x); unit < args.total_units; unit += blocks) {
      const LayerArgs& L = args.layer[LayerOf(args, unit)];
      const int local = unit - L.first_unit;
      const int n0 = (local / L.slices) * kGroup;
      const int k0 = (local % L.slices) * L.slice_k;
      const int k1 = min(k0 + L.slice_k, L.k);
      const int valid_rows = min(kGroup, L.n - n0);
      const auto* w = static_cast<const std::uint16_t*>(L.weight) + static_cast<long long>(n0) * L.k;
      for (int kc = k0; kc < k1; kc += kChunk, ++j) {
        const int s = j % stages;
        if (j >= stages) BarrierWait(&empty[s], ((j / stages) - 1) & 1);
        const int len = min(kChunk, k1 - kc);
        if (lane == 0) BarrierArriveExpecting(&full[s], static_cast<unsigned>(valid_rows * len * 2));
        __syncwarp();
        if (lane < valid_rows) {
          BulkCopy(ring + (s * kGroup + lane) * kStageStride, w + static_cast<long long>(lane) * L.k + kc,
                   static_cast<unsigned>(len * 2), &full[s]);
        }
      }
    }
  } else {
    WaitForPriorKernel();  // the input, the scratch's flags
    AllowDependentLaunch();
    const int tid = static_cast<int>(threadIdx.x);
    const int g = lane / 4;
    const int t = lane % 4;
    const int x_stride = args.x_stride;
    int j = 0;
    for (int unit = static_cast<int>(blockIdx.x); unit < args.total_units; unit += blocks) {
      const int l = LayerOf(args, unit);
      const LayerArgs& L = args.layer[l];
      const int local = unit - L.first_unit;
      const int group = local / L.slices;
      const int slice = local % L.slices;
      const int n0 = group * kGroup;
      const int k0 = slice * L.slice_k;
      const int k1 = min(k0 + L.slice_k, L.k);

      unsigned long long* trace =
          args.trace != nullptr && tid == 0 ? args.trace + static_cast<long long>(unit) * kChainTraceFields
                                            : nullptr;
      if (trace != nullptr) {
        trace[0] = static_cast<unsigned long long>(l) << 32 | SmId();
        trace[1] = GlobalTimer();
        trace[2] = clock64();
      }
      // The bias of the outputs this thread finishes, asked for before the waits: it depends on
      // nothing, and loaded in the finish it was a DRAM round trip behind the multiply, on the
      // unit's critical path. A thread finishes one output column in either finish below:
      // column lane / 4 (+8 in warps 2 and 3) of its mma tiles' sums, or tid % 16 of the summed
      // slices (kConsumers is a multiple of 16).
      const int n_direct = n0 + lane / 4 + (warp >= 2 ? 8 : 0);
      const int n_summed = n0 + tid % kGroup;
      const float bias_direct = L.slices == 1 ? BiasAt<T>(L, n_direct) : 0.f;
      const float bias_summed = L.slices == 1 ? 0.f : BiasAt<T>(L, n_summed);
      WaitForInputs(args, l, k0, k1, tid, kConsumers);
      // Every poller has seen its flags, and every consumer is past the last unit's reads of
      // X's slice, its sums and group_is_last.
      ConsumersSync<kConsumers>();
      if (trace != nullptr) trace[3] = clock64();
      const auto* x = static_cast<const std::uint16_t*>(l == 0 ? args.input : args.layer[l - 1].output);
      const int vectors = (k1 - k0) / kVector;
      for (int e = tid; e < rows * vectors; e += kConsumers) {
        const int m = e / vectors;
        const int v = e % vectors;
        *reinterpret_cast<uint4*>(xs + m * x_stride + v * kVector) = __ldcg(
            reinterpret_cast<const uint4*>(x + static_cast<long long>(m) * L.k + k0 + v * kVector));
      }
      ConsumersSync<kConsumers>();
      if (trace != nullptr) trace[4] = clock64();

      float acc[kNTiles][4];
#pragma unroll
      for (int i = 0; i < kNTiles; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
      for (int kc = k0; kc < k1; kc += kChunk, ++j) {
        const int s = j % stages;
        const int len = min(kChunk, k1 - kc);
        const std::uint16_t* stage = ring + s * kGroup * kStageStride;
        const std::uint16_t* x_stage = xs + (kc - k0);
        BarrierWait(&full[s], (j / stages) & 1);
        if (trace != nullptr && kc == k0) trace[5] = clock64();
        for (int step = warp; step * kStep < len; step += kConsumerWarps) {
          const int k = step * kStep + t * kVector;
          // K is whole vectors: a vector is all in or all out.
          MmaStepFromShared<T, kNTiles>(acc, stage, kStageStride, x_stage, x_stride, k, k < len,
                                        rows, g);
        }
        // Each consumer thread releases its own reads of the stage (an arrival orders only the
        // arriving thread's accesses before the producer's next copy into it).
        BarrierArrive(&empty[s]);
      }

      // The warps' sums in warp order. Sum r of the unit is accumulator e of mma tile i of lane
      // (g, t): Yᵀ[output n0 + g (+8 for e >= 2)][row 8i + 2t (+1 for odd e)].
#pragma unroll
      for (int i = 0; i < kNTiles; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) part[warp * kTileFloats + (i * 4 + e) * 32 + lane] = acc[i][e];
      }
      ConsumersSync<kConsumers>();
      if (trace != nullptr) trace[6] = clock64();
      static_assert(kConsumers == 128, "sum r of thread tid: tile r / 128, column as n_direct");
      for (int r = tid; r < kTileFloats; r += kConsumers) {
        const int i = r / 128;
        const int m = i * 8 + 2 * (lane % 4) + (warp & 1);
        const int n = n_direct;
        if (m >= rows || n >= L.n) continue;
        float v = 0.f;
#pragma unroll
        for (int p = 0; p < kConsumerWarps; ++p) v += part[p * kTileFloats + r];
        if (L.slices == 1) {
          FinishBiasedOutput<T>(L, m, n, v + bias_direct);
        } else {
          __stcg(PartialAt(args, L, slice, m, n), v);
        }
      }
      // The count and the flag as CUTLASS's split-K semaphore does them: the consumers' barrier,
      // then thread 0's release (and acquire) for all of them. The finish is on the unit's
      // critical path, and a sequentially consistent __threadfence() in every thread cost
      // microseconds a unit there (bench/RESULTS.md, the ring's trace).
      bool publish = L.slices == 1;
      if (!publish) {
        ConsumersSync<kConsumers>();  // every partial sum of the slice is stored
        if (tid == 0) {
          group_is_last =
              AtomicAddAcqRel(args.sync + L.sync_offset + group, 1) == L.slices - 1;
        }
        ConsumersSync<kConsumers>();  // and with thread 0's acquire, the other slices' are seen
        publish = group_is_last != 0;
        if (publish) {
          for (int o = tid; o < rows * kGroup; o += kConsumers) {
            const int m = o / kGroup;
            const int n = n_summed;
            if (n < L.n) FinishBiasedOutput<T>(L, m, n, SumSlices(args, L, m, n) + bias_summed);
          }
        }
      }
      if (publish) {
        ConsumersSync<kConsumers>();  // every output of the group is stored
        if (tid == 0) StoreRelease(args.sync + L.sync_offset + L.groups + group, 1);
      }
      if (trace != nullptr) trace[7] = clock64();
    }
  }
  ResetWhenLastBlock(args);
#endif
}

// Once per device for kKernel: its dynamic shared memory limit raised to what the largest
// configuration uses (with its static shared memory within the block's maximum), and the SM's
// shared memory carveout at its maximum, so that the cooperative launch finds room for two or
// three blocks an SM. The first call on a device is at load (timing), never under capture.
template <auto kKernel>
cudaError_t OptInToSharedMemory() {
  static std::atomic<std::uint64_t> opted_in{0};  // one bit per device
  int device = 0;
  if (const cudaError_t error = cudaGetDevice(&device); error != cudaSuccess) return error;
  const std::uint64_t bit = std::uint64_t{1} << (device % 64);
  if ((opted_in.load() & bit) != 0) return cudaSuccess;
  if (const cudaError_t error = cudaFuncSetAttribute(
          kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
          static_cast<int>(SmemBytes(32, kMaxStages)));
      error != cudaSuccess) {
    return error;
  }
  if (const cudaError_t error = cudaFuncSetAttribute(
          kKernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
      error != cudaSuccess) {
    return error;
  }
  opted_in.fetch_or(bit);
  return cudaSuccess;
}

template <typename T, int kNTiles>
cudaError_t LaunchTyped(const ChainArgs& args, int blocks, std::size_t smem_bytes,
                        bool programmatic, cudaStream_t stream) {
  constexpr auto kKernel = ChainRingKernel<T, kNTiles>;
  if (const cudaError_t error = OptInToSharedMemory<kKernel>(); error != cudaSuccess) return error;
  return LaunchCooperative(kKernel, args, blocks, kThreads, smem_bytes, programmatic, stream);
}

}  // namespace

bool RingFits(std::int64_t rows, int blocks_per_sm, int stages) {
  if (rows < 1 || rows > kChainMaxRows || stages < 1 || stages > kMaxStages ||
      blocks_per_sm < 1 || blocks_per_sm > 3) {
    return false;
  }
  const int row_tile = RowTile(rows);
  // The kernel's registers are bounded for three blocks up to 16 rows, two at 32.
  if (blocks_per_sm == 3 && row_tile == 32) return false;
  // Blocks sharing an SM share its shared memory, less 1 KiB the system keeps for each.
  const std::size_t block_bytes = kSmSmemBytes / blocks_per_sm - 1024;
  return SmemBytes(row_tile, stages) + kStaticSmemBytes <= block_bytes;
}

std::size_t RingPartialBytes(const ChainLayer* layers, std::size_t count, int sm_count) {
  std::size_t bytes = 0;
  for (const int blocks : {2, 3}) {
    for (const int units : {1, 2}) {
      for (std::int64_t rows = 1; rows <= kChainMaxRows; ++rows) {
        bytes = std::max(bytes, PartialBytes(layers, count, std::int64_t{sm_count} * blocks * units,
                                             kChunk, MaxSliceK(rows) / kChunk, kSliceCount));
      }
    }
  }
  return bytes;
}

cudaError_t LaunchRing(const ChainGemmConfig& config, const void* input, const ChainLayer* layers,
                       std::size_t count, std::int64_t rows, ElemType type, void* scratch,
                       std::size_t scratch_bytes, int sm_count, bool programmatic,
                       cudaStream_t stream, std::uint64_t* trace) {
  const int row_tile = RowTile(rows);
  const int blocks = sm_count * config.blocks_per_sm;
  ChainArgs args;
  if (!BuildArgs(input, layers, count, rows, scratch, scratch_bytes,
                 std::int64_t{blocks} * config.units_per_worker, kChunk,
                 MaxSliceK(rows) / kChunk, kSliceCount, &args)) {
    return cudaErrorInvalidValue;
  }
  args.ring_stages = config.ring_stages;
  args.trace = reinterpret_cast<unsigned long long*>(trace);
  args.x_stride = MaxSliceK(rows) + kPad;
  const std::size_t smem_bytes = SmemBytes(row_tile, config.ring_stages);
  const auto launch = [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    if (row_tile == 8) return LaunchTyped<T, 1>(args, blocks, smem_bytes, programmatic, stream);
    if (row_tile == 16) return LaunchTyped<T, 2>(args, blocks, smem_bytes, programmatic, stream);
    return LaunchTyped<T, 4>(args, blocks, smem_bytes, programmatic, stream);
  };
  return type == ElemType::kBf16 ? launch(__nv_bfloat16{}) : launch(__half{});
}

}  // namespace ltserve::gpu::chain
