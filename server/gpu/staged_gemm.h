// The staged-weights GEMM for up to 128 rows (staged_gemm.cu): Y[M,N] = act(X[M,K]·W[N,K]ᵀ +
// bias + residual) where each block has the copy engine bring its whole slice of W into shared
// memory before waiting for the kernel ahead (the weights depend on nothing), so that under a
// programmatic launch only X (from the L2), the multiply and the cluster's reduction are left
// once that kernel ends. Tiles are staged by tensor-map copies and multiplied by warpgroup MMAs
// (wgmma), Hopper's own instructions, so it is built for sm_90a and runs on compute capability
// 9.x only; 16-bit storage only; in_features a multiple of 8.
//
// The tuner offers it through the model option staged_gemm_kernel (on `auto` up to
// kStagedGemmAutoMaxRows). On an H100 it takes 1.13-1.49x cuBLASLt's time alone at 128 rows and
// 0.96-1.26x at 1-32 rows (its first form, cp.async and mma.sync, 1.37-1.77x at 128 rows, bound
// by its instruction count; bench/RESULTS.md, 2026-12-07, tables from bench/skinny_gemm_table.cc).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/kernels.h"
#include "plan/plan.h"

namespace ltserve::gpu {

constexpr std::int64_t kStagedGemmMaxRows = 128;
// Rows up to which `staged_gemm_kernel auto` lets the kernel compete with cuBLASLt. On an H100,
// BERT-base passes of four sequences of 8 tokens (32 rows) ran 7.5-12 % faster with it and of
// one sequence of 8 up to 5 %, while passes of 128 rows ran 4-7 % slower, though it won some
// per-GEMM timings there (bench/RESULTS.md, 2026-12-07).
constexpr std::int64_t kStagedGemmAutoMaxRows = 32;
// Outputs (rows of W) a block computes.
constexpr std::int64_t kStagedGemmBlockOutputs = 64;
// A block's shared memory at most (its W and X slices, or its partial sums): one block an SM.
constexpr std::int64_t kStagedGemmMaxSharedBytes = 200 * 1024;

// One compiled X tile and the cluster it is launched with: the `cluster` blocks of a cluster
// share 64 outputs and `m_tile` rows, and each takes one contiguous slice of K (the split-K),
// then they reduce their partial sums through distributed shared memory.
struct StagedGemmConfig {
  std::uint8_t m_tile = 128;  // 64 or 128
  std::uint8_t cluster = 4;   // 1 to 8 blocks splitting K

  // For logs and tables, e.g. "staged 4 x 64 rows, 128-row X tiles".
  std::string Describe() const;
  friend bool operator==(const StagedGemmConfig& a, const StagedGemmConfig& b) {
    return a.m_tile == b.m_tile && a.cluster == b.cluster;
  }
};

// Whether `config` is one the kernel is compiled for (an X tile of 64 or 128 rows, 1 to 8
// blocks a cluster).
bool StagedGemmCompiled(const StagedGemmConfig& config);

// Whether the kernel can run a Linear of this type and shape on a device of compute
// capability `sm_major` (with some configuration).
bool StagedGemmSupports(int sm_major, ElemType type, std::int64_t rows, std::int64_t in_features);

// The K a block of `config` stages: in_features over the cluster, rounded up to whole 64-element
// boxes.
std::int64_t StagedGemmSlice(const StagedGemmConfig& config, std::int64_t in_features);

// The dynamic shared memory a launch of `config` takes for `in_features`.
std::int64_t StagedGemmSharedBytes(const StagedGemmConfig& config, std::int64_t in_features);

// The configurations worth timing for one shape: the X tile holding the rows (64 up to 64 rows,
// else 128) at every cluster size whose slices fit kStagedGemmMaxSharedBytes and leave no
// block without K. Empty where the kernel does not take the shape.
std::vector<StagedGemmConfig> StagedGemmCandidates(std::int64_t rows, std::int64_t out_features,
                                                   std::int64_t in_features);

// Enqueues y = act(x·wᵀ + bias + residual) on `stream`; `bias` and `residual` may be null.
// Returns cudaErrorInvalidValue for a configuration or shape the kernel does not take (rows
// over kStagedGemmMaxRows, slices past kStagedGemmMaxSharedBytes), else the launch's error. `programmatic`: W is staged before waiting for the kernel ahead.
cudaError_t LaunchStagedGemm(const StagedGemmConfig& config, const void* x, const void* w,
                             const void* bias, const void* residual, void* y, std::int64_t rows,
                             std::int64_t out_features, std::int64_t in_features,
                             plan::Activation act, ElemType type, bool programmatic,
                             cudaStream_t stream);

}  // namespace ltserve::gpu
