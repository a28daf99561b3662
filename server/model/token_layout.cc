#include "model/token_layout.h"

#include <algorithm>
#include <string>

namespace ltserve {

Result<TokenLayout> MakeTokenLayout(const ModelSpec& spec, std::optional<std::size_t> mask_input) {
  TokenModelFacts facts;
  facts.mask_input = mask_input;
  return MakeTokenLayout(spec, facts);
}

Result<TokenLayout> MakeTokenLayout(const ModelSpec& spec, const TokenModelFacts& facts) {
  if (spec.max_batch_size < 1) {
    return InvalidArgument("a token model needs max_batch_size > 0 (requests are [batch, seq, ...])");
  }
  const std::optional<std::size_t> mask_input = facts.mask_input;
  TokenLayout layout;
  layout.mask_input = mask_input;
  layout.mask_kind = facts.mask_kind;
  layout.ids = facts.ids;
  layout.pooled = facts.pooled;
  if (facts.ids) {
    layout.token_inputs.push_back(facts.ids->ids_input);
    if (facts.ids->type_input) layout.token_inputs.push_back(*facts.ids->type_input);
  } else {
    for (std::size_t i = 0; i < spec.inputs.size(); ++i) {
      if (mask_input != i) layout.token_inputs.push_back(i);
    }
  }
  const auto outside = [&](std::size_t index) { return index >= spec.inputs.size(); };
  if (layout.token_inputs.empty() || (mask_input && outside(*mask_input)) ||
      std::any_of(layout.token_inputs.begin(), layout.token_inputs.end(), outside)) {
    return InvalidArgument("a token model needs an input that carries its tokens");
  }
  layout.sequence_input = layout.token_inputs.front();
  const std::vector<std::int64_t>& dims = spec.inputs[layout.sequence_input].dims;
  const std::int64_t configured_seq = !dims.empty() && dims[0] > 0 ? dims[0] : -1;
  const std::int64_t model_limit = facts.max_positions > 0 ? facts.max_positions
                                                           : kDefaultMaxSequenceLength;
  layout.max_sequence_length = spec.options.max_sequence_length.value_or(
      configured_seq > 0 ? configured_seq : model_limit);
  if (facts.max_positions > 0 && layout.max_sequence_length > facts.max_positions) {
    return InvalidArgument("max_sequence_length " + std::to_string(layout.max_sequence_length) +
                           " exceeds the " + std::to_string(facts.max_positions) +
                           " positions the model embeds");
  }
  layout.max_batch_tokens = spec.options.max_tokens_per_batch.value_or(
      std::int64_t{spec.max_batch_size} * layout.max_sequence_length);
  for (const TensorSpec& output : spec.outputs) {
    const bool rank_ok = layout.pooled ? output.dims.size() == 1 : !output.dims.empty();
    if (!rank_ok || output.dims.back() < 1 || ElementSize(output.dtype) == 0) {
      return InvalidArgument("output '" + output.name + "' of a " +
                             (layout.pooled ? "pooled encoder needs dims [width]"
                                            : "token model needs dims [seq, width]") +
                             " with a fixed width");
    }
    layout.output_token_bytes.push_back(static_cast<std::size_t>(output.dims.back()) *
                                        ElementSize(output.dtype));
  }
  return layout;
}

std::vector<TensorSpec> ExecutorInputs(const ModelSpec& spec,
                                       const std::optional<TokenLayout>& tokens) {
  if (!tokens) return spec.inputs;
  std::vector<TensorSpec> inputs;
  for (std::size_t index : tokens->token_inputs) inputs.push_back(spec.inputs.at(index));
  return inputs;
}

}  // namespace ltserve
