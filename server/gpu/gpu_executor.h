// The cuBLASLt GPU executor: runs a plan's dense layers as cuBLASLt matmuls with the bias and
// activation fused into the epilogue, replayed from CUDA graphs per batch bucket.
//
// This header carries no CUDA types, so any component may include it. Without CUDA at build
// time both functions report UNAVAILABLE "built without CUDA".
//
// The model's options (precision, GELU, workspace, algorithm cache, graphs, small-batch
// kernel, device) come typed in ModelSpec::options (model/model_options.h); a token plan's
// budget and inputs in its TokenLayout.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "executor/executor.h"
#include "model/model_spec.h"
#include "model/token_layout.h"
#include "plan/plan.h"

namespace ltserve {

// False (with the reason) when built without CUDA, or no usable device is present.
bool GpuAvailable(std::string* reason);

// Uploads the plan's weights once (converted to the model's precision), chooses the GEMM
// algorithms, and returns a factory whose instances share those weights. `tokens`: the layout
// of a token plan (its executor inputs and token budget); required for one, ignored otherwise.
Result<std::unique_ptr<ExecutorFactory>> CreateGpuExecutorFactory(
    std::shared_ptr<const plan::Plan> plan, const ModelSpec& spec,
    const std::optional<TokenLayout>& tokens);

}  // namespace ltserve
