// A Linear and the LayerNorm after it in one kernel (norm_gemm.cu), for few rows:
//   Y = LayerNorm(X·Wᵀ + bias + residual) · gamma + beta
// the post-LN step of every BERT-family layer (attention output projection, FFN output). At
// one sequence of 128 tokens each of those is a cuBLASLt GEMM (sometimes with a split-K
// reduction kernel after it) and a LayerNorm kernel, each bound by latency, not bytes
// (bench/RESULTS.md, "Where a BERT-base pass spends its time"). Here one thread-block cluster
// owns whole rows of Y: its blocks split the outputs, each block's warps split K, and the row
// statistics are summed across the cluster through distributed shared memory, so the
// pre-norm sum is never written to memory and one launch replaces two or three.
//
// The other schedule for the same pair, up to kSkinnyGemmMaxRows rows: the split-K GEMM with a
// LayerNorm tail (skinny_gemm.h), where every SM streams weights and the last cluster to finish
// a row tile normalises it; a configuration with `split_k` set runs that one.
//
// Hopper (sm_90) and newer only (clusters); 16-bit storage only; in_features a multiple of 8;
// out_features up to kNormGemmMaxOutFeatures (a cluster of at most 16 blocks must cover a
// row). Whether it runs a GEMM + LayerNorm pair at a bucket, and which schedule, is chosen by
// timing at load (DeviceState::Tune).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpu/kernels.h"
#include "gpu/skinny_gemm.h"

namespace ltserve::gpu {

constexpr std::int64_t kNormGemmMaxRows = 512;          // rows (tokens) up to which it is offered
constexpr std::int64_t kNormGemmMaxOutFeatures = 1024;  // 16 blocks × 64 outputs
// Counters the split-K schedule needs at most: kSkinnyGemmMaxRows rows in 8-row tiles.
constexpr std::int64_t kNormGemmMaxRowTiles = 16;

// One compiled shape. A block (8 warps) owns 16 × `col_tiles` outputs of `m_tile` rows; it
// streams its W rows and X rows through a ring of `stages` shared-memory stages of 128 K
// columns each (all but one in flight), its warps take the 32-wide K steps in turn, and they
// sum their partials in shared memory. The cluster is as many blocks as the outputs need:
// ceil(out_features / (16 × col_tiles)), at most 16. With `split_k` set the three numbers
// are unused and the split-K schedule runs with that configuration.
struct NormGemmConfig {
  std::uint8_t m_tile = 16;    // 8 or 16
  std::uint8_t col_tiles = 3;  // 1 to 4
  std::uint8_t stages = 4;     // 4 or 8
  std::optional<SkinnyGemmConfig> split_k;

  NormGemmConfig() = default;
  // The cluster kernel's configuration, e.g. {16, 3, 4}.
  NormGemmConfig(std::uint8_t m, std::uint8_t cols, std::uint8_t s)
      : m_tile(m), col_tiles(cols), stages(s) {}
  static NormGemmConfig SplitK(const SkinnyGemmConfig& config) {
    NormGemmConfig c;
    c.split_k = config;
    return c;
  }
  // For the load log, e.g. "GEMM + LayerNorm, 16 blocks x 48 outputs, 16-row tiles, 4 stages of
  // 128 K" or "split-K GEMM with a LayerNorm tail, split-K 4 x 64 rows x 128 K, 8-row X tiles".
  std::string Describe(std::int64_t out_features) const;
  friend bool operator==(const NormGemmConfig& a, const NormGemmConfig& b) {
    if (a.split_k.has_value() || b.split_k.has_value()) return a.split_k == b.split_k;
    return a.m_tile == b.m_tile && a.col_tiles == b.col_tiles && a.stages == b.stages;
  }
};

// Blocks in one cluster for `config` at `out_features` (the split-K schedule's: its cluster).
int NormGemmClusterSize(const NormGemmConfig& config, std::int64_t out_features);

// Whether the kernel can run this shape on a device of compute capability `sm_major`.
bool NormGemmSupports(int sm_major, ElemType type, std::int64_t rows, std::int64_t out_features,
                      std::int64_t in_features);

// The configurations worth timing for one shape (empty where it does not apply): the cluster
// kernel's, then the split-K schedule's where it takes the shape.
std::vector<NormGemmConfig> NormGemmCandidates(std::int64_t rows, std::int64_t out_features,
                                               std::int64_t in_features);

// Enqueues y = LayerNorm(x·wᵀ + bias + residual + norm_residual)·gamma + beta over each row on
// `stream`, with the two-pass (mean, then centred variance) statistics of the executor's
// LayerNorm kernel. `residual` is the GEMM step's (fused into its epilogue), `norm_residual`
// the LayerNorm step's; at most one is set. They differ only in the split-K schedule, which
// stores the GEMM's sum rounded to 16 bits before normalising it: there, as in the two
// separate kernels, `residual` is rounded into that sum and `norm_residual` added in fp32.
// `bias`, the residuals, `gamma` and `beta` may be null (gamma and beta are fp32, as the plan's
// LayerNorm keeps them). `row_tile_counters`: kNormGemmMaxRowTiles ints, zero, that the
// split-K schedule counts on and leaves zero (launches sharing them must not overlap); may be
// null for the cluster kernel's configurations. Returns cudaErrorInvalidValue for what
// NormGemmSupports refuses, a configuration whose cluster would exceed 16 blocks, a split-K
// one without counters or beyond its shapes, or both residuals, else the launch's error.
// `programmatic`: its first weight loads issued before waiting for the kernel before it.
cudaError_t LaunchNormGemm(const NormGemmConfig& config, const void* x, const void* w,
                           const void* bias, const void* residual, const void* norm_residual,
                           const float* gamma, const float* beta, float eps, void* y,
                           std::int64_t rows,
                           std::int64_t out_features, std::int64_t in_features, ElemType type,
                           int* row_tile_counters, bool programmatic, cudaStream_t stream);

}  // namespace ltserve::gpu
