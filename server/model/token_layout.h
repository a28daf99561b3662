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
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model_spec.h"
#include "plan/plan.h"

namespace ltserve {

// The longest sequence assumed when neither the config's seq dim nor max_sequence_length gives
// one: BERT's limit, which covers most encoders exported from PyTorch.
inline constexpr std::int64_t kDefaultMaxSequenceLength = 512;

// The executor inputs of a model that takes token ids (TokenLayout::ids): int32, one value per
// packed real token, staged by the batcher from the request's ids, mask and token types.
inline constexpr std::size_t kIdsInput = 0;       // the token's id
inline constexpr std::size_t kPositionInput = 1;  // its position (the plan's PositionRule)
inline constexpr std::size_t kTypeInput = 2;      // its token type; 0 when the config has none
inline constexpr std::size_t kTokenIdInputs = 3;

enum class MaskKind : std::uint8_t {
  kKeyPadding,  // BOOL, true = padding: nn.TransformerEncoder's src_key_padding_mask
  kAttention,   // INT64, INT32 or BOOL, nonzero = a real token: Hugging Face's attention_mask
};

// What the batcher checks and computes for a model that takes token ids (a Hugging Face
// encoder): the ids' range, the positions and the token types.
struct TokenIds {
  std::size_t ids_input = 0;               // config input, INT64 or INT32 [batch, seq]
  std::optional<std::size_t> type_input;   // config input of token_type_ids, same shape
  std::int64_t vocab_size = 0;             // ids outside [0, vocab_size): INVALID_ARGUMENT
  std::int64_t type_vocab_size = 0;        // types outside [0, type_vocab_size): same
  plan::PositionRule positions = plan::PositionRule::kColumn;
  std::int64_t padding_id = 0;             // kAfterPadding's
  bool first_token_real = false;           // first-token pooling: a row's column 0 is real
};

// What the loader found in the module about its token inputs, besides the config.
struct TokenModelFacts {
  std::optional<std::size_t> mask_input;  // config input of the mask
  MaskKind mask_kind = MaskKind::kKeyPadding;
  std::optional<TokenIds> ids;            // token ids in (a kTokenIds plan)
  bool pooled = false;                    // outputs per sequence, [batch, width]
  std::int64_t max_positions = 0;         // the longest sequence the model can embed; 0: any
  std::string architecture;               // "BertModel", for the load log
};

struct TokenLayout {
  // Config inputs whose tokens the executor receives, in the executor's input order.
  std::vector<std::size_t> token_inputs;
  // The config input whose dims [batch, seq, ...] give a request's sequence length
  // (token_inputs.front()).
  std::size_t sequence_input = 0;
  // The config input that is a mask [batch, seq] (mask_kind says which values are padding):
  // the batcher drops padded tokens before the executor and, for per-token outputs, puts zeros
  // at their output positions.
  std::optional<std::size_t> mask_input;
  MaskKind mask_kind = MaskKind::kKeyPadding;
  // Token ids in: the executor's inputs are kIdsInput, kPositionInput and kTypeInput, not the
  // config's token inputs.
  std::optional<TokenIds> ids;
  // Outputs have one row per sequence ([batch, width], a pooled encoder), not per token.
  bool pooled = false;
  // The longest seq one request may send (longer: INVALID_ARGUMENT naming both numbers).
  std::int64_t max_sequence_length = kDefaultMaxSequenceLength;
  // Tokens one executed batch holds: what the scheduler packs up to and executors are sized for.
  // 0: no budget beyond max_batch_size (only layouts built by hand, in tests).
  std::int64_t max_batch_tokens = 0;
  // Bytes of one token (one sequence when pooled) of each config output: width x element size.
  std::vector<std::size_t> output_token_bytes;
};

// The layout of a token model whose module takes a key-padding mask as config input
// `mask_input` (none: every input carries tokens). max_sequence_length: the parameter, else the
// sequence input's configured seq dim when fixed, else kDefaultMaxSequenceLength;
// max_batch_tokens: the parameter, else max_batch_size x max_sequence_length. INVALID_ARGUMENT
// when the config cannot describe a token model (no batch dimension, no token input, an output
// without a per-token width).
Result<TokenLayout> MakeTokenLayout(const ModelSpec& spec, std::optional<std::size_t> mask_input);

// The same for any token model: with `facts.ids` the layout of a token-id model, whose
// sequence input is the ids, whose max_sequence_length may not exceed facts.max_positions
// (INVALID_ARGUMENT naming both), and whose outputs are [width] when pooled.
Result<TokenLayout> MakeTokenLayout(const ModelSpec& spec, const TokenModelFacts& facts);

// The config tensors an executor of this model receives as its inputs: the layout's token
// inputs in order, or every input of a model without a layout.
std::vector<TensorSpec> ExecutorInputs(const ModelSpec& spec, const std::optional<TokenLayout>& tokens);

}  // namespace ltserve
