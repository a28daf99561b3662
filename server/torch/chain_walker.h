// Reads a frozen, inlined forward graph as a chain of layers (internal to the lowering).
//
// The walk starts at the graph's single tensor input and follows the one consumer of the
// current value, node by node, until the graph's output. Parameters must be graph constants
// (the module is frozen first). A value with several consumers, an op outside the known set,
// several inputs or outputs: each stops the walk with a message naming what was found.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/ir.h>

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "common/status.h"
#include "plan/plan.h"

namespace ltserve::lowering {

// y = x · weightᵀ + bias; weight [out, in] as the module holds it (any float dtype).
struct LinearStep {
  at::Tensor weight;
  std::optional<at::Tensor> bias;
};
struct ActivationStep {
  plan::Activation activation = plan::Activation::kNone;
};
struct LayerNormStep {
  std::int64_t width = 0;
  double eps = 1e-5;
  std::optional<at::Tensor> gamma;
  std::optional<at::Tensor> beta;
};
// One nn.TransformerEncoderLayer (server/torch/encoder_lowering.h finds these; the chain walker
// never does): self-attention with the packed in-projection, then the feed-forward block, each
// with its residual, normalised after (post-norm) or before (norm_first) the block.
struct EncoderLayerStep {
  LinearStep in_proj;   // [3d, d]: q | k | v
  LinearStep out_proj;  // [d, d]
  LinearStep linear1;   // [ffn, d]
  LinearStep linear2;   // [d, ffn]
  LayerNormStep norm1;
  LayerNormStep norm2;
  std::int64_t num_heads = 1;
  bool norm_first = false;
  plan::Activation activation = plan::Activation::kRelu;
};
// A Hugging Face encoder's embeddings (hf_lowering.h finds these): tables [rows, d] and the
// LayerNorm after their sum.
struct EmbeddingStep {
  at::Tensor word;
  at::Tensor position;
  std::optional<at::Tensor> token_type;
  LayerNormStep norm;
  plan::PositionRule positions = plan::PositionRule::kColumn;
  std::int64_t padding_id = 0;
};
// Token rows to one row per sequence.
struct PoolStep {
  plan::Pooling pooling = plan::Pooling::kMean;
  float empty_value = 0.0f;
};
struct L2NormalizeStep {
  double eps = 1e-12;
};
using Step = std::variant<LinearStep, ActivationStep, LayerNormStep, EncoderLayerStep,
                          EmbeddingStep, PoolStep, L2NormalizeStep>;

class ChainWalker {
 public:
  // `input_rank`: non-batch dims of the input; `has_batch_dim`: whether dim 0 is the batch;
  // `per_token`: the input is [batch, seq, width] of a token model, so no Flatten is lowered.
  ChainWalker(std::int64_t input_rank, bool has_batch_dim, bool per_token = false)
      : rank_(input_rank), has_batch_dim_(has_batch_dim), per_token_(per_token) {}

  // The layers in order, or UNIMPLEMENTED saying why the graph is not a chain of them.
  // Not thread-safe; one walk per walker.
  Result<std::vector<Step>> Walk(const torch::jit::Graph& graph);

 private:
  Status Visit(const torch::jit::Node& node);
  Status VisitLinear(const torch::jit::Node& node);
  Status VisitAddmm(const torch::jit::Node& node);
  Status VisitMatmul(const torch::jit::Node& node);
  Status VisitAdd(const torch::jit::Node& node);
  Status VisitGelu(const torch::jit::Node& node);
  Status VisitLayerNorm(const torch::jit::Node& node);
  Status VisitFlatten(const torch::jit::Node& node);
  Status VisitDropout(const torch::jit::Node& node);
  Status RequireRows(const torch::jit::Node& node) const;

  std::int64_t rank_;  // non-batch dims of the current value
  bool has_batch_dim_;
  bool per_token_;
  const torch::jit::Value* current_ = nullptr;
  std::vector<Step> steps_;
};

}  // namespace ltserve::lowering
