// Recognises Hugging Face encoders (BERT, RoBERTa, XLM-RoBERTa, DistilBERT) exported with
// torch.jit.trace, token ids in, and what a wrapper does with their output: CLS, mean or max
// pooling over the attention mask, BERT's tanh pooler, Linear heads, L2 normalisation
// (internal to the lowering; sees torch types).
//
// A trace keeps the module tree with each module's qualified type name and its own graph, but
// drops configuration attributes. So the structure and weights are read by type and parameter
// name (transformers' classes: a custom attention class is not one of them), the settings
// (heads, LayerNorm eps, GELU form, RoBERTa's padding index, attention scale) from constants
// of the submodules' graphs, and which forward argument is the ids, the mask or the token
// types from the data flow into the embeddings and the attention. The wrapper's own graph is
// interpreted op by op over what each value is (the encoder's hidden states, the mask
// broadcast over them, a token count, a pooled row, ...); an op on those that is not one of
// the patterns above stops the lowering with its name, and the model serves through
// TorchScript.
#pragma once

#include <torch/script.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "torch/chain_walker.h"

namespace ltserve::lowering {

struct HfEncoder {
  // EmbeddingStep, one EncoderLayerStep per layer, then per-token steps, or a PoolStep and
  // per-sequence steps.
  std::vector<Step> steps;
  // Forward arguments (self excluded), which config inputs bind to by position.
  std::size_t ids_argument = 0;
  std::optional<std::size_t> mask_argument;
  std::optional<std::size_t> type_argument;
  std::size_t forward_arguments = 0;
  // The longest sequence the position table embeds.
  std::int64_t max_sequence_length = 0;
  bool pooled = false;
  bool first_token_pooling = false;
  std::string architecture;  // "BertModel", for the load log
};

// The module, or a module below it, is one of the encoders above.
bool HoldsHfEncoder(const torch::jit::Module& module);

// The lowering, or UNIMPLEMENTED saying what is not lowered (and where). May throw c10::Error
// on a malformed module; the caller catches.
Result<HfEncoder> LowerHfEncoder(const torch::jit::Module& module);

}  // namespace ltserve::lowering
