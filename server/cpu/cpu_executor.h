// The CPU plan executor: runs a validated plan::Plan with libtorch's ATen kernels over plain
// host buffers, on all cores. No torch types here (see docs/architecture.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "common/status.h"
#include "executor/executor.h"
#include "model/model_spec.h"
#include "model/token_layout.h"
#include "plan/plan.h"

namespace ltserve {

// Runs a validated plan on the CPU with all cores (libtorch ATen ops over the plan's plain
// buffers). The model must have one input and one output of type FP32, FP16 or BF16 (computed in
// fp32) whose dims hold the plan's input and output widths. Instances are sized for max_batch_size
// rows (1 when the model has no batch dimension).
//
// Token plans (encoders, InputKind::kTokens) come with their TokenLayout: the executor's input
// is the layout's token input, dims [seq, width] per token; Execute takes
// BatchShape::sequence_lengths, packed tokens in and [total_tokens, width_out] out, and runs
// attention per sequence (ATen's scaled_dot_product_attention, fp32). Instances hold the
// layout's max_batch_tokens tokens.
Result<std::unique_ptr<ExecutorFactory>> CreateCpuExecutorFactory(
    std::shared_ptr<const plan::Plan> plan, const ModelSpec& spec,
    const std::optional<TokenLayout>& tokens);

}  // namespace ltserve
