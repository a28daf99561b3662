#include "plan/plan.h"

#include <sstream>
#include <type_traits>

namespace ltserve::plan {

const char* ActivationName(Activation activation) {
  switch (activation) {
    case Activation::kNone: return "none";
    case Activation::kRelu: return "relu";
    case Activation::kGeluErf: return "gelu";
    case Activation::kGeluTanh: return "gelu_tanh";
    case Activation::kSilu: return "silu";
    case Activation::kTanh: return "tanh";
    case Activation::kSigmoid: return "sigmoid";
  }
  return "?";
}

const char* PoolingName(Pooling pooling) {
  switch (pooling) {
    case Pooling::kFirst: return "first-token";
    case Pooling::kMean: return "mean";
    case Pooling::kMax: return "max";
  }
  return "?";
}

const EmbeddingOp* Plan::embedding() const {
  if (input_kind_ != InputKind::kTokenIds || ops_.empty()) return nullptr;
  return std::get_if<EmbeddingOp>(&ops_.front());
}

std::size_t Plan::pool_index() const {
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    if (std::holds_alternative<PoolOp>(ops_[i])) return i;
  }
  return ops_.size();
}

ValueId Plan::AddValue(std::string name, std::int64_t width) {
  values_.push_back(Value{std::move(name), width});
  return static_cast<ValueId>(values_.size() - 1);
}

namespace {

class Checker {
 public:
  explicit Checker(const std::vector<Value>& values) : values_(values) {}

  Status Id(ValueId id, const char* what, std::size_t op_index) const {
    if (id < 0 || static_cast<std::size_t>(id) >= values_.size()) {
      return Internal("plan op " + std::to_string(op_index) + ": " + what + " refers to value " +
                      std::to_string(id) + ", which does not exist");
    }
    return Status::Ok();
  }
  Status Width(ValueId id, std::int64_t expected, const char* what, std::size_t op_index) const {
    LTSERVE_RETURN_IF_ERROR(Id(id, what, op_index));
    if (values_[id].width != expected) {
      return Internal("plan op " + std::to_string(op_index) + ": " + what + " '" +
                      values_[id].name + "' has width " + std::to_string(values_[id].width) +
                      ", expected " + std::to_string(expected));
    }
    return Status::Ok();
  }

 private:
  const std::vector<Value>& values_;
};

}  // namespace

Status Plan::Validate() const {
  if (input_ == kNoValue || output_ == kNoValue) return Internal("plan has no input or output");
  if (ops_.empty()) return Internal("plan has no operations");
  Checker check(values_);
  LTSERVE_RETURN_IF_ERROR(check.Id(input_, "input", 0));
  LTSERVE_RETURN_IF_ERROR(check.Id(output_, "output", 0));
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    Status status = std::visit(
        [&](const auto& op) -> Status {
          using T = std::decay_t<decltype(op)>;
          if constexpr (std::is_same_v<T, LinearOp>) {
            LTSERVE_RETURN_IF_ERROR(check.Width(op.input, op.in_features, "linear input", i));
            LTSERVE_RETURN_IF_ERROR(check.Width(op.output, op.out_features, "linear output", i));
            if (op.residual != kNoValue) {
              LTSERVE_RETURN_IF_ERROR(check.Width(op.residual, op.out_features, "residual", i));
            }
            if (op.weight.size() != static_cast<std::size_t>(op.in_features * op.out_features)) {
              return Internal("plan op " + std::to_string(i) + ": weight has " +
                              std::to_string(op.weight.size()) + " elements, expected " +
                              std::to_string(op.in_features * op.out_features));
            }
            if (!op.bias.empty() && op.bias.size() != static_cast<std::size_t>(op.out_features)) {
              return Internal("plan op " + std::to_string(i) + ": bias size mismatch");
            }
          } else if constexpr (std::is_same_v<T, ActivationOp>) {
            LTSERVE_RETURN_IF_ERROR(check.Id(op.input, "activation input", i));
            LTSERVE_RETURN_IF_ERROR(
                check.Width(op.output, values_[op.input].width, "activation output", i));
          } else if constexpr (std::is_same_v<T, LayerNormOp>) {
            LTSERVE_RETURN_IF_ERROR(check.Id(op.input, "layernorm input", i));
            const std::int64_t width = values_[op.input].width;
            LTSERVE_RETURN_IF_ERROR(check.Width(op.output, width, "layernorm output", i));
            if (op.residual != kNoValue) {
              LTSERVE_RETURN_IF_ERROR(check.Width(op.residual, width, "residual", i));
            }
            if ((!op.gamma.empty() && op.gamma.size() != static_cast<std::size_t>(width)) ||
                (!op.beta.empty() && op.beta.size() != static_cast<std::size_t>(width))) {
              return Internal("plan op " + std::to_string(i) + ": layernorm affine size mismatch");
            }
          } else if constexpr (std::is_same_v<T, AddOp>) {
            LTSERVE_RETURN_IF_ERROR(check.Id(op.a, "add input", i));
            LTSERVE_RETURN_IF_ERROR(check.Width(op.b, values_[op.a].width, "add input", i));
            LTSERVE_RETURN_IF_ERROR(check.Width(op.output, values_[op.a].width, "add output", i));
          } else if constexpr (std::is_same_v<T, EmbeddingOp>) {
            if (i != 0 || input_kind_ != InputKind::kTokenIds || op.output != input_) {
              return Internal("plan op " + std::to_string(i) + ": an embedding is op 0 of a "
                              "token-id plan and writes its input value");
            }
            LTSERVE_RETURN_IF_ERROR(check.Id(op.output, "embedding output", i));
            const auto width = static_cast<std::size_t>(values_[op.output].width);
            if (op.vocab_size < 1 || op.max_positions < 1 || op.type_vocab_size < 0 ||
                op.word.size() != width * op.vocab_size || op.position.size() != width * op.max_positions ||
                op.token_type.size() != width * op.type_vocab_size ||
                op.gamma.size() != width || op.beta.size() != width) {
              return Internal("plan op " + std::to_string(i) + ": embedding table sizes do not "
                              "match vocab " + std::to_string(op.vocab_size) + ", positions " +
                              std::to_string(op.max_positions) + ", types " +
                              std::to_string(op.type_vocab_size) + " and width " +
                              std::to_string(width));
            }
          } else if constexpr (std::is_same_v<T, PoolOp>) {
            LTSERVE_RETURN_IF_ERROR(check.Id(op.input, "pool input", i));
            LTSERVE_RETURN_IF_ERROR(
                check.Width(op.output, values_[op.input].width, "pool output", i));
            if (!TakesTokens(input_kind_) || i != pool_index()) {
              return Internal("plan op " + std::to_string(i) + ": pooling needs token rows, "
                              "once per plan");
            }
          } else if constexpr (std::is_same_v<T, L2NormalizeOp>) {
            LTSERVE_RETURN_IF_ERROR(check.Id(op.input, "normalize input", i));
            LTSERVE_RETURN_IF_ERROR(
                check.Width(op.output, values_[op.input].width, "normalize output", i));
          } else if constexpr (std::is_same_v<T, AttentionOp>) {
            const std::int64_t d = op.num_heads * op.head_dim;
            if (!TakesTokens(input_kind_) || i > pool_index()) {
              return Internal("plan op " + std::to_string(i) + ": attention needs a token input");
            }
            LTSERVE_RETURN_IF_ERROR(check.Width(op.qkv, 3 * d, "attention qkv", i));
            LTSERVE_RETURN_IF_ERROR(check.Width(op.output, d, "attention output", i));
          }
          return Status::Ok();
        },
        ops_[i]);
    LTSERVE_RETURN_IF_ERROR(status);
  }
  if (input_kind_ == InputKind::kTokenIds && embedding() == nullptr) {
    return Internal("a token-id plan starts with its embedding");
  }
  return CheckRowDomains();
}

// Values written after the PoolOp have a row per sequence, the others a row per token; no op
// may mix them (a residual across the pooling, a head reading token rows).
Status Plan::CheckRowDomains() const {
  const std::size_t pool = pool_index();
  std::vector<int> domain(values_.size(), -1);  // -1 unwritten, 0 tokens/rows, 1 sequences
  domain[input_] = 0;
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    const int written = i >= pool ? 1 : 0;
    const int read = i > pool ? 1 : 0;
    std::vector<ValueId> reads;
    ValueId output = kNoValue;
    std::visit(
        [&](const auto& op) {
          using T = std::decay_t<decltype(op)>;
          output = op.output;
          if constexpr (std::is_same_v<T, AddOp>) {
            reads = {op.a, op.b};
          } else if constexpr (std::is_same_v<T, AttentionOp>) {
            reads = {op.qkv};
          } else if constexpr (std::is_same_v<T, LinearOp> || std::is_same_v<T, LayerNormOp>) {
            reads = {op.input, op.residual};
          } else if constexpr (!std::is_same_v<T, EmbeddingOp>) {
            reads = {op.input};
          }
        },
        ops_[i]);
    for (ValueId id : reads) {
      if (id == kNoValue) continue;
      if (domain[id] != read) {
        return Internal("plan op " + std::to_string(i) + " reads value '" + values_[id].name +
                        "' " + (domain[id] < 0 ? "before it is written" : "across the pooling"));
      }
    }
    if (domain[output] >= 0 && domain[output] != written) {
      return Internal("plan op " + std::to_string(i) + " writes '" + values_[output].name +
                      "' on both sides of the pooling");
    }
    domain[output] = written;
  }
  if (domain[output_] != (pool < ops_.size() ? 1 : 0)) {
    return Internal("the plan's output is not written after its last row change");
  }
  return Status::Ok();
}

std::string Plan::Describe() const {
  std::ostringstream out;
  out << (input_kind_ == InputKind::kTokenIds ? "token ids"
          : input_kind_ == InputKind::kTokens ? "tokens"
                                              : "rows")
      << " in " << input_width()
      << ", out " << output_width() << ":";
  for (const Op& op : ops_) {
    out << " [";
    std::visit(
        [&](const auto& o) {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, LinearOp>) {
            out << "linear " << o.in_features << "->" << o.out_features;
            if (!o.bias.empty()) out << "+bias";
            if (o.residual != kNoValue) out << "+residual";
            if (o.activation != Activation::kNone) out << "+" << ActivationName(o.activation);
          } else if constexpr (std::is_same_v<T, ActivationOp>) {
            out << ActivationName(o.activation);
          } else if constexpr (std::is_same_v<T, LayerNormOp>) {
            out << (o.residual != kNoValue ? "add+layernorm " : "layernorm ")
                << values_[o.output].width;
          } else if constexpr (std::is_same_v<T, AddOp>) {
            out << "add";
          } else if constexpr (std::is_same_v<T, AttentionOp>) {
            out << "attention " << o.num_heads << "x" << o.head_dim;
          } else if constexpr (std::is_same_v<T, EmbeddingOp>) {
            out << "embedding " << o.vocab_size << "x" << values_[o.output].width << " +positions "
                << o.max_positions << (o.token_type.empty() ? "" : " +types") << " +layernorm";
          } else if constexpr (std::is_same_v<T, PoolOp>) {
            out << PoolingName(o.pooling) << " pooling";
          } else if constexpr (std::is_same_v<T, L2NormalizeOp>) {
            out << "l2-normalize";
          }
        },
        op);
    out << "]";
  }
  return out.str();
}

double Plan::FlopsPerRow() const {
  double flops = 0;
  for (const Op& op : ops_) {
    if (const auto* linear = std::get_if<LinearOp>(&op)) {
      flops += 2.0 * static_cast<double>(linear->in_features) *
               static_cast<double>(linear->out_features);
    }
  }
  return flops;
}

std::size_t Plan::WeightBytes(std::size_t bytes_per_element) const {
  std::size_t elements = 0;
  for (const Op& op : ops_) {
    if (const auto* linear = std::get_if<LinearOp>(&op)) {
      elements += linear->weight.size() + linear->bias.size();
    } else if (const auto* norm = std::get_if<LayerNormOp>(&op)) {
      elements += norm->gamma.size() + norm->beta.size();
    } else if (const auto* embedding = std::get_if<EmbeddingOp>(&op)) {
      // A forward reads one table row per token, not the tables: the floor counts the norm only.
      elements += embedding->gamma.size() + embedding->beta.size();
    }
  }
  return elements * bytes_per_element;
}

}  // namespace ltserve::plan
