#include "torch/lowering.h"

#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/inliner.h>

#include <string>
#include <utility>

#include "torch/aten_util.h"
#include "torch/chain_walker.h"

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
  }
  return configured_width;
}

class PlanBuilder {
 public:
  explicit PlanBuilder(std::int64_t input_width) {
    current_ = plan_.AddValue("input", input_width);
    plan_.SetInput(current_, plan::InputKind::kRows);
  }

  void Linear(const LinearStep& step, plan::Activation fused) {
    plan::LinearOp op;
    op.input = current_;
    op.in_features = step.weight.size(1);
    op.out_features = step.weight.size(0);
    op.weight = ToFloats(step.weight);
    if (step.bias) op.bias = ToFloats(*step.bias);
    op.activation = fused;
    op.output = current_ = plan_.AddValue(NextName("linear"), op.out_features);
    plan_.Append(std::move(op));
  }

  void Activation(plan::Activation activation) {
    plan::ActivationOp op{current_, plan::kNoValue, activation};
    op.output = current_ = plan_.AddValue(NextName(plan::ActivationName(activation)), Width());
    plan_.Append(op);
  }

  void LayerNorm(const LayerNormStep& step) {
    plan::LayerNormOp op;
    op.input = current_;
    op.eps = static_cast<float>(step.eps);
    if (step.gamma) op.gamma = ToFloats(*step.gamma);
    if (step.beta) op.beta = ToFloats(*step.beta);
    op.output = current_ = plan_.AddValue(NextName("layernorm"), step.width);
    plan_.Append(std::move(op));
  }

  Result<plan::Plan> Finish() && {
    plan_.SetOutput(current_);
    Status valid = plan_.Validate();
    if (!valid.ok()) return Unimplemented("the layers' widths do not chain: " + valid.message());
    return std::move(plan_);
  }

 private:
  std::string NextName(const char* what) const {
    return std::to_string(plan_.ops().size()) + "." + what;
  }
  std::int64_t Width() const { return plan_.values()[current_].width; }

  plan::Plan plan_;
  plan::ValueId current_ = plan::kNoValue;
};

Result<plan::Plan> BuildPlan(const std::vector<Step>& steps, std::int64_t configured_width) {
  if (steps.empty()) return Unimplemented("the forward computes nothing (an identity)");
  PlanBuilder builder(InputWidth(steps, configured_width));
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
    } else {
      builder.LayerNorm(std::get<LayerNormStep>(steps[i]));
    }
  }
  return std::move(builder).Finish();
}

}  // namespace

Result<plan::Plan> LowerModule(const torch::jit::Module& module, const InputShape& input) {
  LTSERVE_ASSIGN_OR_RETURN(std::shared_ptr<torch::jit::Graph> graph, FrozenForward(module));
  const std::int64_t configured_width = aten::ElementCount(input.dims);
  try {
    ChainWalker walker(static_cast<std::int64_t>(input.dims.size()), input.has_batch_dim);
    LTSERVE_ASSIGN_OR_RETURN(std::vector<Step> steps, walker.Walk(*graph));
    return BuildPlan(steps, configured_width);
  } catch (const std::exception& error) {
    return Unimplemented("lowering failed: " + aten::ExceptionMessage(error));
  }
}

}  // namespace ltserve::lowering
