#include "cpu/cpu_executor.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "cpu/cpu_model.h"
#include "torch/aten_threads.h"
#include "torch/aten_util.h"

namespace ltserve {
namespace {

using cpu::CpuModel;
using cpu::OpWeights;

// The plan's vectors outlive every tensor here (the model holds the plan), and no kernel
// writes a weight, so viewing const memory is safe.
at::Tensor View(const std::vector<float>& values, std::vector<std::int64_t> shape) {
  if (values.empty()) return at::Tensor();
  return at::from_blob(const_cast<float*>(values.data()), shape, at::kFloat);
}

Result<at::ScalarType> PlanIoType(const TensorSpec& tensor) {
  if (tensor.dtype == DataType::kFp32 || tensor.dtype == DataType::kFp16 ||
      tensor.dtype == DataType::kBf16) {
    return *aten::ToScalarType(tensor.dtype);
  }
  return InvalidArgument("'" + tensor.name + "' is " + std::string(WireName(tensor.dtype)) +
                         "; the CPU executor takes FP32, FP16 or BF16");
}

// The instance runs ops over preallocated buffers, so no op may write a value it reads, nor
// the input (which may be the caller's staging buffer).
Status CheckSupported(const plan::Plan& plan) {
  for (std::size_t i = 0; i < plan.ops().size(); ++i) {
    Status status = std::visit(
        [&](const auto& op) -> Status {
          using T = std::decay_t<decltype(op)>;
          if constexpr (std::is_same_v<T, plan::AttentionOp>) {
            if (op.output == op.qkv || op.output == plan.input()) {
              return Unimplemented("plan op " + std::to_string(i) + " writes a value it reads");
            }
          } else if constexpr (std::is_same_v<T, plan::AddOp>) {
            if (op.output == op.a || op.output == op.b || op.output == plan.input()) {
              return Unimplemented("plan op " + std::to_string(i) + " writes a value it reads");
            }
          } else if constexpr (std::is_same_v<T, plan::EmbeddingOp>) {
            return Status::Ok();  // writes the plan input, which a token-id plan computes
          } else if constexpr (std::is_same_v<T, plan::ActivationOp>) {
            if (op.output == plan.input()) {
              return Unimplemented("plan op " + std::to_string(i) + " writes the plan input");
            }
          } else {
            bool reads_output = op.output == op.input || op.output == plan.input();
            if constexpr (requires { op.residual; }) reads_output |= op.output == op.residual;
            if (reads_output) {
              return Unimplemented("plan op " + std::to_string(i) + " writes a value it reads");
            }
          }
          return Status::Ok();
        },
        plan.ops()[i]);
    LTSERVE_RETURN_IF_ERROR(status);
  }
  return Status::Ok();
}

OpWeights WeightsOf(const plan::Op& op) {
  OpWeights weights;
  if (const auto* linear = std::get_if<plan::LinearOp>(&op)) {
    const at::Tensor weight = View(linear->weight, {linear->out_features, linear->in_features});
    if (weight.defined()) weights.weight_t = weight.t();
    weights.bias = View(linear->bias, {linear->out_features});
  } else if (const auto* norm = std::get_if<plan::LayerNormOp>(&op)) {
    weights.gamma = View(norm->gamma, {static_cast<std::int64_t>(norm->gamma.size())});
    weights.beta = View(norm->beta, {static_cast<std::int64_t>(norm->beta.size())});
  } else if (const auto* embedding = std::get_if<plan::EmbeddingOp>(&op)) {
    const auto width = static_cast<std::int64_t>(embedding->gamma.size());
    weights.word = View(embedding->word, {embedding->vocab_size, width});
    weights.position = View(embedding->position, {embedding->max_positions, width});
    weights.token_type = View(embedding->token_type, {embedding->type_vocab_size, width});
    weights.gamma = View(embedding->gamma, {width});
    weights.beta = View(embedding->beta, {width});
  }
  return weights;
}

// Thread-safety: CreateInstance may be called from any thread; the model is immutable.
class CpuPlanFactory : public ExecutorFactory {
 public:
  CpuPlanFactory(std::shared_ptr<const CpuModel> model, aten::AtenThreadCounts threads)
      : model_(std::move(model)), threads_(std::move(threads)) {}

  ExecutionPath path() const override { return ExecutionPath::kCpuPlan; }
  std::string Describe() const override {
    return "CPU plan (ATen fp32, " + threads_.Describe() + "): " + model_->plan->Describe();
  }
  Result<std::unique_ptr<ExecutorInstance>> CreateInstance(int /*index*/) override {
    return cpu::CreateCpuInstance(model_);
  }

 private:
  std::shared_ptr<const CpuModel> model_;
  const aten::AtenThreadCounts threads_;  // as the load found them
};

// Per-token widths for a token plan ([seq, width] dims), per-sample widths otherwise.
std::int64_t ConfiguredWidth(const TensorSpec& tensor, bool tokens) {
  return tokens && !tensor.dims.empty() ? tensor.dims.back() : aten::ElementCount(tensor.dims);
}

// A token-id plan: its inputs are the batcher's three int32 arrays, so only the output is
// the config's; [width] per sequence when pooled, [seq, width] per token otherwise.
Result<std::shared_ptr<const CpuModel>> BuildTokenIdModel(std::shared_ptr<const plan::Plan> plan,
                                                          const ModelSpec& spec,
                                                          const std::optional<TokenLayout>& tokens) {
  if (!tokens || !tokens->ids || tokens->max_batch_tokens < 1 || spec.outputs.size() != 1 ||
      tokens->pooled != plan->output_per_sequence()) {
    return InvalidArgument("a token-id plan needs its token layout (ids, token budget, pooled "
                           "as the plan) and one output");
  }
  auto model = std::make_shared<CpuModel>();
  LTSERVE_ASSIGN_OR_RETURN(model->output_dtype, PlanIoType(spec.outputs[0]));
  const std::vector<std::int64_t>& dims = spec.outputs[0].dims;
  if (dims.empty() || dims.back() != plan->output_width()) {
    return InvalidArgument("output dims " + aten::DimsToString(dims) + " do not end in the plan's "
                           "width " + std::to_string(plan->output_width()));
  }
  model->output_dims = dims;
  model->tokens = true;
  model->token_ids = true;
  model->max_rows = tokens->max_batch_tokens;
  model->max_sequences = std::max(spec.max_batch_size, 1);
  for (const plan::Op& op : plan->ops()) model->weights.push_back(WeightsOf(op));
  model->plan = std::move(plan);
  return std::shared_ptr<const CpuModel>(std::move(model));
}

Result<std::shared_ptr<const CpuModel>> BuildModel(std::shared_ptr<const plan::Plan> plan,
                                                   const ModelSpec& spec,
                                                   const std::optional<TokenLayout>& tokens) {
  if (plan->input_kind() == plan::InputKind::kTokenIds) return BuildTokenIdModel(plan, spec, tokens);
  const std::vector<TensorSpec> inputs = ExecutorInputs(spec, tokens);
  if (inputs.size() != 1 || spec.outputs.size() != 1) {
    return InvalidArgument("the CPU executor runs models of one input and one output; '" +
                           spec.name + "' declares " + std::to_string(inputs.size()) +
                           " and " + std::to_string(spec.outputs.size()));
  }
  auto model = std::make_shared<CpuModel>();
  LTSERVE_ASSIGN_OR_RETURN(model->input_dtype, PlanIoType(inputs[0]));
  LTSERVE_ASSIGN_OR_RETURN(model->output_dtype, PlanIoType(spec.outputs[0]));
  model->tokens = plan->input_kind() == plan::InputKind::kTokens;
  model->max_sequences = std::max(spec.max_batch_size, 1);
  if (model->tokens && (!tokens || tokens->max_batch_tokens < 1 || inputs[0].dims.size() != 2)) {
    return InvalidArgument("a token plan needs its token layout with a token budget and input "
                           "dims [seq, width]");
  }
  const std::int64_t input_width = ConfiguredWidth(inputs[0], model->tokens);
  const std::int64_t output_width = ConfiguredWidth(spec.outputs[0], model->tokens);
  if (input_width != plan->input_width() || output_width != plan->output_width()) {
    return InvalidArgument("config dims " + aten::DimsToString(inputs[0].dims) + " -> " +
                           aten::DimsToString(spec.outputs[0].dims) + " do not match the plan's " +
                           std::to_string(plan->input_width()) + " -> " +
                           std::to_string(plan->output_width()));
  }
  model->output_dims = spec.outputs[0].dims;
  model->has_batch_dim = spec.max_batch_size > 0;
  model->max_rows = std::max(spec.max_batch_size, 1);
  if (model->tokens) model->max_rows = tokens->max_batch_tokens;
  for (const plan::Op& op : plan->ops()) model->weights.push_back(WeightsOf(op));
  model->plan = std::move(plan);
  return std::shared_ptr<const CpuModel>(std::move(model));
}

}  // namespace

Result<std::unique_ptr<ExecutorFactory>> CreateCpuExecutorFactory(
    std::shared_ptr<const plan::Plan> plan, const ModelSpec& spec,
    const std::optional<TokenLayout>& tokens) {
  const std::string context = "CPU executor for model '" + spec.name + "': ";
  if (plan == nullptr) return InvalidArgument(context + "no plan (the model was not lowered)");
  Status status = plan->Validate();
  if (status.ok()) status = CheckSupported(*plan);
  if (!status.ok()) return status.WithContext(context);
  aten::AtenThreadCounts threads = aten::ConfigureThreads(
      spec.name, spec.options.intra_op_threads, spec.options.inter_op_threads);
  try {
    Result<std::shared_ptr<const CpuModel>> model = BuildModel(std::move(plan), spec, tokens);
    if (!model.ok()) return model.status().WithContext(context);
    return std::unique_ptr<ExecutorFactory>(
        new CpuPlanFactory(std::move(model).value(), std::move(threads)));
  } catch (const std::exception& error) {
    return Internal(context + aten::ExceptionMessage(error));
  }
}

}  // namespace ltserve
