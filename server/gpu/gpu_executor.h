// The cuBLASLt GPU executor: runs a plan's dense layers as cuBLASLt matmuls with the bias and
// activation fused into the epilogue, replayed from CUDA graphs per batch bucket.
//
// This header carries no CUDA types, so any component may include it. Without CUDA at build
// time both functions report UNAVAILABLE "built without CUDA".
//
// Model parameters read from ModelSpec::parameters (all optional):
//   precision                 bf16 (default) | fp16 | fp32 | tf32
//   gelu_epilogue             auto (default) | tanh | exact   (see docs/gpu_executor.md)
//   cublaslt_workspace_bytes  per-instance workspace, default 33554432 (32 MiB)
//   algo_candidates           heuristic candidates timed per GEMM, default 8
//   algo_cache_file           text file of chosen algorithms; read at load, written after tuning
//   cuda_graphs               true (default) | false
//   small_batch_kernel        auto (default) | always | off: fused matrix-vector kernel for
//                             buckets of <= 8 rows where it times faster than cuBLASLt
//   fuse_epilogues            true (default) | false: matmul + separate kernel for every layer
//   max_tokens_per_batch      token models: rows an instance is sized for
//   gpu_device                CUDA device ordinal, default 0
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "executor/executor.h"
#include "executor/model_spec.h"
#include "plan/plan.h"

namespace ltserve {

// False (with the reason) when built without CUDA, or no usable device is present.
bool GpuAvailable(std::string* reason);

// Uploads the plan's weights once (converted to the model's precision), chooses the GEMM
// algorithms, and returns a factory whose instances share those weights.
Result<std::unique_ptr<ExecutorFactory>> CreateGpuExecutorFactory(
    std::shared_ptr<const plan::Plan> plan, const ModelSpec& spec);

// For benchmarks, not request paths: mean device time in microseconds of `iterations`
// back-to-back forward passes of a GPU instance at `rows` rows (graph replay when graphs are
// on), inputs already on the device, timed with CUDA events on the instance's stream.
Result<double> GpuTimeForward(ExecutorInstance& instance, std::int64_t rows, int iterations);

// The same for a token model (an encoder) over a batch of sequences of `sequence_lengths`
// tokens, packed: their sum is the rows timed.
Result<double> GpuTimeTokenForward(ExecutorInstance& instance,
                                   std::span<const std::int32_t> sequence_lengths,
                                   int iterations);

// Where the time of one eager forward pass goes, step by step (plan order), for benchmarks:
// `kind` is "gemm", "attention", "layernorm" or "pointwise"; `us` the mean device time over
// `iterations` passes, from CUDA events recorded between the steps (without graph replay, so
// each step also carries its launch gap).
struct GpuStepTime {
  std::string kind;
  double us = 0;
};
Result<std::vector<GpuStepTime>> GpuProfileTokenForward(
    ExecutorInstance& instance, std::span<const std::int32_t> sequence_lengths, int iterations);

}  // namespace ltserve
