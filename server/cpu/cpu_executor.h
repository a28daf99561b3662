// The CPU plan executor: runs a validated plan::Plan with libtorch's ATen kernels over plain
// host buffers, on all cores. No torch types here (see docs/architecture.md).
#pragma once

#include <memory>

#include "common/status.h"
#include "executor/executor.h"
#include "executor/model_spec.h"
#include "plan/plan.h"

namespace ltserve {

// Runs a validated plan on the CPU with all cores (libtorch ATen ops over the plan's plain
// buffers). The model must have one input and one output of type FP32, FP16 or BF16 (computed in
// fp32) whose dims hold the plan's input and output widths. Instances are sized for max_batch_size
// rows (1 when the model has no batch dimension). Row plans only: a plan with attention is
// UNIMPLEMENTED for now.
Result<std::unique_ptr<ExecutorFactory>> CreateCpuExecutorFactory(
    std::shared_ptr<const plan::Plan> plan, const ModelSpec& spec);

}  // namespace ltserve
