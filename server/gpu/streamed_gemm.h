// The streamed GEMM for few rows (streamed_gemm.cu): Y[M,N] = act(X[M,K]·W[N,K]ᵀ + bias +
// residual) for M up to kStreamedGemmMaxRows, where a Linear is bound by streaming its
// weights once. The split-K kernel (skinny_gemm.h) keeps its weights in flight in registers,
// a few chunks a warp, each waited for in the warp's own chain of loads and mmas; here one
// warp a block only issues bulk copies (the Hopper copy engine, cp.async.bulk) of weight row
// slices into a ring of shared-memory stages, and four warps consume them. One to three
// blocks an SM run over their share of 16-row tiles, and since the weights are not the kernel
// before's output, under a programmatic launch the rings fill while that kernel drains.
//
// Hopper (sm_90) and newer only (bulk copies, clusters); 16-bit storage only; in_features a
// multiple of 8. Not offered to the executor's load-time choices: measured on the H200 it is
// no faster than the split-K kernel in a whole pass (bench/RESULTS.md, "The streamed GEMM");
// the benchmark (bench/skinny_gemm_table.cc) and its tests run it directly.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/kernels.h"
#include "plan/plan.h"

namespace ltserve::gpu {

// Rows (the batch bucket; tokens for an encoder) up to which the kernel is offered.
constexpr std::int64_t kStreamedGemmMaxRows = 32;

// One configuration: X's rows taken as `m_tile` (8, 16 or 32: one to four mma tiles; the rows
// there are held in shared memory), K split over a cluster of `split` blocks (1, 2, 4 or 8; each holds its K slice of
// X and streams that slice of its weight rows; the partial sums are reduced through
// distributed shared memory), `stages` 16 KiB stages in the ring (2, 4 or 8), and
// `blocks_per_sm` blocks sharing an SM (1 to 3: one producer warp each).
struct StreamedGemmConfig {
  std::uint8_t m_tile = 8;
  std::uint8_t split = 1;
  std::uint8_t stages = 4;
  std::uint8_t blocks_per_sm = 1;

  // For the load log, e.g. "streamed, K split 2, 4 stages, 1 block an SM, 8-row X tiles".
  std::string Describe() const;
  // Written out: the .cu files that include this header compile as C++17.
  friend bool operator==(const StreamedGemmConfig& a, const StreamedGemmConfig& b) {
    return a.m_tile == b.m_tile && a.split == b.split && a.stages == b.stages &&
           a.blocks_per_sm == b.blocks_per_sm;
  }
};

// Whether the kernel can run a Linear of this type and shape on a device of compute
// capability `sm_major`.
bool StreamedGemmSupports(int sm_major, ElemType type, std::int64_t rows,
                          std::int64_t in_features);

// Whether `config` can run a GEMM of this shape on a GPU of `sm_count` SMs: its X slice and
// shared memory fit, every block of a cluster has some K, and the rows fit its X tile.
bool StreamedGemmRuns(const StreamedGemmConfig& config, std::int64_t rows,
                      std::int64_t out_features, std::int64_t in_features, int sm_count);

// The configurations worth timing for one shape on a GPU of `sm_count` SMs: the smallest
// m_tile holding the rows, every split whose X slice fits in shared memory and that leaves
// each block some K, each as one block an SM with 4 or 8 stages and as two or three with 2 or
// 4, where they fit.
std::vector<StreamedGemmConfig> StreamedGemmCandidates(std::int64_t rows,
                                                       std::int64_t out_features,
                                                       std::int64_t in_features, int sm_count);

// How W lies in memory: as a Linear's weight [N, K] row-major, or packed so that each stage of
// the ring is one contiguous copy. Packed: for each 16-row tile t and 512-K chunk c (in that
// order), 16 rows of kStreamedGemmPackedRow elements, row r holding W[16t + r][512c ...] and
// zeros past W's edges (StreamedGemmPackedElements gives the whole size).
enum class StreamedWeights : std::uint8_t { kRowMajor, kPacked };
constexpr std::int64_t kStreamedGemmPackedRow = 512 + 32;
std::int64_t StreamedGemmPackedElements(std::int64_t out_features, std::int64_t in_features);
// W [N, K] (16-bit values, row-major) in the packed layout.
std::vector<std::uint16_t> PackStreamedGemmWeights(const std::uint16_t* w,
                                                   std::int64_t out_features,
                                                   std::int64_t in_features);
// Whether `config` can read packed weights: every block's K slice starts on a 512-K chunk.
bool StreamedGemmTakesPacked(const StreamedGemmConfig& config, std::int64_t in_features);

// Enqueues y = act(x·wᵀ + bias + residual) on `stream`; `bias` and `residual` may be null.
// Returns cudaErrorInvalidValue for a configuration or shape the kernel does not take, else
// the launch's error. `programmatic`: launched to overlap the kernel before it (programmatic
// dependent launch), its ring filled before waiting for that kernel.
cudaError_t LaunchStreamedGemm(const StreamedGemmConfig& config, const void* x, const void* w,
                               const void* bias, const void* residual, void* y,
                               std::int64_t rows, std::int64_t out_features,
                               std::int64_t in_features, plan::Activation act, ElemType type,
                               bool programmatic, cudaStream_t stream,
                               StreamedWeights layout = StreamedWeights::kRowMajor);

}  // namespace ltserve::gpu
