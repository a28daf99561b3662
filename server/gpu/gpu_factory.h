// The GPU executor's pieces below its public header (gpu_executor.h), for the executor itself
// and for GPU programs that need the model it serves (the benchmarks' timers): loading a tuned
// GpuModel, and a factory over one.
#pragma once

#include <memory>
#include <optional>

#include "common/status.h"
#include "executor/executor.h"
#include "gpu/gpu_model.h"
#include "model/model_spec.h"
#include "model/token_layout.h"
#include "plan/plan.h"

namespace ltserve::gpu {

// Lowers, uploads and tunes: the model every instance of one factory shares. UNAVAILABLE
// without a usable GPU.
Result<std::shared_ptr<const GpuModel>> LoadGpuModel(std::shared_ptr<const plan::Plan> plan,
                                                     const ModelSpec& spec,
                                                     const std::optional<TokenLayout>& tokens);

// A factory whose instances serve `model` (tuned).
std::unique_ptr<ExecutorFactory> CreateGpuFactory(std::shared_ptr<const GpuModel> model);

}  // namespace ltserve::gpu
