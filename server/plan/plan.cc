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
          } else if constexpr (std::is_same_v<T, AttentionOp>) {
            const std::int64_t d = op.num_heads * op.head_dim;
            if (input_kind_ != InputKind::kTokens) {
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
  return Status::Ok();
}

std::string Plan::Describe() const {
  std::ostringstream out;
  out << (input_kind_ == InputKind::kTokens ? "tokens" : "rows") << " in " << input_width()
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
    }
  }
  return elements * bytes_per_element;
}

}  // namespace ltserve::plan
