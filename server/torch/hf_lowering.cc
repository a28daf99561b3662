#include "torch/hf_lowering.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include "torch/encoder_lowering.h"

namespace ltserve::lowering {
namespace {

using torch::jit::Graph;
using torch::jit::Module;
using torch::jit::Node;
using torch::jit::Value;

enum class Family : std::uint8_t { kBert, kRoberta, kDistilBert };

struct BaseModelType {
  const char* type;
  const char* prefix;  // the modeling module: its layer classes must come from it
  Family family;
  const char* name;
};

constexpr BaseModelType kBaseModels[] = {
    {"__torch__.transformers.models.bert.modeling_bert.BertModel",
     "__torch__.transformers.models.bert.modeling_bert.", Family::kBert, "BertModel"},
    {"__torch__.transformers.models.roberta.modeling_roberta.RobertaModel",
     "__torch__.transformers.models.roberta.modeling_roberta.", Family::kRoberta, "RobertaModel"},
    {"__torch__.transformers.models.xlm_roberta.modeling_xlm_roberta.XLMRobertaModel",
     "__torch__.transformers.models.xlm_roberta.modeling_xlm_roberta.", Family::kRoberta,
     "XLMRobertaModel"},
    {"__torch__.transformers.models.distilbert.modeling_distilbert.DistilBertModel",
     "__torch__.transformers.models.distilbert.modeling_distilbert.", Family::kDistilBert,
     "DistilBertModel"},
};

constexpr char kLinear[] = "__torch__.torch.nn.modules.linear.Linear";
constexpr char kDropout[] = "__torch__.torch.nn.modules.dropout.Dropout";
constexpr char kLayerNorm[] = "__torch__.torch.nn.modules.normalization.LayerNorm";

const BaseModelType* BaseTypeOf(const Module& module) {
  const std::string type = ModuleTypeName(module);
  for (const BaseModelType& base : kBaseModels) {
    if (type == base.type) return &base;
  }
  return nullptr;
}

std::string Kind(const Node& node) { return node.kind().toQualString(); }

std::optional<c10::IValue> ConstantOf(const Value* value) { return torch::jit::toIValue(value); }

// A constant number: a double, an int, or a one-element tensor (how a trace records a Python
// float it multiplied a tensor by).
std::optional<double> NumberOf(const Value* value) {
  std::optional<c10::IValue> constant = ConstantOf(value);
  if (!constant) return std::nullopt;
  if (constant->isDouble()) return constant->toDouble();
  if (constant->isInt()) return static_cast<double>(constant->toInt());
  if (constant->isTensor() && constant->toTensor().numel() == 1) {
    return constant->toTensor().item<double>();
  }
  return std::nullopt;
}

std::optional<std::int64_t> IntOf(const Value* value) {
  std::optional<c10::IValue> constant = ConstantOf(value);
  if (!constant || !constant->isInt()) return std::nullopt;
  return constant->toInt();
}

// A constant int list, or a single int, as dims: aten::sum(x, [1]) and aten::max(x, 1). A
// trace builds the list with prim::ListConstruct of constants.
std::optional<std::vector<std::int64_t>> DimsOf(const Value* value) {
  if (value->node()->kind() == c10::prim::ListConstruct) {
    std::vector<std::int64_t> dims;
    for (const Value* element : value->node()->inputs()) {
      std::optional<c10::IValue> constant = ConstantOf(element);
      if (!constant || !constant->isInt()) return std::nullopt;
      dims.push_back(constant->toInt());
    }
    return dims;
  }
  std::optional<c10::IValue> constant = ConstantOf(value);
  if (!constant) return std::nullopt;
  if (constant->isInt()) return std::vector<std::int64_t>{constant->toInt()};
  if (constant->isIntList()) return constant->toIntVector();
  return std::nullopt;
}

bool IsFalse(const Value* value) {
  std::optional<c10::IValue> constant = ConstantOf(value);
  return constant && constant->isBool() && !constant->toBool();
}

bool IsNone(const Value* value) {
  std::optional<c10::IValue> constant = ConstantOf(value);
  return constant && constant->isNone();
}

Status NotLowered(const std::string& where, const std::string& why) {
  return Unimplemented("Hugging Face encoder '" + where + "': " + why);
}

std::string Join(const std::string& parent, const std::string& child) {
  return parent.empty() ? child : parent + "." + child;
}

Result<Module> Child(const Module& module, const std::string& name, const std::string& where) {
  if (!module.hasattr(name) || !module.attr(name).isObject()) {
    return NotLowered(where, "has no submodule '" + name + "'");
  }
  return module.attr(name).toModule();
}

Result<at::Tensor> Parameter(const Module& module, const std::string& name,
                             const std::string& where) {
  if (!module.hasattr(name) || !module.attr(name).isTensor()) {
    return NotLowered(where, "has no tensor '" + name + "'");
  }
  return module.attr(name).toTensor().detach();
}

std::optional<at::Tensor> OptionalParameter(const Module& module, const std::string& name) {
  if (!module.hasattr(name) || !module.attr(name).isTensor()) return std::nullopt;
  return module.attr(name).toTensor().detach();
}

std::shared_ptr<Graph> GraphOf(const Module& module) {
  return module.get_method("forward").graph();
}

Result<LinearStep> LinearOf(const Module& module, const std::string& where) {
  if (ModuleTypeName(module) != kLinear) return NotLowered(where, "is not an nn.Linear");
  LTSERVE_ASSIGN_OR_RETURN(at::Tensor weight, Parameter(module, "weight", where));
  if (weight.dim() != 2) return NotLowered(where, "has a weight that is not a matrix");
  return LinearStep{weight, OptionalParameter(module, "bias")};
}

// eps is an attribute of a scripted LayerNorm and a constant of a traced one's graph.
Result<LayerNormStep> NormOf(const Module& module, const std::string& where) {
  if (ModuleTypeName(module) != kLayerNorm) return NotLowered(where, "is not an nn.LayerNorm");
  std::optional<double> eps;
  if (module.hasattr("eps") && module.attr("eps").isDouble()) eps = module.attr("eps").toDouble();
  for (const Node* node : GraphOf(module)->nodes()) {
    if (!eps && Kind(*node) == "aten::layer_norm") eps = NumberOf(node->input(4));
  }
  if (!eps) return NotLowered(where, "has no constant eps");
  LayerNormStep step;
  step.gamma = OptionalParameter(module, "weight");
  step.beta = OptionalParameter(module, "bias");
  if (!step.gamma) return NotLowered(where, "has no weight");
  step.width = step.gamma->size(0);
  step.eps = *eps;
  return step;
}

// The FFN activation module: transformers' GELUActivation (erf or tanh by its constant),
// NewGELUActivation (the tanh form written out), or torch's ReLU / SiLU / GELU / Tanh.
Result<plan::Activation> ActivationOf(const Module& module, const std::string& where) {
  const std::string type = ModuleTypeName(module);
  if (type == "__torch__.transformers.activations.NewGELUActivation" ||
      type == "__torch__.transformers.activations.GELUTanh" ||
      type == "__torch__.transformers.activations.PytorchGELUTanh") {
    return plan::Activation::kGeluTanh;
  }
  std::optional<plan::Activation> found;
  int data_ops = 0;
  for (const Node* node : GraphOf(module)->nodes()) {
    const std::string kind = Kind(*node);
    if (node->kind() == c10::prim::Constant) continue;
    ++data_ops;
    if (kind == "aten::gelu") {
      std::optional<c10::IValue> mode = ConstantOf(node->input(1));
      const bool tanh = mode && mode->isString() && mode->toStringRef() == "tanh";
      found = tanh ? plan::Activation::kGeluTanh : plan::Activation::kGeluErf;
    } else if (kind == "aten::relu") {
      found = plan::Activation::kRelu;
    } else if (kind == "aten::silu") {
      found = plan::Activation::kSilu;
    } else if (kind == "aten::tanh") {
      found = plan::Activation::kTanh;
    }
  }
  if (!found || data_ops != 1) {
    return NotLowered(where, "its activation " + type + " is not gelu, gelu_new, relu or silu");
  }
  return *found;
}

// The one node of `graph` that calls child `name`'s forward.
const Node* CallOf(const Graph& graph, const std::string& name) {
  std::unordered_map<const Value*, std::string> children;
  for (const Node* node : graph.nodes()) {
    if (node->kind() == c10::prim::GetAttr) children[node->output()] = node->s(c10::attr::name);
    if (node->kind() == c10::prim::CallMethod && node->s(c10::attr::name) == "forward") {
      auto child = children.find(node->input(0));
      if (child != children.end() && child->second == name) return node;
    }
  }
  return nullptr;
}

// Heads and the attention's checks, from the self-attention module's graph: q is viewed as
// [batch, seq, -1, head_dim]; the attention is PyTorch's scaled_dot_product_attention or
// transformers' eager matmul-softmax-matmul, scaled by head_dim^-0.5, not causal, masked by the
// module's mask input when `masked`.
Result<std::int64_t> AttentionHeads(const Module& attention, const std::string& query_name,
                                    std::int64_t width, bool masked, const std::string& where) {
  const std::shared_ptr<Graph> graph = GraphOf(attention);
  const Node* query = CallOf(*graph, query_name);
  if (query == nullptr) return NotLowered(where, "does not call its " + query_name);
  std::optional<std::int64_t> head_dim;
  for (const torch::jit::Use& use : query->output()->uses()) {
    const std::string kind = Kind(*use.user);
    if (kind != "aten::view" && kind != "aten::reshape") continue;
    const Node* sizes = use.user->input(1)->node();
    if (sizes->kind() == c10::prim::ListConstruct && !sizes->inputs().empty()) {
      head_dim = IntOf(sizes->inputs().back());
    }
  }
  if (!head_dim || *head_dim < 1 || width % *head_dim != 0) {
    return NotLowered(where, "the head size is not found in the traced attention");
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(*head_dim));
  const auto near_scale = [&](std::optional<double> value) {
    return value && std::abs(*value - scale) <= 1e-6 * scale;
  };
  const Value* mask = graph->inputs().size() > 2 ? graph->inputs()[2] : nullptr;
  bool attends = false;
  bool scaled = false;
  bool uses_mask = false;
  for (const Node* node : graph->nodes()) {
    const std::string kind = Kind(*node);
    if (kind == "aten::scaled_dot_product_attention") {
      if (!IsFalse(node->input(5))) return NotLowered(where, "the attention is causal");
      scaled = IsNone(node->input(6)) || near_scale(NumberOf(node->input(6)));
      uses_mask = node->input(3) == mask && mask != nullptr;
      attends = true;
    } else if (kind == "aten::softmax") {
      attends = true;
    } else if (kind == "aten::mul" && near_scale(NumberOf(node->input(1)))) {
      scaled = true;
    } else if (kind == "aten::add" && mask != nullptr && node->input(1) == mask) {
      uses_mask = true;
    }
  }
  if (!attends || !scaled) {
    return NotLowered(where, "the traced attention is not softmax(q·kᵀ/√head_dim)·v");
  }
  if (masked && !uses_mask) {
    return NotLowered(where, "the traced attention does not use the attention mask (was the "
                             "model traced without one?)");
  }
  return width / *head_dim;
}

LinearStep PackedQkv(const LinearStep& q, const LinearStep& k, const LinearStep& v) {
  LinearStep packed;
  packed.weight = at::cat({q.weight, k.weight, v.weight}, 0);
  if (q.bias && k.bias && v.bias) packed.bias = at::cat({*q.bias, *k.bias, *v.bias}, 0);
  return packed;
}

// Children of `module` beyond `expected`: a sign of a variant (relative positions, a
// cross-attention) that the lowering does not know.
Status OnlyChildren(const Module& module, const std::set<std::string>& expected,
                    const std::string& where) {
  for (const torch::jit::NameModule& child : module.named_children()) {
    if (expected.count(child.name) == 0) {
      return NotLowered(Join(where, child.name), "is not part of the encoder layer the lowering "
                                                 "knows (relative positions? cross-attention?)");
    }
  }
  return Status::Ok();
}

Status FromModelingModule(const Module& module, const BaseModelType& base,
                          const std::string& where) {
  if (ModuleTypeName(module).rfind(base.prefix, 0) == 0) return Status::Ok();
  return NotLowered(where, "is a " + ModuleTypeName(module) + ", not transformers' own class "
                           "(a custom attention or layer is not lowered)");
}

Result<EncoderLayerStep> BertLayer(const Module& layer, const BaseModelType& base, bool masked,
                                   const std::string& where) {
  LTSERVE_RETURN_IF_ERROR(FromModelingModule(layer, base, where));
  LTSERVE_RETURN_IF_ERROR(OnlyChildren(layer, {"attention", "intermediate", "output"}, where));
  LTSERVE_ASSIGN_OR_RETURN(Module attention, Child(layer, "attention", where));
  LTSERVE_ASSIGN_OR_RETURN(Module self, Child(attention, "self", where));
  LTSERVE_ASSIGN_OR_RETURN(Module self_output, Child(attention, "output", where));
  LTSERVE_ASSIGN_OR_RETURN(Module intermediate, Child(layer, "intermediate", where));
  LTSERVE_ASSIGN_OR_RETURN(Module output, Child(layer, "output", where));
  const std::string self_where = Join(where, "attention.self");
  LTSERVE_RETURN_IF_ERROR(FromModelingModule(self, base, self_where));
  LTSERVE_RETURN_IF_ERROR(OnlyChildren(self, {"query", "key", "value", "dropout"}, self_where));
  LTSERVE_RETURN_IF_ERROR(OnlyChildren(attention, {"self", "output"}, Join(where, "attention")));
  EncoderLayerStep step;
  LTSERVE_ASSIGN_OR_RETURN(Module query, Child(self, "query", self_where));
  LTSERVE_ASSIGN_OR_RETURN(Module key, Child(self, "key", self_where));
  LTSERVE_ASSIGN_OR_RETURN(Module value, Child(self, "value", self_where));
  LTSERVE_ASSIGN_OR_RETURN(LinearStep q, LinearOf(query, Join(self_where, "query")));
  LTSERVE_ASSIGN_OR_RETURN(LinearStep k, LinearOf(key, Join(self_where, "key")));
  LTSERVE_ASSIGN_OR_RETURN(LinearStep v, LinearOf(value, Join(self_where, "value")));
  step.in_proj = PackedQkv(q, k, v);
  const std::int64_t width = q.weight.size(1);
  LTSERVE_ASSIGN_OR_RETURN(step.num_heads, AttentionHeads(self, "query", width, masked, self_where));
  const std::string out_where = Join(where, "attention.output");
  LTSERVE_ASSIGN_OR_RETURN(Module dense, Child(self_output, "dense", out_where));
  LTSERVE_ASSIGN_OR_RETURN(step.out_proj, LinearOf(dense, Join(out_where, "dense")));
  LTSERVE_ASSIGN_OR_RETURN(Module norm1, Child(self_output, "LayerNorm", out_where));
  LTSERVE_ASSIGN_OR_RETURN(step.norm1, NormOf(norm1, Join(out_where, "LayerNorm")));
  const std::string inter_where = Join(where, "intermediate");
  LTSERVE_ASSIGN_OR_RETURN(Module linear1, Child(intermediate, "dense", inter_where));
  LTSERVE_ASSIGN_OR_RETURN(step.linear1, LinearOf(linear1, Join(inter_where, "dense")));
  LTSERVE_ASSIGN_OR_RETURN(Module act, Child(intermediate, "intermediate_act_fn", inter_where));
  LTSERVE_ASSIGN_OR_RETURN(step.activation, ActivationOf(act, Join(inter_where, "intermediate_act_fn")));
  const std::string ffn_where = Join(where, "output");
  LTSERVE_ASSIGN_OR_RETURN(Module linear2, Child(output, "dense", ffn_where));
  LTSERVE_ASSIGN_OR_RETURN(step.linear2, LinearOf(linear2, Join(ffn_where, "dense")));
  LTSERVE_ASSIGN_OR_RETURN(Module norm2, Child(output, "LayerNorm", ffn_where));
  LTSERVE_ASSIGN_OR_RETURN(step.norm2, NormOf(norm2, Join(ffn_where, "LayerNorm")));
  step.norm_first = false;
  return step;
}

Result<EncoderLayerStep> DistilBertLayer(const Module& layer, const BaseModelType& base,
                                         bool masked, const std::string& where) {
  LTSERVE_RETURN_IF_ERROR(FromModelingModule(layer, base, where));
  LTSERVE_RETURN_IF_ERROR(OnlyChildren(
      layer, {"attention", "sa_layer_norm", "ffn", "output_layer_norm"}, where));
  LTSERVE_ASSIGN_OR_RETURN(Module attention, Child(layer, "attention", where));
  const std::string attn_where = Join(where, "attention");
  LTSERVE_RETURN_IF_ERROR(FromModelingModule(attention, base, attn_where));
  LTSERVE_RETURN_IF_ERROR(
      OnlyChildren(attention, {"q_lin", "k_lin", "v_lin", "out_lin", "dropout"}, attn_where));
  EncoderLayerStep step;
  std::array<LinearStep, 4> linears;
  const std::array<const char*, 4> names{"q_lin", "k_lin", "v_lin", "out_lin"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    LTSERVE_ASSIGN_OR_RETURN(Module linear, Child(attention, names[i], attn_where));
    LTSERVE_ASSIGN_OR_RETURN(linears[i], LinearOf(linear, Join(attn_where, names[i])));
  }
  step.in_proj = PackedQkv(linears[0], linears[1], linears[2]);
  step.out_proj = linears[3];
  const std::int64_t width = linears[0].weight.size(1);
  LTSERVE_ASSIGN_OR_RETURN(step.num_heads, AttentionHeads(attention, "q_lin", width, masked, attn_where));
  LTSERVE_ASSIGN_OR_RETURN(Module norm1, Child(layer, "sa_layer_norm", where));
  LTSERVE_ASSIGN_OR_RETURN(step.norm1, NormOf(norm1, Join(where, "sa_layer_norm")));
  LTSERVE_ASSIGN_OR_RETURN(Module ffn, Child(layer, "ffn", where));
  const std::string ffn_where = Join(where, "ffn");
  LTSERVE_ASSIGN_OR_RETURN(Module lin1, Child(ffn, "lin1", ffn_where));
  LTSERVE_ASSIGN_OR_RETURN(step.linear1, LinearOf(lin1, Join(ffn_where, "lin1")));
  LTSERVE_ASSIGN_OR_RETURN(Module lin2, Child(ffn, "lin2", ffn_where));
  LTSERVE_ASSIGN_OR_RETURN(step.linear2, LinearOf(lin2, Join(ffn_where, "lin2")));
  LTSERVE_ASSIGN_OR_RETURN(Module act, Child(ffn, "activation", ffn_where));
  LTSERVE_ASSIGN_OR_RETURN(step.activation, ActivationOf(act, Join(ffn_where, "activation")));
  LTSERVE_ASSIGN_OR_RETURN(Module norm2, Child(layer, "output_layer_norm", where));
  LTSERVE_ASSIGN_OR_RETURN(step.norm2, NormOf(norm2, Join(where, "output_layer_norm")));
  step.norm_first = false;
  return step;
}

// What the base model's forward does with its inputs and what it returns.
struct BaseModel {
  const BaseModelType* type = nullptr;
  std::vector<Step> encoder_steps;  // EmbeddingStep + layers
  std::optional<std::vector<Step>> pooler_steps;  // BERT's tanh pooler, when it has one
  // Role of each input of the base forward graph (self excluded).
  enum class Role : std::uint8_t { kIds, kTypes, kMask };
  std::vector<Role> roles;
  // What the base graph returns: the hidden states, the pooler's output, or a tuple/dict.
  enum class Output : std::uint8_t { kHidden, kPooler };
  std::vector<Output> outputs;
  std::vector<std::string> output_keys;  // a dict's keys, else empty
  bool returns_tuple = false;
  std::int64_t max_sequence_length = 0;
};

// Values reachable from `from` through the graph's nodes (data flow, not through calls'
// results other than the call itself).
std::set<const Value*> Reachable(const Graph& graph, const Value* from) {
  std::set<const Value*> reached{from};
  for (const Node* node : graph.nodes()) {
    bool hit = false;
    for (const Value* input : node->inputs()) hit |= reached.count(input) > 0;
    if (!hit) continue;
    for (const Value* output : node->outputs()) reached.insert(output);
  }
  return reached;
}

Result<EmbeddingStep> Embeddings(const Module& embeddings, const BaseModelType& base,
                                 const std::string& where) {
  LTSERVE_RETURN_IF_ERROR(FromModelingModule(embeddings, base, where));
  EmbeddingStep step;
  LTSERVE_ASSIGN_OR_RETURN(Module word, Child(embeddings, "word_embeddings", where));
  LTSERVE_ASSIGN_OR_RETURN(step.word, Parameter(word, "weight", Join(where, "word_embeddings")));
  LTSERVE_ASSIGN_OR_RETURN(Module position, Child(embeddings, "position_embeddings", where));
  LTSERVE_ASSIGN_OR_RETURN(step.position,
                           Parameter(position, "weight", Join(where, "position_embeddings")));
  if (embeddings.hasattr("token_type_embeddings") &&
      embeddings.attr("token_type_embeddings").isObject()) {
    LTSERVE_ASSIGN_OR_RETURN(
        step.token_type, Parameter(embeddings.attr("token_type_embeddings").toModule(), "weight",
                                   Join(where, "token_type_embeddings")));
  }
  LTSERVE_ASSIGN_OR_RETURN(Module norm, Child(embeddings, "LayerNorm", where));
  LTSERVE_ASSIGN_OR_RETURN(step.norm, NormOf(norm, Join(where, "LayerNorm")));
  if (base.family == Family::kRoberta) {
    // create_position_ids_from_input_ids: input_ids.ne(padding_idx), a constant of the trace.
    std::optional<std::int64_t> padding;
    for (const Node* node : GraphOf(embeddings)->nodes()) {
      if (Kind(*node) == "aten::ne" && node->input(0) == GraphOf(embeddings)->inputs()[1]) {
        padding = IntOf(node->input(1));
      }
    }
    if (!padding || *padding < 0) {
      return NotLowered(where, "the padding index is not found (positions from input_ids.ne)");
    }
    step.positions = plan::PositionRule::kAfterPadding;
    step.padding_id = *padding;
  }
  const std::int64_t width = step.word.size(1);
  if (step.position.size(1) != width || (step.token_type && step.token_type->size(1) != width) ||
      step.norm.width != width) {
    return NotLowered(where, "its tables and norm disagree on the width");
  }
  return step;
}

// The base model's inputs: those its embeddings call takes are ids (to word_embeddings) or
// token types (to token_type_embeddings); any other must reach the encoder's mask argument.
Result<std::vector<BaseModel::Role>> InputRoles(const Module& model, const Module& embeddings,
                                                const std::string& encoder_name,
                                                const std::string& where) {
  const std::shared_ptr<Graph> graph = GraphOf(model);
  const Node* embed_call = CallOf(*graph, "embeddings");
  const Node* encoder_call = CallOf(*graph, encoder_name);
  if (embed_call == nullptr || encoder_call == nullptr || encoder_call->inputs().size() < 2 ||
      encoder_call->input(1) != embed_call->output()) {
    return NotLowered(where, "its forward does not run the embeddings into the " + encoder_name);
  }
  const std::shared_ptr<Graph> embed_graph = GraphOf(embeddings);
  const Node* word_call = CallOf(*embed_graph, "word_embeddings");
  const Node* type_call = CallOf(*embed_graph, "token_type_embeddings");
  std::vector<BaseModel::Role> roles;
  for (std::size_t i = 1; i < graph->inputs().size(); ++i) {
    const Value* input = graph->inputs()[i];
    std::optional<std::size_t> embed_argument;
    for (std::size_t a = 1; a < embed_call->inputs().size(); ++a) {
      if (embed_call->input(a) == input) embed_argument = a;
    }
    if (embed_argument) {
      const Value* inside = embed_graph->inputs().at(*embed_argument);
      if (word_call != nullptr && word_call->input(1) == inside) {
        roles.push_back(BaseModel::Role::kIds);
      } else if (type_call != nullptr && type_call->input(1) == inside) {
        roles.push_back(BaseModel::Role::kTypes);
      } else {
        return NotLowered(where, "forward input " + std::to_string(i - 1) +
                                     " reaches the embeddings, but neither as ids nor as token "
                                     "types (inputs_embeds or position_ids are not lowered)");
      }
      continue;
    }
    const std::set<const Value*> reached = Reachable(*graph, input);
    if (encoder_call->inputs().size() > 2 && reached.count(encoder_call->input(2)) > 0) {
      roles.push_back(BaseModel::Role::kMask);
      continue;
    }
    return NotLowered(where, "forward input " + std::to_string(i - 1) +
                                 " is neither ids, token types nor the attention mask");
  }
  if (std::count(roles.begin(), roles.end(), BaseModel::Role::kIds) != 1) {
    return NotLowered(where, "its forward does not take one input of token ids");
  }
  return roles;
}

Result<BaseModel> ReadBaseModel(const Module& model, const BaseModelType& type,
                                const std::string& where) {
  BaseModel base;
  base.type = &type;
  const bool distil = type.family == Family::kDistilBert;
  const std::string encoder_name = distil ? "transformer" : "encoder";
  LTSERVE_ASSIGN_OR_RETURN(Module embeddings, Child(model, "embeddings", where));
  LTSERVE_ASSIGN_OR_RETURN(base.roles,
                           InputRoles(model, embeddings, encoder_name, where));
  const bool masked =
      std::find(base.roles.begin(), base.roles.end(), BaseModel::Role::kMask) != base.roles.end();
  LTSERVE_ASSIGN_OR_RETURN(EmbeddingStep embedding,
                           Embeddings(embeddings, type, Join(where, "embeddings")));
  base.max_sequence_length = embedding.position.size(0);
  if (embedding.positions == plan::PositionRule::kAfterPadding) {
    base.max_sequence_length -= embedding.padding_id + 1;
  }
  base.encoder_steps.push_back(std::move(embedding));
  LTSERVE_ASSIGN_OR_RETURN(Module encoder, Child(model, encoder_name, where));
  const std::string encoder_where = Join(where, encoder_name);
  LTSERVE_ASSIGN_OR_RETURN(Module layers, Child(encoder, "layer", encoder_where));
  for (const torch::jit::NameModule& layer : layers.named_children()) {
    const std::string layer_where = Join(encoder_where, "layer." + layer.name);
    Result<EncoderLayerStep> step = distil ? DistilBertLayer(layer.value, type, masked, layer_where)
                                           : BertLayer(layer.value, type, masked, layer_where);
    if (!step.ok()) return step.status();
    base.encoder_steps.push_back(std::move(step).value());
  }
  if (base.encoder_steps.size() < 2) return NotLowered(encoder_where, "has no layers");

  const std::shared_ptr<Graph> graph = GraphOf(model);
  const Node* encoder_call = CallOf(*graph, encoder_name);
  const Node* pooler_call = CallOf(*graph, "pooler");
  if (pooler_call != nullptr) {
    LTSERVE_ASSIGN_OR_RETURN(Module pooler, Child(model, "pooler", where));
    LTSERVE_ASSIGN_OR_RETURN(Module dense, Child(pooler, "dense", Join(where, "pooler")));
    LTSERVE_ASSIGN_OR_RETURN(LinearStep linear, LinearOf(dense, Join(where, "pooler.dense")));
    LTSERVE_RETURN_IF_ERROR(FromModelingModule(pooler, type, Join(where, "pooler")));
    base.pooler_steps = std::vector<Step>{PoolStep{plan::Pooling::kFirst, 0.0f}, linear,
                                          ActivationStep{plan::Activation::kTanh}};
  }
  // The returned value: hidden states, the pooler's output, or a tuple/dict of them.
  const Value* returned = graph->outputs().at(0);
  std::vector<const Value*> elements{returned};
  const Node* producer = returned->node();
  if (producer->kind() == c10::prim::TupleConstruct) {
    elements.assign(producer->inputs().begin(), producer->inputs().end());
    base.returns_tuple = true;
  } else if (producer->kind() == c10::prim::DictConstruct) {
    elements.clear();
    for (std::size_t i = 0; i + 1 < producer->inputs().size(); i += 2) {
      std::optional<c10::IValue> key = ConstantOf(producer->input(i));
      base.output_keys.push_back(key && key->isString() ? key->toStringRef() : "");
      elements.push_back(producer->input(i + 1));
    }
    base.returns_tuple = true;
  }
  for (const Value* element : elements) {
    if (element == encoder_call->output()) {
      base.outputs.push_back(BaseModel::Output::kHidden);
    } else if (pooler_call != nullptr && element == pooler_call->output()) {
      base.outputs.push_back(BaseModel::Output::kPooler);
    } else {
      return NotLowered(where, "returns something other than the hidden states or the pooler's "
                               "output (hidden states of every layer, attentions?)");
    }
  }
  return base;
}

// What a value of the interpreted graph is.
enum class What : std::uint8_t {
  kOpaque,        // constants, sizes, shape lists: not on the data path
  kModule,        // a submodule (GetAttr)
  kInput,         // forward argument `index`
  kMaskValues,    // the mask converted to another dtype, still [batch, seq]
  kTokens,        // token rows: the latest step's output, before pooling
  kSequences,     // one row per sequence: the latest step's output, after pooling
  kBaseTuple,     // the base model's tuple or dict
  kMaskColumn,    // the mask, [batch, seq, 1] or broadcast to [batch, seq, d], any dtype
  kMaskedTokens,  // tokens x mask
  kTokenSum,      // sum over seq of masked tokens
  kTokenCount,    // sum over seq of the mask (clamped)
  kPadding,       // mask == 0
  kFilledTokens,  // tokens with padding filled by `number`
  kMaxPair,       // (values, indices) of max over seq of filled tokens
  kNorm,          // the L2 norm of the latest sequence rows, clamped at `number`
  kTuple,         // a tuple or dict the graph built
};

struct Abstract {
  What what = What::kOpaque;
  std::size_t index = 0;  // kInput: the argument; kTokens, kSequences & co: the step count
  double number = 0.0;
  std::optional<Module> module;
  std::vector<Abstract> elements;  // kTuple, kBaseTuple
  std::vector<std::string> keys;   // dict keys
};

// Interprets a wrapper's forward graph (and its submodules' graphs) over Abstract values,
// appending the steps it finds.
class Interpreter {
 public:
  explicit Interpreter(HfEncoder* result) : result_(result) {}

  // `arguments`: the graph's inputs after self.
  Result<Abstract> Run(const Module& module, const std::vector<Abstract>& arguments,
                       const std::string& where) {
    const std::shared_ptr<Graph> graph = GraphOf(module);
    if (graph->inputs().size() != arguments.size() + 1) {
      return NotLowered(where, "is called with " + std::to_string(arguments.size()) +
                                   " arguments; its forward takes " +
                                   std::to_string(graph->inputs().size() - 1));
    }
    std::unordered_map<const Value*, Abstract> values;
    Abstract self;
    self.what = What::kModule;
    self.module = module;
    values[graph->inputs()[0]] = self;
    for (std::size_t i = 0; i < arguments.size(); ++i) values[graph->inputs()[i + 1]] = arguments[i];
    for (const Node* node : graph->nodes()) {
      LTSERVE_RETURN_IF_ERROR(Visit(*node, values, where));
    }
    return values[graph->outputs().at(0)];
  }

  // The module is the encoder itself: its outputs are the forward's.
  Result<Abstract> RunBase(const Module& module, const BaseModelType& type,
                           const std::vector<Abstract>& arguments) {
    LTSERVE_ASSIGN_OR_RETURN(Abstract out, CallBase(module, type, arguments, type.name));
    if (out.what == What::kBaseTuple && base_->outputs.size() == 1) return Element(0);
    return out;
  }

  std::size_t steps() const { return result_->steps.size(); }

  Result<const BaseModel*> base() const {
    if (!base_) return Unimplemented("the forward does not call a Hugging Face encoder");
    return &*base_;
  }

 private:
  using Values = std::unordered_map<const Value*, Abstract>;

  Abstract Latest(What what) const {
    Abstract value;
    value.what = what;
    value.index = steps();
    return value;
  }

  // `value` is the latest step's output of kind `what` (the steps form a chain).
  bool IsLatest(const Abstract& value, What what) const {
    return value.what == what && value.index == steps();
  }

  Status Append(Step step) {
    result_->steps.push_back(std::move(step));
    return Status::Ok();
  }

  Status Visit(const Node& node, Values& values, const std::string& where) {
    if (node.kind() == c10::prim::Constant) return Status::Ok();
    std::vector<Abstract> in;
    bool tracked = false;
    for (const Value* input : node.inputs()) {
      in.push_back(values.count(input) ? values[input] : Abstract{});
      tracked |= in.back().what != What::kOpaque && in.back().what != What::kModule;
    }
    if (node.kind() == c10::prim::GetAttr) {
      if (in[0].what == What::kModule && in[0].module->hasattr(node.s(c10::attr::name)) &&
          in[0].module->attr(node.s(c10::attr::name)).isObject()) {
        Abstract child;
        child.what = What::kModule;
        child.module = in[0].module->attr(node.s(c10::attr::name)).toModule();
        child.keys = {Join(where, node.s(c10::attr::name))};
        values[node.output()] = child;
      }
      return Status::Ok();  // a parameter or buffer: not on the data path of a wrapper
    }
    if (node.kind() == c10::prim::CallMethod) return Call(node, in, values);
    if (!tracked) return Status::Ok();  // shape arithmetic
    Result<Abstract> out = Op(node, in);
    if (!out.ok()) {
      return NotLowered(where, "does " + Kind(node) + " on the encoder's values: " +
                                   out.status().message());
    }
    if (node.outputs().size() == 1) {
      values[node.output()] = std::move(out).value();
      return Status::Ok();
    }
    // max over the sequence: (values, indices); the indices are not lowered (opaque, so a
    // forward that returns them is refused at the end).
    if (out->what == What::kMaxPair && node.outputs().size() == 2) {
      LTSERVE_ASSIGN_OR_RETURN(Abstract pair, MaxPair(*out));
      values[node.outputs()[0]] = pair.elements[0];
      return Status::Ok();
    }
    // TupleUnpack of a tuple the graph tracked.
    if (node.kind() == c10::prim::TupleUnpack && out->what == What::kTuple &&
        out->elements.size() == node.outputs().size()) {
      for (std::size_t i = 0; i < node.outputs().size(); ++i) {
        values[node.outputs()[i]] = out->elements[i];
      }
      return Status::Ok();
    }
    return NotLowered(where, Kind(node) + " has several outputs");
  }

  Status Call(const Node& node, const std::vector<Abstract>& in, Values& values) {
    if (in[0].what != What::kModule) return Unimplemented("a method call on a non-module");
    const Module& module = *in[0].module;
    const std::string where = in[0].keys.empty() ? "" : in[0].keys[0];
    const std::vector<Abstract> arguments(in.begin() + 1, in.end());
    const std::string type = ModuleTypeName(module);
    Abstract result;
    if (const BaseModelType* base_type = BaseTypeOf(module)) {
      LTSERVE_ASSIGN_OR_RETURN(result, CallBase(module, *base_type, arguments, where));
    } else if (arguments.size() == 1 && (IsLatest(arguments[0], What::kTokens) ||
                                         IsLatest(arguments[0], What::kSequences))) {
      const What rows = arguments[0].what;
      if (type == kDropout) {
        result = arguments[0];
      } else if (type == kLinear) {
        LTSERVE_ASSIGN_OR_RETURN(LinearStep linear, LinearOf(module, where));
        LTSERVE_RETURN_IF_ERROR(Append(linear));
        result = Latest(rows);
      } else if (type == kLayerNorm) {
        LTSERVE_ASSIGN_OR_RETURN(LayerNormStep norm, NormOf(module, where));
        LTSERVE_RETURN_IF_ERROR(Append(norm));
        result = Latest(rows);
      } else if (type.rfind("__torch__.torch.nn.modules.activation.", 0) == 0 ||
                 type.rfind("__torch__.transformers.activations.", 0) == 0) {
        LTSERVE_ASSIGN_OR_RETURN(plan::Activation activation, ActivationOf(module, where));
        LTSERVE_RETURN_IF_ERROR(Append(ActivationStep{activation}));
        result = Latest(rows);
      } else {
        LTSERVE_ASSIGN_OR_RETURN(result, Run(module, arguments, where));
      }
    } else {
      // A custom submodule (a pooling module, a head): its own graph, over the same values.
      LTSERVE_ASSIGN_OR_RETURN(result, Run(module, arguments, where));
    }
    values[node.output()] = std::move(result);
    return Status::Ok();
  }

  Result<Abstract> CallBase(const Module& module, const BaseModelType& type,
                            const std::vector<Abstract>& arguments, const std::string& where) {
    if (base_) return NotLowered(where, "is a second encoder in one forward");
    LTSERVE_ASSIGN_OR_RETURN(BaseModel base,
                             ReadBaseModel(module, type, where.empty() ? type.name : where));
    if (arguments.size() != base.roles.size()) {
      return NotLowered(where, "is called with " + std::to_string(arguments.size()) +
                                   " tensors for " + std::to_string(base.roles.size()) + " inputs");
    }
    for (std::size_t i = 0; i < arguments.size(); ++i) {
      if (arguments[i].what != What::kInput) {
        return NotLowered(where, "takes a computed tensor as input " + std::to_string(i) +
                                     "; the forward's own inputs must reach it unchanged");
      }
      const std::size_t argument = arguments[i].index;
      switch (base.roles[i]) {
        case BaseModel::Role::kIds: result_->ids_argument = argument; break;
        case BaseModel::Role::kTypes: result_->type_argument = argument; break;
        case BaseModel::Role::kMask: result_->mask_argument = argument; break;
      }
    }
    for (Step& step : base.encoder_steps) LTSERVE_RETURN_IF_ERROR(Append(std::move(step)));
    base.encoder_steps.clear();
    result_->max_sequence_length = base.max_sequence_length;
    result_->architecture = type.name;
    base_ = std::move(base);
    // The hidden states are the latest steps' output; the pooler's output is computed when
    // used (PooledOutput), so a wrapper that uses only the hidden states skips it.
    if (!base_->returns_tuple) return Element(0);
    Abstract tuple;
    tuple.what = What::kBaseTuple;
    tuple.index = steps();
    tuple.keys = base_->output_keys;
    return tuple;
  }

  // Element `i` of the base model's output.
  Result<Abstract> Element(std::size_t i) {
    if (i >= base_->outputs.size()) return Unimplemented("an output the encoder does not return");
    if (base_->outputs[i] == BaseModel::Output::kHidden) return Latest(What::kTokens);
    if (!base_->pooler_steps) return Unimplemented("the encoder has no pooler");
    for (Step& step : *base_->pooler_steps) LTSERVE_RETURN_IF_ERROR(Append(std::move(step)));
    base_->pooler_steps.reset();
    result_->first_token_pooling = true;
    return Latest(What::kSequences);
  }

  bool IsMask(const Abstract& value) const {
    return (value.what == What::kInput && result_->mask_argument == value.index) ||
           value.what == What::kMaskValues;
  }
  bool IsMaskLike(const Abstract& value) const {
    return IsMask(value) || value.what == What::kMaskColumn;
  }

  Result<Abstract> Op(const Node& node, const std::vector<Abstract>& in) {
    const std::string kind = Kind(node);
    auto with = [](What what, std::size_t index = 0, double number = 0) {
      Abstract value;
      value.what = what;
      value.index = index;
      value.number = number;
      return value;
    };
    const Abstract& x = in[0];
    // Identities on the data path.
    if (kind == "aten::contiguous" || (kind == "aten::dropout" && IsFalse(node.input(2))) ||
        kind == "aten::detach") {
      return x;
    }
    if ((kind == "aten::to" || kind == "aten::type_as" || kind == "aten::float") &&
        (IsMaskLike(x) || x.what == What::kTokenCount)) {
      return IsMask(x) ? with(What::kMaskValues) : x;
    }
    if (kind == "prim::TupleIndex" || kind == "aten::__getitem__") {
      return Index(node, x);
    }
    if (kind == "prim::TupleUnpack") {
      if (x.what == What::kBaseTuple) {
        Abstract tuple = with(What::kTuple);
        for (std::size_t i = 0; i < base_->outputs.size(); ++i) {
          LTSERVE_ASSIGN_OR_RETURN(Abstract element, Element(i));
          tuple.elements.push_back(element);
        }
        return tuple;
      }
      if (x.what == What::kTuple || x.what == What::kMaxPair) {
        if (x.what == What::kMaxPair) return MaxPair(x);
        return x;
      }
    }
    if (kind == "prim::TupleConstruct" || kind == "prim::DictConstruct") {
      Abstract tuple = with(What::kTuple);
      for (std::size_t i = kind == "prim::DictConstruct" ? 1 : 0; i < in.size();
           i += kind == "prim::DictConstruct" ? 2 : 1) {
        tuple.elements.push_back(in[i]);
      }
      return tuple;
    }
    // The mask made a column over the hidden size.
    if (kind == "aten::unsqueeze" && IsMaskLike(x)) {
      const std::optional<std::int64_t> dim = IntOf(node.input(1));
      if (dim && (*dim == -1 || *dim == 2)) return with(What::kMaskColumn);
    }
    if (kind == "aten::unsqueeze" && x.what == What::kTokenCount) return x;
    if ((kind == "aten::expand" || kind == "aten::expand_as") && x.what == What::kMaskColumn) {
      return x;
    }
    if (kind == "aten::expand_as" && x.what == What::kNorm) return x;
    if (kind == "aten::mul") {
      const Abstract* tokens = IsLatest(x, What::kTokens) ? &x : IsLatest(in[1], What::kTokens) ? &in[1] : nullptr;
      const Abstract& other = tokens == &x ? in[1] : x;
      if (tokens != nullptr && other.what == What::kMaskColumn) {
        return with(What::kMaskedTokens, steps());
      }
    }
    if (kind == "aten::sum") {
      const std::optional<std::vector<std::int64_t>> dims = DimsOf(node.input(1));
      const bool over_seq = dims && dims->size() == 1 && (*dims)[0] == 1;
      if (over_seq && x.what == What::kMaskedTokens && x.index == steps() && IsFalse(node.input(2))) {
        return with(What::kTokenSum, steps());
      }
      if (over_seq && (x.what == What::kMaskColumn || IsMask(x))) return with(What::kTokenCount);
    }
    if ((kind == "aten::clamp" || kind == "aten::clamp_min") && x.what == What::kTokenCount) {
      // A count of real tokens is 0 or >= 1: a clamp at a minimum of at most 1 only turns
      // 0/0 into 0/min, which the mean pooling answers as 0 too.
      const std::optional<double> low = NumberOf(node.input(1));
      if (low && *low > 0 && *low <= 1 && (kind == "aten::clamp_min" || IsNone(node.input(2)))) {
        return x;
      }
    }
    if ((kind == "aten::clamp" || kind == "aten::clamp_min") && x.what == What::kNorm) {
      const std::optional<double> low = NumberOf(node.input(1));
      if (low && *low >= 0 && (kind == "aten::clamp_min" || IsNone(node.input(2)))) {
        return with(What::kNorm, x.index, *low);
      }
    }
    if (kind == "aten::div") {
      if (x.what == What::kTokenSum && x.index == steps() && in[1].what == What::kTokenCount) {
        LTSERVE_RETURN_IF_ERROR(Append(PoolStep{plan::Pooling::kMean, 0.0f}));
        return Latest(What::kSequences);
      }
      if (IsLatest(x, What::kSequences) && in[1].what == What::kNorm && in[1].index == steps()) {
        LTSERVE_RETURN_IF_ERROR(Append(L2NormalizeStep{in[1].number}));
        return Latest(What::kSequences);
      }
    }
    if ((kind == "aten::norm" || kind == "aten::linalg_vector_norm") &&
        IsLatest(x, What::kSequences)) {
      const std::optional<double> p = NumberOf(node.input(1));
      const std::optional<std::vector<std::int64_t>> dims = DimsOf(node.input(2));
      const bool last = dims && dims->size() == 1 && ((*dims)[0] == 1 || (*dims)[0] == -1);
      if (p && *p == 2 && last) return with(What::kNorm, steps(), 0.0);
    }
    if (kind == "aten::eq" && x.what == What::kMaskColumn) {
      const std::optional<double> zero = NumberOf(node.input(1));
      if (zero && *zero == 0) return with(What::kPadding);
    }
    if ((kind == "aten::masked_fill" || kind == "aten::masked_fill_") &&
        IsLatest(x, What::kTokens) && in[1].what == What::kPadding) {
      const std::optional<double> fill = NumberOf(node.input(2));
      if (fill) return with(What::kFilledTokens, steps(), *fill);
    }
    if ((kind == "aten::max" || kind == "aten::amax") && x.what == What::kFilledTokens &&
        x.index == steps()) {
      const std::optional<std::vector<std::int64_t>> dims = DimsOf(node.input(1));
      if (dims && dims->size() == 1 && (*dims)[0] == 1) {
        if (kind == "aten::amax") {
          LTSERVE_RETURN_IF_ERROR(Append(PoolStep{plan::Pooling::kMax, static_cast<float>(x.number)}));
          return Latest(What::kSequences);
        }
        return with(What::kMaxPair, steps(), x.number);
      }
    }
    if (kind == "aten::slice" && IsLatest(x, What::kTokens)) {
      // x[:, ...]: a slice of the whole batch dimension changes nothing.
      const std::optional<std::int64_t> dim = IntOf(node.input(1));
      const std::optional<std::int64_t> start = IntOf(node.input(2));
      const std::optional<std::int64_t> end = IntOf(node.input(3));
      const std::optional<std::int64_t> step = IntOf(node.input(4));
      if (dim == 0 && start == 0 && end && *end >= std::numeric_limits<std::int32_t>::max() &&
          step == 1) {
        return x;
      }
    }
    if (kind == "aten::select" && IsLatest(x, What::kTokens)) {
      const std::optional<std::int64_t> dim = IntOf(node.input(1));
      const std::optional<std::int64_t> index = IntOf(node.input(2));
      if (dim == 1 && index == 0) {
        LTSERVE_RETURN_IF_ERROR(Append(PoolStep{plan::Pooling::kFirst, 0.0f}));
        result_->first_token_pooling = true;
        return Latest(What::kSequences);
      }
    }
    if (kind == "aten::tanh" || kind == "aten::relu" || kind == "aten::gelu" ||
        kind == "aten::sigmoid") {
      if (IsLatest(x, What::kTokens) || IsLatest(x, What::kSequences)) {
        plan::Activation activation = kind == "aten::tanh"    ? plan::Activation::kTanh
                                      : kind == "aten::relu"  ? plan::Activation::kRelu
                                      : kind == "aten::sigmoid" ? plan::Activation::kSigmoid
                                                                : plan::Activation::kGeluErf;
        if (kind == "aten::gelu") {
          std::optional<c10::IValue> mode = ConstantOf(node.input(1));
          if (mode && mode->isString() && mode->toStringRef() == "tanh") {
            activation = plan::Activation::kGeluTanh;
          }
        }
        const What rows = x.what;
        LTSERVE_RETURN_IF_ERROR(Append(ActivationStep{activation}));
        return Latest(rows);
      }
    }
    if (kind == "aten::size") return Abstract{};
    return Unimplemented("not a pattern ltserve lowers (CLS, mean or max pooling over the "
                         "attention mask, Linear heads, LayerNorm, activations, L2 "
                         "normalisation)");
  }

  Result<Abstract> MaxPair(const Abstract& pair) {
    LTSERVE_RETURN_IF_ERROR(Append(PoolStep{plan::Pooling::kMax, static_cast<float>(pair.number)}));
    Abstract tuple;
    tuple.what = What::kTuple;
    tuple.elements = {Latest(What::kSequences), Abstract{}};
    return tuple;
  }

  Result<Abstract> Index(const Node& node, const Abstract& x) {
    std::optional<c10::IValue> key = ConstantOf(node.input(1));
    if (!key) return Unimplemented("an index that is not a constant");
    if (x.what == What::kMaxPair && key->isInt() && key->toInt() == 0) {
      LTSERVE_ASSIGN_OR_RETURN(Abstract tuple, MaxPair(x));
      return tuple.elements[0];
    }
    if (x.what == What::kBaseTuple) {
      std::optional<std::size_t> i;
      if (key->isInt() && key->toInt() >= 0) i = static_cast<std::size_t>(key->toInt());
      if (key->isString()) {
        for (std::size_t k = 0; k < x.keys.size(); ++k) {
          if (x.keys[k] == key->toStringRef()) i = k;
        }
      }
      if (!i) return Unimplemented("an output the encoder does not return");
      if (x.index != steps() && base_->outputs.at(*i) == BaseModel::Output::kHidden) {
        return Unimplemented("the hidden states are used after other steps");
      }
      return Element(*i);
    }
    if (x.what == What::kTuple && key->isInt() && key->toInt() >= 0 &&
        static_cast<std::size_t>(key->toInt()) < x.elements.size()) {
      return x.elements[static_cast<std::size_t>(key->toInt())];
    }
    return Unimplemented("an index into a value that is not the encoder's output");
  }

  HfEncoder* result_;
  std::optional<BaseModel> base_;
};

// The forward argument count of a module, self excluded.
std::size_t Arguments(const Module& module) {
  const std::shared_ptr<Graph> graph = GraphOf(module);
  return graph->inputs().empty() ? 0 : graph->inputs().size() - 1;
}

bool Holds(const Module& module, int depth) {
  if (BaseTypeOf(module) != nullptr) return true;
  if (depth == 0) return false;
  for (const Module& child : module.children()) {
    if (Holds(child, depth - 1)) return true;
  }
  return false;
}

}  // namespace

bool HoldsHfEncoder(const Module& module) {
  // A wrapper holds the encoder a few levels down at most (sentence-transformers: two).
  constexpr int kDepth = 3;
  return Holds(module, kDepth);
}

Result<HfEncoder> LowerHfEncoder(const Module& module) {
  if (!module.find_method("forward")) return Unimplemented("the module has no forward");
  HfEncoder encoder;
  encoder.forward_arguments = Arguments(module);
  Interpreter interpreter(&encoder);
  std::vector<Abstract> arguments(encoder.forward_arguments);
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    arguments[i].what = What::kInput;
    arguments[i].index = i;
  }
  const BaseModelType* type = BaseTypeOf(module);
  Result<Abstract> result = type != nullptr ? interpreter.RunBase(module, *type, arguments)
                                            : interpreter.Run(module, arguments, "");
  if (!result.ok()) return result.status();
  LTSERVE_RETURN_IF_ERROR(interpreter.base().status());
  Abstract output = std::move(result).value();
  if (output.what == What::kTuple && output.elements.size() == 1) output = output.elements[0];
  if (output.what == What::kBaseTuple) {
    return Unimplemented("the forward returns the encoder's " + std::to_string(output.keys.size()) +
                         " outputs; a plan has one (return last_hidden_state, a pooled "
                         "vector or logits)");
  }
  const bool latest = output.index == interpreter.steps();
  if (!latest || (output.what != What::kTokens && output.what != What::kSequences)) {
    return Unimplemented("the forward does not return the hidden states or a value computed "
                         "from them by the last step");
  }
  encoder.pooled = output.what == What::kSequences;
  return encoder;
}

}  // namespace ltserve::lowering
