// One forward pass at load, on zeros, to catch a model whose outputs do not have the shapes its
// config declares: clients read shapes from the model's metadata, so such a model is refused
// at load where this shows it, instead of failing (INTERNAL) on every request.
#pragma once

#include "common/status.h"
#include "executor/executor.h"
#include "model/model_spec.h"

namespace ltserve {

// Runs `instance` once on a batch of one row of zeros and checks every output against
// spec.outputs. INVALID_ARGUMENT naming the output and both shapes on a mismatch. OK without
// running when an input has a variable dim (no shape to pick for it), and OK when the forward
// itself fails on zeros: a model may refuse them and still serve real inputs.
Status WarmUpOutputShapes(ExecutorInstance& instance, const ModelSpec& spec);

}  // namespace ltserve
