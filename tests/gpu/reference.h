// A double-precision reference for execution plans, for checking the GPU executor. It follows
// the plan's semantics op by op (plan/plan.h) with no fusion, so a fusion bug cannot hide.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "plan/plan.h"

namespace ltserve::testing {

// Rounds a weight or input the way the executor stores it (identity for fp32).
using Quantize = std::function<float(float)>;

// The activation `act` as the plan defines it (plan/plan.h), in double.
double Activate(plan::Activation act, double x);

// Runs `plan` on `rows` rows of `input` (row-major [rows, input_width]); weights pass through
// `quantize` first, as the executor converts them at load. For a token plan,
// `sequence_lengths` splits the rows into the sequences attention works within.
std::vector<double> ReferenceForward(const plan::Plan& plan, const std::vector<float>& input,
                                     std::int64_t rows, const Quantize& quantize,
                                     std::span<const std::int32_t> sequence_lengths = {});

// The three int32 inputs of a token-id plan (model/token_layout.h), one value per packed token.
struct TokenIdInputs {
  std::vector<std::int32_t> ids;
  std::vector<std::int32_t> positions;
  std::vector<std::int32_t> types;
};

// The same for a token-id plan: its EmbeddingOp gathers the (quantized) table rows of each
// token; after a PoolOp the rows are the sequences of `sequence_lengths`. The indices must be
// in range (the executor's clamping is its own defence, not semantics).
std::vector<double> ReferenceForward(const plan::Plan& plan, const TokenIdInputs& inputs,
                                     const Quantize& quantize,
                                     std::span<const std::int32_t> sequence_lengths);

}  // namespace ltserve::testing
