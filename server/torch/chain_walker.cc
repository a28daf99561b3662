#include "torch/chain_walker.h"

#include <torch/csrc/jit/ir/constants.h>

#include <string>
#include <tuple>
#include <utility>

namespace ltserve::lowering {
namespace {

using torch::jit::Node;
using torch::jit::Value;

std::string KindName(const Node& node) { return node.kind().toQualString(); }

// Graph values carry the debug names TorchScript derived from the source ("input.5").
std::string ValueName(const Value* value) { return "'" + value->debugName() + "'"; }

// Where the op stands in the module's serialized code, when it kept it:
// "code/__torch__.py:12" inside the model archive.
std::string SourceLocation(const Node& node) {
  std::optional<std::tuple<std::string, std::size_t, std::size_t>> location =
      node.sourceRange().file_line_col();
  if (!location) return "";
  const auto& [file, line, column] = *location;
  return " at " + file + ":" + std::to_string(line);
}

Status NotLowered(const Node& node, const std::string& why) {
  return Unimplemented(KindName(node) + SourceLocation(node) + ": " + why);
}

Result<c10::IValue> ConstantInput(const Node& node, std::size_t index) {
  if (index >= node.inputs().size()) return NotLowered(node, "has too few arguments");
  std::optional<c10::IValue> value = torch::jit::toIValue(node.input(index));
  if (!value) {
    return NotLowered(node, "argument " + std::to_string(index) +
                                " is not a constant (only frozen parameters are lowered)");
  }
  return std::move(*value);
}

Result<at::Tensor> ConstantTensor(const Node& node, std::size_t index, std::int64_t rank) {
  LTSERVE_ASSIGN_OR_RETURN(c10::IValue value, ConstantInput(node, index));
  if (!value.isTensor() || value.toTensor().dim() != rank ||
      !at::isFloatingType(value.toTensor().scalar_type())) {
    return NotLowered(node, "argument " + std::to_string(index) +
                                " is not a float tensor of rank " + std::to_string(rank));
  }
  return value.toTensor();
}

// A tensor argument that may be None (bias=False, elementwise_affine=False).
Result<std::optional<at::Tensor>> OptionalTensor(const Node& node, std::size_t index) {
  LTSERVE_ASSIGN_OR_RETURN(c10::IValue value, ConstantInput(node, index));
  if (value.isNone()) return std::optional<at::Tensor>();
  LTSERVE_ASSIGN_OR_RETURN(at::Tensor tensor, ConstantTensor(node, index, 1));
  return std::optional<at::Tensor>(std::move(tensor));
}

Result<double> ConstantNumber(const Node& node, std::size_t index) {
  LTSERVE_ASSIGN_OR_RETURN(c10::IValue value, ConstantInput(node, index));
  if (value.isDouble()) return value.toDouble();
  if (value.isInt()) return static_cast<double>(value.toInt());
  return NotLowered(node, "argument " + std::to_string(index) + " is not a number");
}

Result<std::int64_t> ConstantInt(const Node& node, std::size_t index) {
  LTSERVE_ASSIGN_OR_RETURN(c10::IValue value, ConstantInput(node, index));
  if (!value.isInt())
    return NotLowered(node, "argument " + std::to_string(index) + " is not an int");
  return value.toInt();
}

std::optional<plan::Activation> SimpleActivation(const std::string& kind) {
  using plan::Activation;
  if (kind == "aten::relu" || kind == "aten::relu_") return Activation::kRelu;
  if (kind == "aten::silu" || kind == "aten::silu_") return Activation::kSilu;
  if (kind == "aten::tanh" || kind == "aten::tanh_") return Activation::kTanh;
  if (kind == "aten::sigmoid" || kind == "aten::sigmoid_") return Activation::kSigmoid;
  return std::nullopt;
}

// Ops that return their input's values unchanged at inference.
bool IsPassThrough(const std::string& kind) {
  return kind == "aten::contiguous" || kind == "aten::detach" || kind == "aten::clone";
}

}  // namespace

Result<std::vector<Step>> ChainWalker::Walk(const torch::jit::Graph& graph) {
  // Input 0 of a method's graph is the module itself.
  const auto inputs = graph.inputs();
  if (inputs.size() != 2) {
    return Unimplemented("forward takes " + std::to_string(inputs.size() - 1) +
                         " inputs; only single-input models are lowered");
  }
  current_ = inputs[1];
  for (const Node* node : graph.nodes()) {
    if (node->kind() == c10::prim::Constant) continue;
    bool consumes_chain = false;
    for (const Value* input : node->inputs()) consumes_chain |= input == current_;
    // A node off the chain computes from constants only: the chain op that reads its result
    // decides whether it is acceptable (it must fold to a constant).
    if (!consumes_chain) continue;
    if (current_->uses().size() != 1) {
      std::string consumers;
      for (const torch::jit::Use& use : current_->uses()) {
        consumers += (consumers.empty() ? "" : ", ") + KindName(*use.user);
      }
      return Unimplemented("value " + ValueName(current_) + " feeds " +
                           std::to_string(current_->uses().size()) + " ops (" + consumers +
                           "): only a straight chain of layers is lowered");
    }
    if (node->outputs().size() != 1) return NotLowered(*node, "has several outputs");
    LTSERVE_RETURN_IF_ERROR(Visit(*node));
    current_ = node->output(0);
  }
  if (graph.outputs().size() != 1 || graph.outputs()[0] != current_) {
    return Unimplemented("forward does not return the end of the layer chain " +
                         ValueName(current_));
  }
  return std::move(steps_);
}

Status ChainWalker::Visit(const Node& node) {
  const std::string kind = KindName(node);
  if (kind == "aten::addmm") return VisitAddmm(node);
  // Every other op takes the chain value as its first argument.
  if (node.input(0) != current_) {
    return NotLowered(node, "the layer chain enters as a later argument, not the first");
  }
  if (kind == "aten::linear") return VisitLinear(node);
  if (kind == "aten::matmul") return VisitMatmul(node);
  if (kind == "aten::add" || kind == "aten::add_") return VisitAdd(node);
  if (kind == "aten::gelu" || kind == "aten::gelu_") return VisitGelu(node);
  if (kind == "aten::layer_norm") return VisitLayerNorm(node);
  if (kind == "aten::flatten") return VisitFlatten(node);
  if (kind == "aten::dropout" || kind == "aten::dropout_") return VisitDropout(node);
  if (IsPassThrough(kind)) return Status::Ok();
  if (std::optional<plan::Activation> activation = SimpleActivation(kind)) {
    if (node.inputs().size() != 1) return NotLowered(node, "has unexpected arguments");
    steps_.push_back(ActivationStep{*activation});
    return Status::Ok();
  }
  if (kind == "prim::TupleConstruct" || kind == "prim::ListConstruct") {
    return NotLowered(node, "the forward returns several values");
  }
  return NotLowered(node, "no plan op computes it");
}

Status ChainWalker::RequireRows(const Node& node) const {
  if (rank_ == 1) return Status::Ok();
  return NotLowered(node, "it acts on the last of " + std::to_string(rank_) +
                              " dims; only a flat row per sample is lowered (Flatten first)");
}

Status ChainWalker::VisitLinear(const Node& node) {
  LTSERVE_RETURN_IF_ERROR(RequireRows(node));
  LTSERVE_ASSIGN_OR_RETURN(at::Tensor weight, ConstantTensor(node, 1, 2));
  LTSERVE_ASSIGN_OR_RETURN(std::optional<at::Tensor> bias, OptionalTensor(node, 2));
  steps_.push_back(LinearStep{std::move(weight), std::move(bias)});
  return Status::Ok();
}

// addmm(bias, x, Wᵀ, beta, alpha): how older exports and F.linear on 2-D inputs appear.
Status ChainWalker::VisitAddmm(const Node& node) {
  if (node.input(1) != current_) return NotLowered(node, "the layer chain is not the matrix input");
  LTSERVE_RETURN_IF_ERROR(RequireRows(node));
  LTSERVE_ASSIGN_OR_RETURN(at::Tensor bias, ConstantTensor(node, 0, 1));
  LTSERVE_ASSIGN_OR_RETURN(at::Tensor transposed, ConstantTensor(node, 2, 2));
  LTSERVE_ASSIGN_OR_RETURN(double beta, ConstantNumber(node, 3));
  LTSERVE_ASSIGN_OR_RETURN(double alpha, ConstantNumber(node, 4));
  if (beta != 1.0 || alpha != 1.0) return NotLowered(node, "beta and alpha must be 1");
  steps_.push_back(LinearStep{transposed.t().contiguous(), std::move(bias)});
  return Status::Ok();
}

// x @ Wᵀ: a Linear without bias; a following constant add becomes its bias (VisitAdd).
Status ChainWalker::VisitMatmul(const Node& node) {
  LTSERVE_RETURN_IF_ERROR(RequireRows(node));
  LTSERVE_ASSIGN_OR_RETURN(at::Tensor transposed, ConstantTensor(node, 1, 2));
  steps_.push_back(LinearStep{transposed.t().contiguous(), std::nullopt});
  return Status::Ok();
}

Status ChainWalker::VisitAdd(const Node& node) {
  auto* linear = steps_.empty() ? nullptr : std::get_if<LinearStep>(&steps_.back());
  if (linear == nullptr) return NotLowered(node, "only a bias add right after a matmul is lowered");
  LTSERVE_ASSIGN_OR_RETURN(at::Tensor bias, ConstantTensor(node, 1, 1));
  LTSERVE_ASSIGN_OR_RETURN(double alpha, ConstantNumber(node, 2));
  if (alpha != 1.0 || bias.size(0) != linear->weight.size(0)) {
    return NotLowered(node, "the added constant is not a bias of the preceding matmul's width");
  }
  linear->bias = linear->bias ? *linear->bias + bias : bias;
  return Status::Ok();
}

Status ChainWalker::VisitGelu(const Node& node) {
  LTSERVE_ASSIGN_OR_RETURN(c10::IValue approximate, ConstantInput(node, 1));
  const std::string mode = approximate.isString() ? approximate.toStringRef() : "";
  if (mode == "none") {
    steps_.push_back(ActivationStep{plan::Activation::kGeluErf});
  } else if (mode == "tanh") {
    steps_.push_back(ActivationStep{plan::Activation::kGeluTanh});
  } else {
    return NotLowered(node, "unknown approximate mode '" + mode + "'");
  }
  return Status::Ok();
}

Status ChainWalker::VisitLayerNorm(const Node& node) {
  LTSERVE_RETURN_IF_ERROR(RequireRows(node));
  LTSERVE_ASSIGN_OR_RETURN(c10::IValue shape, ConstantInput(node, 1));
  if (!shape.isIntList() || shape.toIntList().size() != 1) {
    return NotLowered(node, "only normalisation over the last dim is lowered");
  }
  LayerNormStep step;
  step.width = shape.toIntList().get(0);
  LTSERVE_ASSIGN_OR_RETURN(step.gamma, OptionalTensor(node, 2));
  LTSERVE_ASSIGN_OR_RETURN(step.beta, OptionalTensor(node, 3));
  LTSERVE_ASSIGN_OR_RETURN(step.eps, ConstantNumber(node, 4));
  steps_.push_back(std::move(step));
  return Status::Ok();
}

// Flatten changes no bytes of a row-major tensor; only the rank it leaves matters, and it must
// never merge the batch dim.
Status ChainWalker::VisitFlatten(const Node& node) {
  if (per_token_) {
    return NotLowered(node, "a token model's blocks must act per token; Flatten merges tokens");
  }
  LTSERVE_ASSIGN_OR_RETURN(std::int64_t start, ConstantInt(node, 1));
  LTSERVE_ASSIGN_OR_RETURN(std::int64_t end, ConstantInt(node, 2));
  const std::int64_t full_rank = rank_ + (has_batch_dim_ ? 1 : 0);
  if (start < 0) start += full_rank;
  if (end < 0) end += full_rank;
  if (full_rank == 0 || start < 0 || end >= full_rank || start > end) {
    return NotLowered(node, "dims out of range for a rank " + std::to_string(full_rank) + " input");
  }
  if (has_batch_dim_ && start == 0 && end > 0) {
    return NotLowered(node, "it merges the batch dim into the features");
  }
  rank_ -= end - start;
  return Status::Ok();
}

Status ChainWalker::VisitDropout(const Node& node) {
  LTSERVE_ASSIGN_OR_RETURN(c10::IValue training, ConstantInput(node, 2));
  if (!training.isBool() || training.toBool()) return NotLowered(node, "dropout in training mode");
  return Status::Ok();
}

}  // namespace ltserve::lowering
