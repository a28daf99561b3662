// The TorchScript fallback: runs a module's own forward through libtorch on the CPU, for
// models the plan cannot express. Internal to server/torch (it sees torch types).
#pragma once

#include <torch/script.h>

#include <memory>

#include "common/status.h"
#include "executor/executor.h"
#include "model/model_spec.h"

namespace ltserve {

// Instances share the module: TorchScript's interpreter runs one module from several threads,
// and the module is never mutated after load.
Result<std::unique_ptr<ExecutorFactory>> CreateTorchScriptFactory(torch::jit::Module module,
                                                                  const ModelSpec& spec);

}  // namespace ltserve
