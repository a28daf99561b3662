// The split-K GEMM for few rows (skinny_gemm.cu): Y[M,N] = act(X[M,K]·W[N,K]ᵀ + bias + residual)
// for M up to kSkinnyGemmMaxRows, where a Linear is bound by streaming its weights once and
// by latency, not by arithmetic. cuBLASLt's kernels at these shapes reach a fraction of the
// memory bandwidth (bench/RESULTS.md, "Where a BERT-base pass spends its time") and add a
// separate split-K reduction kernel; this one spreads W over every SM, reduces the K split
// inside a thread-block cluster (distributed shared memory, no workspace, no second kernel)
// and applies bias, residual and activation before the single store.
//
// Hopper (sm_90) and newer only (clusters); 16-bit storage only (bf16/fp16 tensor cores);
// in_features a multiple of 8 (16-byte loads). Which configuration runs a given GEMM is
// chosen by timing at load (DeviceState::Tune).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/kernels.h"
#include "plan/plan.h"

namespace ltserve::gpu {

// Rows (the batch bucket; tokens for an encoder) up to which the kernel is offered.
constexpr std::int64_t kSkinnyGemmMaxRows = 128;

// One compiled shape of the kernel and the cluster it is launched with. A block is 4 warps;
// each warp owns `row_tiles` × 16 rows of W (outputs), all warps of a block share one K chunk
// of 32 × `unroll` at a time, and the `cluster` blocks of a cluster take every cluster-th chunk
// (the split-K) before reducing their partial sums through distributed shared memory. A
// cluster computes `m_tile` rows of X (grid z covers more).
struct SkinnyGemmConfig {
  std::uint8_t m_tile = 8;     // 8, 16, 32 or 64
  std::uint8_t row_tiles = 1;  // 1 or 2
  std::uint8_t unroll = 4;     // 4 or 8 (8 only with row_tiles 1 and m_tile up to 32)
  std::uint8_t cluster = 1;    // 1, 2, 4, 8 or 16 blocks splitting K (16: a non-portable size)

  // For the load log, e.g. "split-K 4 x 64 rows x 128 K, 16-row X tiles".
  std::string Describe() const;
  // Written out: the .cu files that include this header compile as C++17.
  friend bool operator==(const SkinnyGemmConfig& a, const SkinnyGemmConfig& b) {
    return a.m_tile == b.m_tile && a.row_tiles == b.row_tiles && a.unroll == b.unroll &&
           a.cluster == b.cluster;
  }
};

// Whether `config` is a shape the kernel is compiled for (the field comments above), with
// the LayerNorm tail or without: what a configuration read back from a tuning cache must be.
bool SkinnyGemmCompiled(const SkinnyGemmConfig& config, bool layer_norm);

// Whether the kernel can run a Linear of this type and shape on a device of compute
// capability `sm_major`.
bool SkinnyGemmSupports(int sm_major, ElemType type, std::int64_t rows, std::int64_t in_features);

// The configurations worth timing for one shape: the smallest m_tile holding the rows (64 for
// more), every compiled (row_tiles, unroll) and every cluster size up to the number of K chunks.
std::vector<SkinnyGemmConfig> SkinnyGemmCandidates(std::int64_t rows, std::int64_t out_features,
                                                   std::int64_t in_features);

// Enqueues y = act(x·wᵀ + bias + residual) on `stream`; `bias` and `residual` may be null.
// Returns cudaErrorInvalidValue for a configuration or shape the kernel does not take, else
// the launch's error. `programmatic`: launched to overlap the kernel before it, its first
// weight loads issued before waiting for that kernel (programmatic dependent launch).
cudaError_t LaunchSkinnyGemm(const SkinnyGemmConfig& config, const void* x, const void* w,
                             const void* bias, const void* residual, void* y, std::int64_t rows,
                             std::int64_t out_features, std::int64_t in_features,
                             plan::Activation act, ElemType type, bool programmatic,
                             cudaStream_t stream);

// The LayerNorm tail (LaunchSkinnyGemmLayerNorm): rows up to this wide are normalised by one
// warp each, the row held in registers.
constexpr std::int64_t kSkinnyLayerNormMaxWidth = 1024;

// The configurations worth timing for the GEMM with the LayerNorm tail: those of
// SkinnyGemmCandidates in the shapes the tail is compiled for (unroll 4: K chunks of 128), at
// the X tile SkinnyGemmCandidates takes and every smaller one (more row tiles, each
// normalised by its own last cluster); none past kSkinnyGemmMaxRows rows or
// kSkinnyLayerNormMaxWidth outputs.
std::vector<SkinnyGemmConfig> SkinnyGemmLayerNormCandidates(std::int64_t rows,
                                                            std::int64_t out_features,
                                                            std::int64_t in_features);

// Clusters that share rows of X (a "row tile": `m_tile` rows of Y across every output) count
// their finished stores on one counter each; this many counters a launch needs.
std::int64_t SkinnyGemmRowTiles(const SkinnyGemmConfig& config, std::int64_t rows);

// Enqueues y = LayerNorm(x·wᵀ + bias + residual + norm_residual)·gamma + beta over each row, in
// one launch: the GEMM as LaunchSkinnyGemm computes it (x·wᵀ + bias + residual stored in y,
// rounded to 16 bits, as the GEMM step would store it), then the last cluster to finish a row
// tile, known by counting on `row_tile_counters[tile]`, reads those rows back, adds
// `norm_residual` in fp32 and normalises them in place with the executor's LayerNorm
// statistics (fp32 mean, then mean squared deviation): what the LayerNorm kernel computes
// from the GEMM's stored output and its own residual. At most one of the residuals is set.
// That replaces the LayerNorm launch, and the split-K GEMM keeps every SM streaming weights,
// which the GEMM + LayerNorm cluster kernel (norm_gemm.h) cannot at one 16-block cluster a
// row tile. `row_tile_counters`: `counter_count` ints, zero before the launch and zero again
// after it; launches that share them must not overlap. `gamma`, `beta` (fp32) may be null.
// Returns cudaErrorInvalidValue for a shape, configuration or counter buffer it does not take
// (out_features over kSkinnyLayerNormMaxWidth, a configuration SkinnyGemmLayerNormCandidates
// never offers, more row tiles than counters, both residuals), else the launch's error.
cudaError_t LaunchSkinnyGemmLayerNorm(const SkinnyGemmConfig& config, const void* x,
                                      const void* w, const void* bias, const void* residual,
                                      const void* norm_residual, const float* gamma,
                                      const float* beta, float eps, void* y,
                                      std::int64_t rows, std::int64_t out_features,
                                      std::int64_t in_features, ElemType type,
                                      int* row_tile_counters, std::int64_t counter_count,
                                      bool programmatic, cudaStream_t stream);

}  // namespace ltserve::gpu
