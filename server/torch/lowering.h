// Lowering: a TorchScript module's forward, when it is a straight chain of layers the plan
// knows, becomes a plan::Plan. Internal to server/torch (it sees torch types).
//
// The module is cloned, frozen (parameters become graph constants) and inlined, so scripted and
// traced modules, nn.Sequential and custom modules looping over an nn.ModuleList all reduce to
// the same flat graph of aten ops, which is walked from the single input to the output.
// Token-level models (encoder layers) will need a second recogniser over named_modules(); the
// Step list below is where its results would join the same plan builder.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "plan/plan.h"

namespace ltserve::lowering {

// Shape facts the graph does not carry: the model's configured input dims (batch excluded when
// `has_batch_dim`), which say how many dims Flatten has to merge before a Linear.
struct InputShape {
  std::vector<std::int64_t> dims;
  bool has_batch_dim = true;
};

// The validated plan, or UNIMPLEMENTED with a message saying precisely what could not be
// lowered (the op, or why the graph is not a chain). Never throws.
Result<plan::Plan> LowerModule(const torch::jit::Module& module, const InputShape& input);

}  // namespace ltserve::lowering
