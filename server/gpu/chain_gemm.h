// A run of Linear layers in one persistent kernel (chain_gemm.cu), for few rows: an MLP at
// batch 1–32 is bound by streaming its weights once, yet as one kernel per layer it pays each
// kernel's launch, ramp-up and tail in series (bench/RESULTS.md: the MLP 1024-4096-4096-1024
// at 1.9–2.5× its memory floor with every layer near its best alone). Here every warp of one
// grid (one or two blocks an SM) works through every layer's units, and starts loading a
// layer's weights before the layer before it has finished: it waits only for the few columns
// of input its slice of K needs, flagged ready by whichever warp finished them, not for the
// whole layer or a new launch. In the ring schedule (chain_ring.cu) the weights are streamed
// instead by one producer warp a block, ahead of the consumers, across layer boundaries.
//
// Hopper (sm_90) and newer; 16-bit storage only (bf16/fp16 tensor cores); every in_features
// a multiple of 8 (16-byte loads). Whether it runs a model's layers at a bucket is chosen by
// timing at load (DeviceState::Tune) against the layers' own kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/kernels.h"
#include "plan/plan.h"

namespace ltserve::gpu {

constexpr std::int64_t kChainMaxRows = 32;   // rows (the bucket) up to which it is offered
constexpr std::size_t kChainMaxLayers = 8;   // layers one launch takes
constexpr std::int64_t kChainMinLayers = 2;  // one layer alone is the split-K kernel's job

// One layer: output = act(input·weightᵀ + bias + residual); layer i's input is layer i−1's
// output (the chain's input for layer 0). `bias` and `residual` may be null; a residual must
// not be written by the chain itself (it is read without waiting for any layer).
struct ChainLayer {
  const void* weight = nullptr;  // [out_features, in_features], row-major
  const void* bias = nullptr;    // [out_features]
  const void* residual = nullptr;  // [rows, out_features]
  void* output = nullptr;          // [rows, out_features]
  std::int64_t out_features = 0;
  std::int64_t in_features = 0;
  plan::Activation act = plan::Activation::kNone;
};

// How one launch divides the work, in one of two schedules. A unit is 16 outputs of one layer
// over one slice of its K; each layer is cut into about `units_per_worker` units per worker of
// the grid (K sliced where the layer has fewer output groups than that).
//
// Warp schedule (`ring_stages` 0): every warp is a worker and loads its own weights into
// registers, a 128-K chunk ahead. `prefetch`: a warp asks the L2 for its next unit's weights
// when it starts a unit, so DRAM keeps streaming while it waits for inputs or reduces partial
// sums. `blocks_per_sm`: 2 doubles the warps (up to 16 rows, where two blocks' registers fit).
//
// Ring schedule (`ring_stages` 2 or 4): every block is a worker. One producer warp a block
// streams its units' weights with bulk copies into a ring of `ring_stages` shared-memory stages
// of 16 rows × 512 K, running ahead across units and layers (weights depend on nothing), and
// four consumer warps wait only for full stages and for the input columns they read.
// `blocks_per_sm` 2 or 3 (one producer each); no `prefetch`: the producer asking the L2 for
// the block's next unit as well slowed the MLP at 1–16 rows, its requests competing with the
// layer the consumers wait on, also when gated on what had landed (bench/RESULTS.md, "the
// ring's L2 prefetch and early bias", "the ring's L2 prefetch, gated").
struct ChainGemmConfig {
  std::uint8_t units_per_worker = 1;  // 1, 2 or 4 (warp schedule); 1 or 2 (ring)
  bool prefetch = true;
  std::uint8_t blocks_per_sm = 1;  // 1 or 2 (warp schedule); 2 or 3 (ring)
  std::uint8_t ring_stages = 0;    // 0: the warp schedule

  bool ring() const { return ring_stages != 0; }
  // For the load log: "chain, 2 units a warp, 1 block an SM, L2 prefetch" or "chain ring,
  // 2 stages, 3 blocks an SM, 1 unit a block".
  std::string Describe() const;
  friend bool operator==(const ChainGemmConfig& a, const ChainGemmConfig& b) {
    return a.units_per_worker == b.units_per_worker && a.prefetch == b.prefetch &&
           a.blocks_per_sm == b.blocks_per_sm && a.ring_stages == b.ring_stages;
  }
};

// Rows up to which two blocks an SM fit (warp schedule).
constexpr std::int64_t kChainTwoBlocksMaxRows = 16;

// Whether the kernel can run these layers at `rows` on a device of compute capability
// `sm_major`: 16-bit storage, 1..kChainMaxRows rows, kChainMinLayers..kChainMaxLayers layers,
// each layer's in_features the previous one's out_features, a multiple of 8 and below 2^30.
bool ChainGemmSupports(int sm_major, ElemType type, std::int64_t rows,
                       const ChainLayer* layers, std::size_t layer_count);

// The configurations worth timing at `rows`: every one of both schedules that fits.
std::vector<ChainGemmConfig> ChainGemmCandidates(std::int64_t rows);

// Device memory one instance needs for launches on these layer shapes (partial sums of the K
// slices, one counter and one ready flag per group of 16 outputs), zeroed before the first
// launch and left zeroed by every launch that completes. `sm_count`: the device's.
std::size_t ChainGemmScratchBytes(const ChainLayer* layers, std::size_t layer_count, int sm_count);

// Benchmarks only: where the ring schedule's units spend their time. Per unit (numbered layer
// after layer, as the launch cuts them), kChainTraceFields values written by its consumers:
// [0] layer << 32 | the SM it ran on, [1] %globaltimer (ns) at its start, then the SM's clock
// (clock64) at [2] its start, [3] its inputs flagged ready, [4] X's slice staged, [5] its
// first stage of weights full, [6] its warps' sums added (every mma done), [7] its outputs or
// partial sums out (for a group's last slice: the group finished and flagged).
constexpr int kChainTraceFields = 8;
// Units enough for the trace of any launch over these layers (every slice one 512-K stage).
std::int64_t ChainTraceUnits(const ChainLayer* layers, std::size_t layer_count);

// Enqueues the layers on `stream` as one cooperative launch of `sm_count` × blocks_per_sm
// blocks. Returns cudaErrorInvalidValue for what ChainGemmSupports refuses, a configuration
// ChainGemmCandidates does not offer at `rows` or a scratch smaller than
// ChainGemmScratchBytes, else the launch's error. One launch at a time per scratch.
// `programmatic`: its first weight loads issued before waiting for the kernel before it.
// `ring_trace`: null, or (ring schedule) ChainTraceUnits × kChainTraceFields values.
cudaError_t LaunchChainGemm(const ChainGemmConfig& config, const void* input,
                            const ChainLayer* layers, std::size_t layer_count, std::int64_t rows,
                            ElemType type, void* scratch, std::size_t scratch_bytes,
                            int sm_count, bool programmatic, cudaStream_t stream,
                            std::uint64_t* ring_trace = nullptr);

}  // namespace ltserve::gpu
