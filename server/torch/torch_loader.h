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
  // With a plan: the config input (index) that is the key-padding mask, BOOL [batch, seq] with
  // true = padding, or -1. The plan never sees it: the batcher drops the padded tokens of the
  // other input before execution and puts zeros at their positions in the outputs, so an
  // executor is built for the config without this input.
  int key_padding_mask_input = -1;
};

// Loads spec.model_file and lowers it when possible. A transformer encoder (alone or in an
// nn.Sequential with per-token Linear/LayerNorm/activation blocks) lowers to a token plan
// (InputKind::kTokens) when its input and output dims are [-1, d] and [-1, d_out]: requests are
// [batch, seq, d] whatever the module's batch_first. A scripted wrapper forward(x, mask) that
// hands its second input to the encoder as src_key_padding_mask lowers too (its mask input is
// key_padding_mask_input; the config must declare it TYPE_BOOL with dims [-1], else
// INVALID_ARGUMENT); a traced one serves through TorchScript. spec.parameters["execution_path"]:
// "auto" (default: lower when possible), "plan" (failing to lower is a load error) or
// "torchscript" (no lowering). Errors: NOT_FOUND for a missing file, INVALID_ARGUMENT for a
// file that is not TorchScript, a bad execution_path, or a plan whose input/output widths
// disagree with the configured dims; FAILED_PRECONDITION for execution_path=plan on a module
// that cannot be lowered.
Result<LoadedModel> LoadTorchScriptModel(const ModelSpec& spec);

}  // namespace ltserve
