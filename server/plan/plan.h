// The execution plan: what a model computes, free of any framework.
//
// The loader (server/torch) lowers a TorchScript module into a Plan; executors (server/cpu,
// server/gpu) run it. Every value in a plan is a row-major matrix [rows, width]. Rows are the
// batch for an MLP, or the packed tokens of all sequences for a token-level model (an encoder):
// sequences of different lengths are concatenated without padding, and only attention looks
// across rows, using the per-sequence offsets the executor is given. Every other op is
// row-local, which is what lets one plan serve both model families and lets the batcher pack
// requests of different lengths into one matrix.
//
// Weights are fp32 in plain vectors, exactly as the checkpoint holds them; an executor converts
// them once at load to its compute precision. A Plan is immutable after Validate() and shared
// (std::shared_ptr<const Plan>) by every executor instance of a model, so N instances hold one
// copy of the host weights.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "common/status.h"

namespace ltserve::plan {

using ValueId = int;
constexpr ValueId kNoValue = -1;

enum class Activation : std::uint8_t {
  kNone,
  kRelu,
  kGeluErf,   // nn.GELU() default
  kGeluTanh,  // nn.GELU(approximate="tanh"); cuBLASLt's GELU epilogue computes this one
  kSilu,
  kTanh,
  kSigmoid,
};
const char* ActivationName(Activation activation);

// y = activation(x · Wᵀ + bias + residual), PyTorch's nn.Linear layout.
// `activation` and `residual` are fusions the loader found (Linear→ReLU, out_proj + skip);
// an executor that cannot fuse them runs them as separate steps with the same result.
struct LinearOp {
  ValueId input = kNoValue;
  ValueId output = kNoValue;
  ValueId residual = kNoValue;  // added before the activation; same shape as the output
  std::int64_t in_features = 0;
  std::int64_t out_features = 0;
  std::vector<float> weight;  // [out_features, in_features]
  std::vector<float> bias;    // [out_features], or empty for bias=False
  Activation activation = Activation::kNone;
};

// A standalone element-wise activation (one that did not follow a Linear).
struct ActivationOp {
  ValueId input = kNoValue;
  ValueId output = kNoValue;
  Activation activation = Activation::kNone;
};

// LayerNorm over the last dimension (the width), statistics in fp32.
struct LayerNormOp {
  ValueId input = kNoValue;
  ValueId output = kNoValue;
  ValueId residual = kNoValue;  // if set: LayerNorm(input + residual)
  float eps = 1e-5f;
  std::vector<float> gamma;  // [width], empty when elementwise_affine=False
  std::vector<float> beta;   // [width], empty when elementwise_affine=False or bias=False
};

// y = a + b (a residual add the loader could not fold into a Linear or LayerNorm).
struct AddOp {
  ValueId a = kNoValue;
  ValueId b = kNoValue;
  ValueId output = kNoValue;
};

// Multi-head self-attention over each sequence separately.
// `qkv` is the packed in-projection output [tokens, 3·d] (q | k | v, heads contiguous within
// each), `output` is [tokens, d] before the out-projection. softmax(q·kᵀ·scale)·v per head;
// tokens a request marked as padding never reach the plan (the batcher removes them).
struct AttentionOp {
  ValueId qkv = kNoValue;
  ValueId output = kNoValue;
  std::int64_t num_heads = 1;
  std::int64_t head_dim = 0;
};

// Where a token's position embedding row comes from. The batcher computes the positions from
// each request row (it sees the padding), so the plan only says which rule the model follows.
enum class PositionRule : std::uint8_t {
  kColumn,        // the token's column in its row, padding included (BERT, DistilBERT)
  kAfterPadding,  // RoBERTa: padding_id + the count of non-padding ids up to and including it;
                  // a token whose id is padding_id gets padding_id
};

// A Hugging Face encoder's embeddings, token ids in: LayerNorm(word[id] + position[pos] +
// token_type[type]) per token, one gather on the GPU. Its ids, positions and token types are
// the executor's three int32 token inputs (model/token_layout.h, kIdsInput...), already
// checked against the table sizes by the batcher; `output` is the plan's input value.
struct EmbeddingOp {
  ValueId output = kNoValue;
  std::int64_t vocab_size = 0;
  std::int64_t max_positions = 0;
  std::int64_t type_vocab_size = 0;  // 0: no token-type table (DistilBERT)
  std::vector<float> word;        // [vocab_size, width]
  std::vector<float> position;    // [max_positions, width]
  std::vector<float> token_type;  // [type_vocab_size, width], empty when type_vocab_size is 0
  PositionRule positions = PositionRule::kColumn;
  std::int64_t padding_id = 0;    // kAfterPadding's padding index
  float eps = 1e-12f;
  std::vector<float> gamma;  // [width]
  std::vector<float> beta;   // [width]
};

enum class Pooling : std::uint8_t {
  kFirst,  // the first token of the row (BERT's [CLS]); the batcher refuses rows whose first
           // token is padding
  kMean,   // the mean over the real tokens (sentence-transformers); 0 for a row of none
  kMax,    // the element-wise max over the real tokens; `empty_value` for a row of none
};
const char* PoolingName(Pooling pooling);

// Token rows to one row per sequence: the step after which every value has a row per
// sequence, not per token (Plan::output_per_sequence).
struct PoolOp {
  ValueId input = kNoValue;
  ValueId output = kNoValue;
  Pooling pooling = Pooling::kMean;
  float empty_value = 0.0f;  // kMax of a sequence of no real tokens (the model's fill value)
};

// y = x / max(||x||₂, eps) per row (torch.nn.functional.normalize).
struct L2NormalizeOp {
  ValueId input = kNoValue;
  ValueId output = kNoValue;
  float eps = 1e-12f;
};

using Op = std::variant<LinearOp, ActivationOp, LayerNormOp, AddOp, AttentionOp, EmbeddingOp,
                        PoolOp, L2NormalizeOp>;

struct Value {
  std::string name;  // for logs and errors: "0.linear1", "layers.3.attn_out"
  std::int64_t width = 0;
};

enum class InputKind : std::uint8_t {
  kRows,    // input [batch, width...]: one row per sample (MLP); extra dims are flattened
  kTokens,  // input [batch, seq, width]: one row per token, sequences packed (encoder)
  kTokenIds,  // token ids in (a Hugging Face encoder): ops()[0] is the EmbeddingOp, whose output
              // is input(); rows are tokens, packed as for kTokens
};

// kTokens and kTokenIds: one row per token, sequences packed, attention per sequence.
inline bool TakesTokens(InputKind kind) { return kind != InputKind::kRows; }

class Plan {
 public:
  ValueId AddValue(std::string name, std::int64_t width);
  void Append(Op op) { ops_.push_back(std::move(op)); }
  void SetInput(ValueId id, InputKind kind) { input_ = id; input_kind_ = kind; }
  void SetOutput(ValueId id) { output_ = id; }

  // Checks ids, widths and weight sizes, and that rows stay per token until one PoolOp and per
  // sequence after it (no attention after pooling, no value of one kind read as the other);
  // an executor may assume a validated plan.
  Status Validate() const;

  const std::vector<Value>& values() const { return values_; }
  const std::vector<Op>& ops() const { return ops_; }
  ValueId input() const { return input_; }
  ValueId output() const { return output_; }
  InputKind input_kind() const { return input_kind_; }
  std::int64_t input_width() const { return values_.at(input_).width; }
  std::int64_t output_width() const { return values_.at(output_).width; }
  // The EmbeddingOp of a kTokenIds plan (ops()[0]), else null.
  const EmbeddingOp* embedding() const;
  // The ops from index pool_index() on have one row per sequence: the output is [batch, width].
  bool output_per_sequence() const { return pool_index() < ops_.size(); }
  // Index of the PoolOp, or ops().size() when there is none.
  std::size_t pool_index() const;

  // One line per op, e.g. "linear 1024->4096 +bias relu (fused)"; logged at load.
  std::string Describe() const;
  // FLOPs per row (per token for kTokens, attention excluded), for benchmarks' floors.
  double FlopsPerRow() const;
  // Bytes a forward reads from weights (an embedding reads one table row per token: not counted).
  std::size_t WeightBytes(std::size_t bytes_per_element) const;

 private:
  Status CheckRowDomains() const;

  std::vector<Value> values_;
  std::vector<Op> ops_;
  ValueId input_ = kNoValue;
  ValueId output_ = kNoValue;
  InputKind input_kind_ = InputKind::kRows;
};

}  // namespace ltserve::plan
