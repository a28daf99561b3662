// How a token model (an encoder whose plan takes InputKind::kTokens) lays its requests out:
// which config inputs carry tokens, which one is a key-padding mask, how long a sequence may
// be, how many tokens one executed batch holds and how wide each output's token is. Computed
// once at load from the config and what the loader found in the module (MakeTokenLayout), then
// handed to the scheduler and to whichever executor runs the plan; nothing else decides these.
//
// Requests of a token model are [batch, seq, ...] on every token input; the batcher packs the
// real tokens of all requests of a batch back to back (the executor sees [total_tokens, ...]
// and one length per sequence) and cuts the outputs back to [batch, seq, ...].
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/status.h"
#include "model/model_spec.h"

namespace ltserve {

// The longest sequence assumed when neither the config's seq dim nor max_sequence_length gives
// one: BERT's limit, which covers most encoders exported from PyTorch.
inline constexpr std::int64_t kDefaultMaxSequenceLength = 512;

struct TokenLayout {
  // Config inputs whose tokens the executor receives, in the executor's input order.
  std::vector<std::size_t> token_inputs;
  // The config input whose dims [batch, seq, ...] give a request's sequence length
  // (token_inputs.front()).
  std::size_t sequence_input = 0;
  // The config input that is a key-padding mask, BOOL [batch, seq] with true = padding: the
  // batcher drops padded tokens before the executor and puts zeros at their output positions.
  std::optional<std::size_t> mask_input;
  // The longest seq one request may send (longer: INVALID_ARGUMENT naming both numbers).
  std::int64_t max_sequence_length = kDefaultMaxSequenceLength;
  // Tokens one executed batch holds: what the scheduler packs up to and executors are sized for.
  // 0: no budget beyond max_batch_size (only layouts built by hand, in tests).
  std::int64_t max_batch_tokens = 0;
  // Bytes of one token of each config output (width x element size): outputs are per token.
  std::vector<std::size_t> output_token_bytes;
};

// The layout of a token model whose module takes a key-padding mask as config input
// `mask_input` (none: every input carries tokens). max_sequence_length: the parameter, else the
// sequence input's configured seq dim when fixed, else kDefaultMaxSequenceLength;
// max_batch_tokens: the parameter, else max_batch_size x max_sequence_length. INVALID_ARGUMENT
// when the config cannot describe a token model (no batch dimension, no token input, an output
// without a per-token width).
Result<TokenLayout> MakeTokenLayout(const ModelSpec& spec, std::optional<std::size_t> mask_input);

// The config tensors an executor of this model receives as its inputs: the layout's token
// inputs in order, or every input of a model without a layout.
std::vector<TensorSpec> ExecutorInputs(const ModelSpec& spec, const std::optional<TokenLayout>& tokens);

}  // namespace ltserve
