#include "torch/encoder_lowering.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/inliner.h>

#include <cmath>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <unordered_map>
#include <utility>

#include "torch/lowering.h"

namespace ltserve::lowering {
namespace {

using torch::jit::Module;

constexpr char kEncoder[] = "__torch__.torch.nn.modules.transformer.TransformerEncoder";
constexpr char kEncoderLayer[] = "__torch__.torch.nn.modules.transformer.TransformerEncoderLayer";
constexpr char kSequential[] = "__torch__.torch.nn.modules.container.Sequential";

// The shape a block around an encoder sees, as far as the chain walker cares: one row per token.
const InputShape kPerToken{{-1}, true, true};

std::string TypeName(const Module& module) { return ModuleTypeName(module); }

Status NotLowered(const std::string& where, const std::string& why) {
  return Unimplemented("encoder module '" + where + "': " + why);
}

std::string Join(const std::string& parent, const std::string& child) {
  return parent.empty() ? child : parent + "." + child;
}

// A tensor attribute; nullopt when absent (a traced module drops None attributes) or None.
std::optional<at::Tensor> TensorAttr(const Module& module, const std::string& name) {
  if (!module.hasattr(name)) return std::nullopt;
  c10::IValue value = module.attr(name);
  if (!value.isTensor()) return std::nullopt;
  return value.toTensor().detach();
}

Result<Module> Child(const Module& module, const std::string& name, const std::string& where) {
  if (!module.hasattr(name) || !module.attr(name).isObject()) {
    return NotLowered(where, "has no submodule '" + name + "'");
  }
  return module.attr(name).toModule();
}

Result<LinearStep> LinearOf(const Module& module, const std::string& weight_name,
                            const std::string& bias_name, const std::string& where) {
  std::optional<at::Tensor> weight = TensorAttr(module, weight_name);
  if (!weight || weight->dim() != 2 || !at::isFloatingType(weight->scalar_type())) {
    return NotLowered(where, "'" + weight_name +
                                 "' is not a float matrix (attention with "
                                 "separate q/k/v weights is not lowered)");
  }
  return LinearStep{*weight, TensorAttr(module, bias_name)};
}

LayerNormStep NormOf(const Module& norm, std::int64_t width, double eps) {
  return LayerNormStep{width, eps, TensorAttr(norm, "weight"), TensorAttr(norm, "bias")};
}

// What a layer's attributes or traced graph say about it, besides its weights.
struct LayerSettings {
  std::int64_t num_heads = 0;
  bool norm_first = false;
  plan::Activation activation = plan::Activation::kNone;
  double eps1 = 1e-5;
  double eps2 = 1e-5;
};

Result<LayerSettings> ScriptedSettings(const Module& layer, const Module& attention,
                                       const Module& norm1, const Module& norm2,
                                       const std::string& where) {
  LayerSettings settings;
  settings.norm_first = layer.attr("norm_first").toBool();
  settings.num_heads = attention.attr("num_heads").toInt();
  settings.eps1 = norm1.attr("eps").toDouble();
  settings.eps2 = norm2.attr("eps").toDouble();
  // TransformerEncoderLayer's own code for its activation: 1 relu, 2 gelu, 0 anything else.
  const std::int64_t code =
      layer.hasattr("activation_relu_or_gelu") ? layer.attr("activation_relu_or_gelu").toInt() : 0;
  if (code == 1) settings.activation = plan::Activation::kRelu;
  if (code == 2) settings.activation = plan::Activation::kGeluErf;
  if (settings.activation == plan::Activation::kNone) {
    return NotLowered(where, "its activation is neither relu nor gelu");
  }
  if ((attention.hasattr("bias_k") && !attention.attr("bias_k").isNone()) ||
      (attention.hasattr("add_zero_attn") && attention.attr("add_zero_attn").toBool())) {
    return NotLowered(where, "attention with bias_k/bias_v or add_zero_attn is not lowered");
  }
  return settings;
}

std::optional<c10::IValue> ConstantOf(const torch::jit::Value* value) {
  return torch::jit::toIValue(value);
}

// For a traced module called with a key-padding mask: the input of its forward graph (self is
// 0) that carries the mask. Unset: the module must take no mask.
using TracedMaskInput = std::optional<std::size_t>;

// The fused call a trace under no_grad records: (src, embed_dim, num_heads, weights..., use_gelu,
// norm_first, eps, ..., mask, mask_type). `key_padding_mask`, when not null, is the graph value
// the mask may be: then mask_type must be 1, PyTorch's code for a key-padding mask.
Result<LayerSettings> FusedCallSettings(const torch::jit::Node& node, const std::string& where,
                                        const torch::jit::Value* key_padding_mask) {
  std::optional<c10::IValue> heads = ConstantOf(node.input(2));
  std::optional<c10::IValue> gelu = ConstantOf(node.input(7));
  std::optional<c10::IValue> norm_first = ConstantOf(node.input(8));
  std::optional<c10::IValue> eps = ConstantOf(node.input(9));
  std::optional<c10::IValue> mask = ConstantOf(node.input(18));
  const bool masked = key_padding_mask != nullptr && node.input(18) == key_padding_mask;
  if (masked) {
    std::optional<c10::IValue> mask_type = ConstantOf(node.input(19));
    if (!mask_type || !mask_type->isInt() || mask_type->toInt() != 1) {
      return NotLowered(where, "the traced encoder call takes the mask as another kind of mask");
    }
  }
  if (!heads || !gelu || !norm_first || !eps || (!masked && (!mask || !mask->isNone()))) {
    return NotLowered(where, "the traced encoder call has non-constant settings or a mask");
  }
  LayerSettings settings;
  settings.num_heads = heads->toInt();
  settings.activation = gelu->toBool() ? plan::Activation::kGeluErf : plan::Activation::kRelu;
  settings.norm_first = norm_first->toBool();
  settings.eps1 = settings.eps2 = eps->toDouble();
  return settings;
}

// q enters scaled_dot_product_attention as view(q, [batch, num_heads, seq, head_dim]).
std::optional<std::int64_t> HeadsFromAttentionCall(const torch::jit::Node& sdpa) {
  const torch::jit::Node* view = sdpa.input(0)->node();
  if (view->kind().toQualString() != std::string("aten::view")) return std::nullopt;
  const torch::jit::Node* sizes = view->input(1)->node();
  if (sizes->kind() != c10::prim::ListConstruct || sizes->inputs().size() != 4) return std::nullopt;
  std::optional<c10::IValue> heads = ConstantOf(sizes->input(1));
  if (!heads || !heads->isInt()) return std::nullopt;
  return heads->toInt();
}

Result<LayerSettings> TracedSettings(const Module& layer, const std::string& where,
                                     TracedMaskInput mask_input) {
  std::shared_ptr<torch::jit::Graph> graph = layer.get_method("forward").graph()->copy();
  torch::jit::Inline(*graph);
  const torch::jit::Value* key_padding_mask = nullptr;
  if (mask_input) {
    if (*mask_input >= graph->inputs().size()) return NotLowered(where, "has no mask input");
    key_padding_mask = graph->inputs()[*mask_input];
    if (key_padding_mask->uses().size() != 1) {
      return NotLowered(where, "uses the key-padding mask for more than its attention");
    }
  }
  LayerSettings settings;
  int norms = 0, linears = 0, activations = 0;
  std::optional<std::int64_t> heads;
  for (const torch::jit::Node* node : graph->nodes()) {
    const std::string kind = node->kind().toQualString();
    if (kind == "aten::_transformer_encoder_layer_fwd") {
      return FusedCallSettings(*node, where, key_padding_mask);
    }
    if (kind == "aten::linear" && linears++ == 0) settings.norm_first = norms > 0;
    if (kind == "aten::layer_norm") {
      std::optional<c10::IValue> eps = ConstantOf(node->input(4));
      if (!eps || !eps->isDouble()) return NotLowered(where, "a LayerNorm eps is not constant");
      (norms++ == 0 ? settings.eps1 : settings.eps2) = eps->toDouble();
    }
    if (kind == "aten::relu" || kind == "aten::relu_") {
      settings.activation = plan::Activation::kRelu;
      ++activations;
    }
    if (kind == "aten::gelu" || kind == "aten::gelu_") {
      std::optional<c10::IValue> mode = ConstantOf(node->input(1));
      const bool tanh = mode && mode->isString() && mode->toStringRef() == "tanh";
      settings.activation = tanh ? plan::Activation::kGeluTanh : plan::Activation::kGeluErf;
      ++activations;
    }
    if (kind == "aten::scaled_dot_product_attention") {
      std::optional<c10::IValue> mask = ConstantOf(node->input(3));
      if (!mask || !mask->isNone()) return NotLowered(where, "the traced attention has a mask");
      heads = HeadsFromAttentionCall(*node);
    }
  }
  if (!heads) return NotLowered(where, "the head count is not found in the traced attention");
  if (norms != 2 || activations != 1) {
    return NotLowered(where, "the traced layer has " + std::to_string(norms) + " LayerNorms and " +
                                 std::to_string(activations) +
                                 " activations; expected 2 and 1 (relu or gelu)");
  }
  settings.num_heads = *heads;
  return settings;
}

Result<EncoderLayerStep> LayerStep(const Module& layer, const std::string& where,
                                   TracedMaskInput mask_input = std::nullopt) {
  LTSERVE_ASSIGN_OR_RETURN(Module attention, Child(layer, "self_attn", where));
  LTSERVE_ASSIGN_OR_RETURN(Module out_proj, Child(attention, "out_proj", where));
  LTSERVE_ASSIGN_OR_RETURN(Module linear1, Child(layer, "linear1", where));
  LTSERVE_ASSIGN_OR_RETURN(Module linear2, Child(layer, "linear2", where));
  LTSERVE_ASSIGN_OR_RETURN(Module norm1, Child(layer, "norm1", where));
  LTSERVE_ASSIGN_OR_RETURN(Module norm2, Child(layer, "norm2", where));
  EncoderLayerStep step;
  LTSERVE_ASSIGN_OR_RETURN(step.in_proj,
                           LinearOf(attention, "in_proj_weight", "in_proj_bias", where));
  LTSERVE_ASSIGN_OR_RETURN(step.out_proj, LinearOf(out_proj, "weight", "bias", where));
  LTSERVE_ASSIGN_OR_RETURN(step.linear1, LinearOf(linear1, "weight", "bias", where));
  LTSERVE_ASSIGN_OR_RETURN(step.linear2, LinearOf(linear2, "weight", "bias", where));
  // Scripting keeps every attribute; tracing keeps only parameters and submodules.
  const bool scripted = layer.hasattr("norm_first");
  LTSERVE_ASSIGN_OR_RETURN(LayerSettings settings,
                           scripted ? ScriptedSettings(layer, attention, norm1, norm2, where)
                                    : TracedSettings(layer, where, mask_input));
  const std::int64_t d = step.in_proj.weight.size(1);
  if (settings.num_heads < 1 || d % settings.num_heads != 0 ||
      step.in_proj.weight.size(0) != 3 * d) {
    return NotLowered(where, std::to_string(settings.num_heads) + " heads do not split width " +
                                 std::to_string(d) + " with a packed [3d, d] in-projection");
  }
  step.num_heads = settings.num_heads;
  step.norm_first = settings.norm_first;
  step.activation = settings.activation;
  step.norm1 = NormOf(norm1, d, settings.eps1);
  step.norm2 = NormOf(norm2, d, settings.eps2);
  return step;
}

// A traced nn.TransformerEncoder called with a key-padding mask (graph input `mask_input`)
// turns it into the additive float mask its layers take, masked_fill_(zeros_like(mask), mask,
// -inf), and passes that to every layer: checks exactly that, and returns, per child of
// `layers`, the input of the layer's forward graph the additive mask arrives at.
Result<std::map<std::string, std::size_t>> TracedEncoderMaskInputs(const Module& encoder,
                                                                   std::size_t mask_input,
                                                                   const std::string& where) {
  const std::shared_ptr<torch::jit::Graph> graph = encoder.get_method("forward").graph();
  if (mask_input >= graph->inputs().size()) return NotLowered(where, "has no mask input");
  const torch::jit::Value* mask = graph->inputs()[mask_input];
  const torch::jit::Value* additive = nullptr;
  for (const torch::jit::Use& use : mask->uses()) {
    const torch::jit::Node* node = use.user;
    const std::string kind = node->kind().toQualString();
    if (kind == "aten::zeros_like" && use.offset == 0) continue;  // checked with masked_fill_
    std::optional<c10::IValue> fill = kind == "aten::masked_fill_" ? ConstantOf(node->input(2))
                                                                   : std::nullopt;
    const torch::jit::Node* zeros = node->input(0)->node();
    if (fill && fill->isDouble() && std::isinf(fill->toDouble()) && fill->toDouble() < 0 &&
        use.offset == 1 && std::string(zeros->kind().toQualString()) == "aten::zeros_like" &&
        zeros->input(0) == mask) {
      additive = node->output();
      continue;
    }
    return NotLowered(where, "uses the key-padding mask in " + kind +
                                 ", not only to build the additive mask of its layers");
  }
  if (additive == nullptr) return NotLowered(where, "does not turn the mask into -inf where padded");
  std::map<std::string, std::size_t> layer_inputs;
  for (const torch::jit::Use& use : additive->uses()) {
    const torch::jit::Node* call = use.user;
    const torch::jit::Node* child = call->inputs().empty() ? nullptr : call->input(0)->node();
    const torch::jit::Node* list = child == nullptr ? nullptr : child->inputs().empty() ? nullptr
                                                                : child->input(0)->node();
    if (call->kind() != c10::prim::CallMethod || call->s(c10::attr::name) != "forward" ||
        child->kind() != c10::prim::GetAttr || list == nullptr ||
        list->kind() != c10::prim::GetAttr || list->s(c10::attr::name) != "layers") {
      return NotLowered(where, "passes the mask to something other than its layers");
    }
    layer_inputs[child->s(c10::attr::name)] = use.offset;  // call input i is callee input i
  }
  return layer_inputs;
}

Status AppendEncoder(const Module& encoder, const std::string& where, std::vector<Step>* steps,
                     TracedMaskInput mask_input = std::nullopt) {
  LTSERVE_ASSIGN_OR_RETURN(Module layers, Child(encoder, "layers", where));
  std::map<std::string, std::size_t> layer_masks;
  if (mask_input) {
    LTSERVE_ASSIGN_OR_RETURN(layer_masks, TracedEncoderMaskInputs(encoder, *mask_input, where));
  }
  for (const torch::jit::NameModule& layer : layers.named_children()) {
    const std::string layer_where = Join(where, "layers." + layer.name);
    TracedMaskInput layer_mask;
    if (mask_input) {
      const auto found = layer_masks.find(layer.name);
      if (found == layer_masks.end()) return NotLowered(layer_where, "does not get the mask");
      layer_mask = found->second;
    }
    LTSERVE_ASSIGN_OR_RETURN(EncoderLayerStep step,
                             LayerStep(layer.value, layer_where, layer_mask));
    steps->push_back(std::move(step));
  }
  // The optional final norm: None in a scripted module, absent in a traced one.
  if (encoder.hasattr("norm") && encoder.attr("norm").isObject()) {
    Result<std::vector<Step>> norm = ChainSteps(encoder.attr("norm").toModule(), kPerToken);
    if (!norm.ok()) return NotLowered(Join(where, "norm"), norm.status().message());
    steps->insert(steps->end(), norm->begin(), norm->end());
  }
  return Status::Ok();
}

Status AppendBlock(const Module& block, const std::string& where, std::vector<Step>* steps) {
  const std::string type = TypeName(block);
  if (type == kEncoder) return AppendEncoder(block, where, steps);
  if (type == kEncoderLayer) {
    LTSERVE_ASSIGN_OR_RETURN(EncoderLayerStep step, LayerStep(block, where));
    steps->push_back(std::move(step));
    return Status::Ok();
  }
  // A per-token block: one row of width d per token, so rank 1 for the chain walker.
  Result<std::vector<Step>> chain = ChainSteps(block, kPerToken);
  if (!chain.ok()) return NotLowered(where, chain.status().message());
  steps->insert(steps->end(), chain->begin(), chain->end());
  return Status::Ok();
}

bool IsEncoderType(const std::string& type) { return type == kEncoder || type == kEncoderLayer; }

// A call argument that is the constant None, or (`false_too`) the constant false.
bool IsUnset(const torch::jit::Value* value, bool false_too) {
  std::optional<c10::IValue> constant = ConstantOf(value);
  return constant && (constant->isNone() || (false_too && constant->isBool() && !constant->toBool()));
}

// An encoder or encoder-layer call of a scripted wrapper: forward(src, mask, src_key_padding_mask,
// is_causal) with every argument written out (the script compiler fills in the defaults).
Status CheckMaskedEncoderCall(const torch::jit::Node& call, const torch::jit::Value* mask,
                              const std::string& where) {
  if (call.inputs().size() != 5 || call.input(3) != mask) {
    return NotLowered(where, "is not called with the key-padding mask as src_key_padding_mask");
  }
  if (!IsUnset(call.input(2), false) || !IsUnset(call.input(4), true)) {
    return NotLowered(where, "is called with an attention mask or is_causal; only a key-padding "
                             "mask is lowered");
  }
  return Status::Ok();
}

}  // namespace

// A second instance of a class with other attributes gets a mangled name (toolchain notes §4).
std::string ModuleTypeName(const Module& module) {
  static const std::regex mangle(R"(___torch_mangle_\d+\.)");
  const std::optional<c10::QualifiedName>& name = module.type()->name();
  return name ? std::regex_replace(name->qualifiedName(), mangle, "") : "";
}

std::size_t ForwardInputCount(const Module& module) {
  const torch::jit::Graph& graph = *module.get_method("forward").graph();
  return graph.inputs().empty() ? 0 : graph.inputs().size() - 1;
}

Result<std::vector<Step>> KeyPaddingWrapperSteps(const Module& module) {
  const std::shared_ptr<torch::jit::Graph> graph = module.get_method("forward").graph();
  if (graph->inputs().size() != 3) {
    return Unimplemented("forward takes " + std::to_string(ForwardInputCount(module)) +
                         " inputs; a key-padding wrapper takes (x, key_padding_mask)");
  }
  const torch::jit::Value* self = graph->inputs()[0];
  const torch::jit::Value* mask = graph->inputs()[2];
  std::unordered_map<const torch::jit::Value*, std::string> children;  // GetAttr outputs
  const torch::jit::Value* current = graph->inputs()[1];
  std::size_t masked_calls = 0;
  std::vector<Step> steps;
  for (const torch::jit::Node* node : graph->nodes()) {
    if (node->kind() == c10::prim::Constant) continue;
    if (node->kind() == c10::prim::GetAttr && node->input(0) == self) {
      children.emplace(node->output(), node->s(c10::attr::name));
      continue;
    }
    auto child = node->kind() == c10::prim::CallMethod && node->s(c10::attr::name) == "forward"
                     ? children.find(node->input(0))
                     : children.end();
    if (child == children.end()) {
      return Unimplemented(std::string("the wrapper's forward does ") +
                           node->kind().toQualString() + ", not only calls of its children");
    }
    const std::string& name = child->second;
    const Module block = module.attr(name).toModule();
    if (IsEncoderType(TypeName(block)) && node->inputs().size() == 3) {
      // A trace: the call passes the encoder's two tensors in the order it first used them.
      const std::size_t data = node->input(1) == current ? 1 : node->input(2) == current ? 2 : 0;
      if (data == 0 || node->input(3 - data) != mask) {
        return NotLowered(name, "is not called with the chain's value and the key-padding mask");
      }
      if (TypeName(block) != kEncoder) {
        return NotLowered(name, "a traced TransformerEncoderLayer called with a mask is not "
                                "lowered; trace an nn.TransformerEncoder around it, or script "
                                "the wrapper");
      }
      LTSERVE_RETURN_IF_ERROR(AppendEncoder(block, name, &steps, 3 - data));
      ++masked_calls;
      current = node->output();
      continue;
    }
    if (node->inputs().size() < 2 || node->input(1) != current) {
      return NotLowered(name, "does not take the previous child's output (or x) as its first "
                              "argument: the wrapper is not a chain");
    }
    if (IsEncoderType(TypeName(block))) {
      LTSERVE_RETURN_IF_ERROR(CheckMaskedEncoderCall(*node, mask, name));
      ++masked_calls;
    } else if (node->inputs().size() != 2) {
      return NotLowered(name, "takes more than one argument; only the encoder takes the mask");
    }
    LTSERVE_RETURN_IF_ERROR(AppendBlock(block, name, &steps));
    current = node->output();
  }
  if (graph->outputs().size() != 1 || graph->outputs()[0] != current) {
    return Unimplemented("the wrapper's forward does not return its last child's output");
  }
  if (masked_calls == 0 || mask->uses().size() != masked_calls) {
    return Unimplemented("the key-padding mask does not reach an encoder's "
                         "src_key_padding_mask (and only there)");
  }
  return steps;
}

bool IsEncoderModel(const Module& module) {
  const std::string type = TypeName(module);
  if (IsEncoderType(type)) return true;
  if (type != kSequential) return false;
  for (const torch::jit::Module& child : module.children()) {
    if (IsEncoderType(TypeName(child))) return true;
  }
  return false;
}

Result<std::vector<Step>> EncoderModelSteps(const Module& module) {
  std::vector<Step> steps;
  if (TypeName(module) != kSequential) {
    LTSERVE_RETURN_IF_ERROR(AppendBlock(module, "", &steps));
    return steps;
  }
  for (const torch::jit::NameModule& child : module.named_children()) {
    LTSERVE_RETURN_IF_ERROR(AppendBlock(child.value, child.name, &steps));
  }
  return steps;
}

}  // namespace ltserve::lowering
