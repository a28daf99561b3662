// The CPU plan executor: runs a validated plan::Plan with libtorch's ATen kernels over plain
// host buffers, on all cores. No torch types here (see docs/architecture.md).
#pragma once

#include <cstdint>
#include <memory>

#include "common/status.h"
#include "executor/executor.h"
#include "executor/model_spec.h"
#include "plan/plan.h"

namespace ltserve {

// Runs a validated plan on the CPU with all cores (libtorch ATen ops over the plan's plain
// buffers). The model must have one input and one output of type FP32, FP16 or BF16 (computed in
// fp32) whose dims hold the plan's input and output widths. Instances are sized for max_batch_size
// rows (1 when the model has no batch dimension).
//
// Token plans (encoders, InputKind::kTokens): dims are [seq, width] per token; Execute takes
// BatchShape::sequence_lengths, packed tokens in and [total_tokens, width_out] out, and runs
// attention per sequence (ATen's scaled_dot_product_attention, fp32). Instances hold
// MaxBatchTokens(spec) tokens.
Result<std::unique_ptr<ExecutorFactory>> CreateCpuExecutorFactory(
    std::shared_ptr<const plan::Plan> plan, const ModelSpec& spec);

// The longest sequence assumed when neither the config's seq dim nor max_sequence_length
// gives one: BERT's limit, which covers most encoders exported from PyTorch.
constexpr std::int64_t kDefaultMaxSequenceLength = 512;

// The longest sequence one request of a token model may send (the scheduler refuses longer
// ones): parameter max_sequence_length, else the config's seq dim when fixed, else
// kDefaultMaxSequenceLength. INVALID_ARGUMENT for a malformed parameter.
Result<std::int64_t> MaxSequenceLength(const ModelSpec& spec);

// Tokens per executed batch of a token model, for every executor and the scheduler: parameter
// max_tokens_per_batch, else max_batch_size × MaxSequenceLength(spec). INVALID_ARGUMENT for a
// malformed parameter.
Result<std::int64_t> MaxBatchTokens(const ModelSpec& spec);

}  // namespace ltserve
