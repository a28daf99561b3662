// Loading a TorchScript model: the module itself (for the TorchScript fallback) and, when its
// forward is a chain of layers the plan knows, the plan the CPU and GPU executors run.
//
// No torch types here: this header is included next to spdlog and gRPC (see
// docs/architecture.md). LoadTorchScriptModel never throws.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "executor/executor.h"
#include "model/model_spec.h"
#include "model/token_layout.h"
#include "plan/plan.h"

namespace ltserve {

struct LoadedModel {
  // Null when the module could not be lowered.
  std::shared_ptr<const plan::Plan> plan;
  // The plan summary, or why it could not be lowered ("not lowered: aten::cumsum at ...").
  std::string lowering_report;
  // Always set: runs forward() through libtorch (path kTorchScript).
  std::unique_ptr<ExecutorFactory> torchscript;
  // With a token plan (an encoder): how its requests are laid out (which inputs carry tokens,
  // which is a key-padding mask, the sequence limit and token budget), for the scheduler and the
  // executor. Unset for a row plan and for the TorchScript fallback, which batches rows.
  std::optional<TokenLayout> token_layout;
};

// Loads spec.model_file and lowers it when possible. A transformer encoder (alone or in an
// nn.Sequential with per-token Linear/LayerNorm/activation blocks) lowers to a token plan
// (InputKind::kTokens) when its input and output dims are [-1, d] and [-1, d_out]: requests are
// [batch, seq, d] whatever the module's batch_first. A wrapper forward(x, mask), scripted or
// traced, that hands its second input to the encoder as src_key_padding_mask lowers too (the
// layout's mask_input; the config must declare it TYPE_BOOL with dims [-1], else
// INVALID_ARGUMENT); a trace around a bare TransformerEncoderLayer serves through TorchScript.
// spec.options.execution_path: kAuto (lower when possible), kPlan (failing to lower is a load
// error) or kTorchScript (no lowering). Errors: NOT_FOUND for a missing file, INVALID_ARGUMENT
// for a file that is not TorchScript or a plan whose input/output widths disagree with the
// configured dims; FAILED_PRECONDITION for execution_path=plan on a module that cannot be
// lowered.
Result<LoadedModel> LoadTorchScriptModel(const ModelSpec& spec);

}  // namespace ltserve
