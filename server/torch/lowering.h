// Lowering: a TorchScript module's forward, when it is a straight chain of layers the plan
// knows, becomes a plan::Plan. Internal to server/torch (it sees torch types).
//
// The module is cloned, frozen (parameters become graph constants) and inlined, so scripted and
// traced modules, nn.Sequential and custom modules looping over an nn.ModuleList all reduce to
// the same flat graph of aten ops, which is walked from the single input to the output.
// Transformer encoders are recognised by module type instead (encoder_lowering.h): a scripted
// encoder's forward has control flow the chain walker cannot follow; their steps join the same
// plan builder, which makes the plan's input kTokens.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "plan/plan.h"
#include "torch/chain_walker.h"

namespace ltserve::lowering {

// Shape facts the graph does not carry: the model's configured input dims (batch excluded when
// `has_batch_dim`), which say how many dims Flatten has to merge before a Linear.
struct InputShape {
  std::vector<std::int64_t> dims;
  bool has_batch_dim = true;
  // A block of a token model ([batch, seq, width] in): it must act on each token alone, so
  // Flatten, which would merge tokens, stops the walk.
  bool per_token = false;
};

// The validated plan, or UNIMPLEMENTED with a message saying precisely what could not be
// lowered (the op, or why the graph is not a chain). Never throws.
// Variable dims lower only for an encoder model, whose dims are [seq, d] (seq usually -1).
Result<plan::Plan> LowerModule(const torch::jit::Module& module, const InputShape& input);

// The token plan of a scripted wrapper forward(x, key_padding_mask) around an encoder
// (KeyPaddingWrapperSteps in encoder_lowering.h); `input` is x's shape ([-1, d] with a batch
// dim). The mask itself never reaches the plan: the batcher drops padded tokens before it.
// UNIMPLEMENTED saying why otherwise. Never throws.
Result<plan::Plan> LowerKeyPaddingModule(const torch::jit::Module& module,
                                         const InputShape& input);

// The steps of a module whose frozen forward is a straight chain (the walker's rules).
Result<std::vector<Step>> ChainSteps(const torch::jit::Module& module, const InputShape& input);

// The plan of `steps`; kTokens when any step is an encoder layer. `configured_width` is the
// input width when no step fixes it (a chain of element-wise ops).
Result<plan::Plan> BuildPlan(const std::vector<Step>& steps, std::int64_t configured_width);

}  // namespace ltserve::lowering
