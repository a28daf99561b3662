// Loading a TorchScript model: the module itself (for the TorchScript fallback) and, when its
// forward is a chain of layers the plan knows, the plan the CPU and GPU executors run.
//
// No torch types here: this header is included next to spdlog and gRPC (see
// docs/architecture.md). LoadTorchScriptModel never throws.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "executor/executor.h"
#include "executor/model_spec.h"
#include "plan/plan.h"

namespace ltserve {

struct LoadedModel {
  // Null when the module could not be lowered.
  std::shared_ptr<const plan::Plan> plan;
  // The plan summary, or why it could not be lowered ("not lowered: aten::cumsum at ...").
  std::string lowering_report;
  // Always set: runs forward() through libtorch (path kTorchScript).
  std::unique_ptr<ExecutorFactory> torchscript;
};

// Loads spec.model_file and lowers it when possible. A transformer encoder (alone or in an
// nn.Sequential with per-token Linear/LayerNorm/activation blocks) lowers to a token plan
// (InputKind::kTokens) when its input and output dims are [-1, d] and [-1, d_out]: requests are
// [batch, seq, d] whatever the module's batch_first. A second, BOOL input (a key-padding mask)
// keeps the model on the TorchScript path for now. spec.parameters["execution_path"]:
// "auto" (default: lower when possible), "plan" (failing to lower is a load error) or
// "torchscript" (no lowering). Errors: NOT_FOUND for a missing file, INVALID_ARGUMENT for a
// file that is not TorchScript, a bad execution_path, or a plan whose input/output widths
// disagree with the configured dims; FAILED_PRECONDITION for execution_path=plan on a module
// that cannot be lowered.
Result<LoadedModel> LoadTorchScriptModel(const ModelSpec& spec);

}  // namespace ltserve
