#include "model/token_layout.h"

#include <algorithm>
#include <string>

namespace ltserve {

Result<TokenLayout> MakeTokenLayout(const ModelSpec& spec, std::optional<std::size_t> mask_input) {
  if (spec.max_batch_size < 1) {
    return InvalidArgument("a token model needs max_batch_size > 0 (requests are [batch, seq, ...])");
  }
  TokenLayout layout;
  layout.mask_input = mask_input;
  for (std::size_t i = 0; i < spec.inputs.size(); ++i) {
    if (mask_input != i) layout.token_inputs.push_back(i);
  }
  if (layout.token_inputs.empty() || (mask_input && *mask_input >= spec.inputs.size())) {
    return InvalidArgument("a token model needs an input that carries its tokens");
  }
  layout.sequence_input = layout.token_inputs.front();
  const std::vector<std::int64_t>& dims = spec.inputs[layout.sequence_input].dims;
  const std::int64_t configured_seq = !dims.empty() && dims[0] > 0 ? dims[0] : -1;
  layout.max_sequence_length = spec.options.max_sequence_length.value_or(
      configured_seq > 0 ? configured_seq : kDefaultMaxSequenceLength);
  layout.max_batch_tokens = spec.options.max_tokens_per_batch.value_or(
      std::int64_t{spec.max_batch_size} * layout.max_sequence_length);
  for (const TensorSpec& output : spec.outputs) {
    if (output.dims.empty() || output.dims.back() < 1 || ElementSize(output.dtype) == 0) {
      return InvalidArgument("output '" + output.name +
                             "' of a token model needs dims [seq, width] with a fixed width");
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
