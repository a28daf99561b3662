#include "torch/lowering.h"

#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/inliner.h>

#include <algorithm>
#include <string>
#include <utility>

#include "torch/aten_util.h"
#include "torch/chain_walker.h"
#include "torch/encoder_lowering.h"

namespace ltserve::lowering {
namespace {

// Freezing folds every parameter and attribute (training=False included) into constants,
// which is what lets the walker read a traced and a scripted module alike.
Result<std::shared_ptr<torch::jit::Graph>> FrozenForward(const torch::jit::Module& module) {
  try {
    torch::jit::Module copy = module.clone();
    copy.eval();
    torch::jit::Module frozen = torch::jit::freeze_module(copy);
    std::shared_ptr<torch::jit::Graph> graph = frozen.get_method("forward").graph()->copy();
    torch::jit::Inline(*graph);
    torch::jit::ConstantPropagation(graph);
    torch::jit::EliminateDeadCode(graph);
    return graph;
  } catch (const std::exception& error) {
    return Unimplemented("the module could not be frozen: " + aten::ExceptionMessage(error));
  }
}

std::vector<float> ToFloats(const at::Tensor& tensor) {
  const at::Tensor values = tensor.detach().to(at::kFloat).contiguous();
  const float* data = values.data_ptr<float>();
  return std::vector<float>(data, data + values.numel());
}

// The executors fuse these into the GEMM epilogue (cuBLASLt has RELU and GELU epilogues).
bool IsFusable(plan::Activation activation) {
  return activation == plan::Activation::kRelu || activation == plan::Activation::kGeluErf ||
         activation == plan::Activation::kGeluTanh;
}

// The width entering the chain: what its first Linear or LayerNorm expects; a chain of
// element-wise ops only keeps the configured width.
std::int64_t InputWidth(const std::vector<Step>& steps, std::int64_t configured_width) {
  for (const Step& step : steps) {
    if (const auto* linear = std::get_if<LinearStep>(&step)) return linear->weight.size(1);
    if (const auto* norm = std::get_if<LayerNormStep>(&step)) return norm->width;
    if (const auto* layer = std::get_if<EncoderLayerStep>(&step)) {
      return layer->in_proj.weight.size(1);
    }
    if (const auto* embedding = std::get_if<EmbeddingStep>(&step)) return embedding->word.size(1);
  }
  return configured_width;
}

// Appends ops to a plan, each writing a fresh value (executors never write a value an op reads).
class PlanBuilder {
 public:
  PlanBuilder(std::int64_t input_width, plan::InputKind kind) {
    current_ = plan_.AddValue("input", input_width);
    plan_.SetInput(current_, kind);
  }

  void Linear(const LinearStep& step, plan::Activation fused) {
    current_ = LinearFrom(current_, step, fused, plan::kNoValue, "linear");
  }

  void Activation(plan::Activation activation) {
    plan::ActivationOp op{current_, plan::kNoValue, activation};
    op.output = current_ = plan_.AddValue(NextName(plan::ActivationName(activation)), Width());
    plan_.Append(op);
  }

  void LayerNorm(const LayerNormStep& step) { current_ = NormFrom(current_, step, "layernorm"); }

  // Writes the plan's input value (a kTokenIds plan computes its input).
  void Embedding(const EmbeddingStep& step) {
    plan::EmbeddingOp op;
    op.output = current_;
    op.vocab_size = step.word.size(0);
    op.max_positions = step.position.size(0);
    op.word = ToFloats(step.word);
    op.position = ToFloats(step.position);
    if (step.token_type) {
      op.type_vocab_size = step.token_type->size(0);
      op.token_type = ToFloats(*step.token_type);
    }
    op.positions = step.positions;
    op.padding_id = step.padding_id;
    op.eps = static_cast<float>(step.norm.eps);
    op.gamma = step.norm.gamma ? ToFloats(*step.norm.gamma)
                               : std::vector<float>(static_cast<std::size_t>(Width()), 1.0f);
    op.beta = step.norm.beta ? ToFloats(*step.norm.beta)
                             : std::vector<float>(static_cast<std::size_t>(Width()), 0.0f);
    plan_.Append(std::move(op));
  }

  void Pool(const PoolStep& step) {
    plan::PoolOp op{current_, plan::kNoValue, step.pooling, step.empty_value};
    op.output = current_ = plan_.AddValue(NextName(plan::PoolingName(step.pooling)), Width());
    plan_.Append(op);
  }

  void L2Normalize(const L2NormalizeStep& step) {
    plan::L2NormalizeOp op{current_, plan::kNoValue, static_cast<float>(step.eps)};
    op.output = current_ = plan_.AddValue(NextName("l2"), Width());
    plan_.Append(op);
  }

  // Post-norm: x = norm1(x + attn(x)); x = norm2(x + ffn(x)).
  // norm_first: x = x + attn(norm1(x)); x = x + ffn(norm2(x)).
  // The residual adds ride on the out-projection and the second FFN Linear.
  void EncoderLayer(const EncoderLayerStep& step) {
    const plan::ValueId x = current_;
    const plan::ValueId attn_in = step.norm_first ? NormFrom(x, step.norm1, "norm1") : x;
    const plan::ValueId qkv =
        LinearFrom(attn_in, step.in_proj, plan::Activation::kNone, plan::kNoValue, "qkv");
    plan::AttentionOp attention;
    attention.qkv = qkv;
    attention.num_heads = step.num_heads;
    attention.head_dim = Width() / step.num_heads;
    attention.output = plan_.AddValue(NextName("attention"), Width());
    const plan::ValueId attended = attention.output;
    plan_.Append(attention);
    plan::ValueId h = LinearFrom(attended, step.out_proj, plan::Activation::kNone, x, "attn_out");
    if (!step.norm_first) h = NormFrom(h, step.norm1, "norm1");
    const plan::ValueId ffn_in = step.norm_first ? NormFrom(h, step.norm2, "norm2") : h;
    const plan::ValueId inner =
        LinearFrom(ffn_in, step.linear1, step.activation, plan::kNoValue, "linear1");
    current_ = LinearFrom(inner, step.linear2, plan::Activation::kNone, h, "linear2");
    if (!step.norm_first) current_ = NormFrom(current_, step.norm2, "norm2");
  }

  Result<plan::Plan> Finish() && {
    plan_.SetOutput(current_);
    Status valid = plan_.Validate();
    if (!valid.ok()) return Unimplemented("the layers' widths do not chain: " + valid.message());
    return std::move(plan_);
  }

 private:
  plan::ValueId LinearFrom(plan::ValueId input, const LinearStep& step, plan::Activation fused,
                           plan::ValueId residual, const char* what) {
    plan::LinearOp op;
    op.input = input;
    op.residual = residual;
    op.in_features = step.weight.size(1);
    op.out_features = step.weight.size(0);
    op.weight = ToFloats(step.weight);
    if (step.bias) op.bias = ToFloats(*step.bias);
    op.activation = fused;
    op.output = plan_.AddValue(NextName(what), op.out_features);
    const plan::ValueId output = op.output;
    plan_.Append(std::move(op));
    return output;
  }

  plan::ValueId NormFrom(plan::ValueId input, const LayerNormStep& step, const char* what) {
    plan::LayerNormOp op;
    op.input = input;
    op.eps = static_cast<float>(step.eps);
    if (step.gamma) op.gamma = ToFloats(*step.gamma);
    if (step.beta) op.beta = ToFloats(*step.beta);
    op.output = plan_.AddValue(NextName(what), step.width);
    const plan::ValueId output = op.output;
    plan_.Append(std::move(op));
    return output;
  }

  std::string NextName(const char* what) const {
    return std::to_string(plan_.ops().size()) + "." + what;
  }
  std::int64_t Width() const { return plan_.values()[current_].width; }

  plan::Plan plan_;
  plan::ValueId current_ = plan::kNoValue;
};

// An encoder's input is [batch, seq, d]: dims [seq, d] after a batch dim.
Status CheckEncoderInput(const InputShape& input) {
  if (input.dims.size() == 2 && input.dims[1] >= 1 && input.has_batch_dim) return Status::Ok();
  return Unimplemented(
      "a transformer encoder takes [batch, seq, d] (dims: [-1, d] with "
      "max_batch_size > 0); the config gives dims " +
      aten::DimsToString(input.dims));
}

}  // namespace

Result<plan::Plan> BuildPlan(const std::vector<Step>& steps, std::int64_t configured_width) {
  if (steps.empty()) return Unimplemented("the forward computes nothing (an identity)");
  bool tokens = false;
  for (const Step& step : steps) tokens |= std::holds_alternative<EncoderLayerStep>(step);
  const bool ids = std::holds_alternative<EmbeddingStep>(steps.front());
  PlanBuilder builder(InputWidth(steps, configured_width),
                      ids      ? plan::InputKind::kTokenIds
                      : tokens ? plan::InputKind::kTokens
                               : plan::InputKind::kRows);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (const auto* linear = std::get_if<LinearStep>(&steps[i])) {
      plan::Activation fused = plan::Activation::kNone;
      const auto* next =
          i + 1 < steps.size() ? std::get_if<ActivationStep>(&steps[i + 1]) : nullptr;
      if (next != nullptr && IsFusable(next->activation)) {
        fused = next->activation;
        ++i;
      }
      builder.Linear(*linear, fused);
    } else if (const auto* activation = std::get_if<ActivationStep>(&steps[i])) {
      builder.Activation(activation->activation);
    } else if (const auto* layer = std::get_if<EncoderLayerStep>(&steps[i])) {
      builder.EncoderLayer(*layer);
    } else if (const auto* embedding = std::get_if<EmbeddingStep>(&steps[i])) {
      builder.Embedding(*embedding);
    } else if (const auto* pool = std::get_if<PoolStep>(&steps[i])) {
      builder.Pool(*pool);
    } else if (const auto* l2 = std::get_if<L2NormalizeStep>(&steps[i])) {
      builder.L2Normalize(*l2);
    } else {
      builder.LayerNorm(std::get<LayerNormStep>(steps[i]));
    }
  }
  return std::move(builder).Finish();
}

Result<std::vector<Step>> ChainSteps(const torch::jit::Module& module, const InputShape& input) {
  LTSERVE_ASSIGN_OR_RETURN(std::shared_ptr<torch::jit::Graph> graph, FrozenForward(module));
  try {
    ChainWalker walker(static_cast<std::int64_t>(input.dims.size()), input.has_batch_dim,
                       input.per_token);
    return walker.Walk(*graph);
  } catch (const std::exception& error) {
    return Unimplemented("lowering failed: " + aten::ExceptionMessage(error));
  }
}

Result<plan::Plan> LowerModule(const torch::jit::Module& module, const InputShape& input) {
  const bool variable =
      std::any_of(input.dims.begin(), input.dims.end(), [](std::int64_t dim) { return dim < 0; });
  try {
    if (IsEncoderModel(module)) {
      LTSERVE_RETURN_IF_ERROR(CheckEncoderInput(input));
      LTSERVE_ASSIGN_OR_RETURN(std::vector<Step> steps, EncoderModelSteps(module));
      return BuildPlan(steps, input.dims[1]);
    }
  } catch (const std::exception& error) {
    return Unimplemented("lowering the encoder failed: " + aten::ExceptionMessage(error));
  }
  if (variable) {
    return Unimplemented("the input has variable dims " + aten::DimsToString(input.dims) +
                         "; only transformer encoders take them (as [-1, d])");
  }
  LTSERVE_ASSIGN_OR_RETURN(std::vector<Step> steps, ChainSteps(module, input));
  return BuildPlan(steps, aten::ElementCount(input.dims));
}

Result<plan::Plan> LowerKeyPaddingModule(const torch::jit::Module& module,
                                         const InputShape& input) {
  try {
    LTSERVE_RETURN_IF_ERROR(CheckEncoderInput(input));
    LTSERVE_ASSIGN_OR_RETURN(std::vector<Step> steps, KeyPaddingWrapperSteps(module));
    LTSERVE_ASSIGN_OR_RETURN(plan::Plan plan, BuildPlan(steps, input.dims[1]));
    if (plan.input_kind() != plan::InputKind::kTokens) {
      return Unimplemented("the wrapper holds no encoder layer");
    }
    return plan;
  } catch (const std::exception& error) {
    return Unimplemented("lowering the key-padding wrapper failed: " +
                         aten::ExceptionMessage(error));
  }
}

}  // namespace ltserve::lowering
