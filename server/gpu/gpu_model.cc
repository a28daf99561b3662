#include "gpu/gpu_model.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <type_traits>

#include "common/float16.h"
#include "gpu/attention.h"
#include "gpu/cuda_check.h"

namespace ltserve::gpu {
namespace {

// Every packed tensor starts on this boundary: cuBLASLt wants 16-byte-aligned bias vectors
// and its heuristic is told all pointers are 256-byte aligned (gemm.cc).
constexpr std::size_t kTensorAlignment = 256;

std::string Param(const ModelSpec& spec, const std::string& name, const std::string& fallback) {
  const auto it = spec.parameters.find(name);
  return it == spec.parameters.end() ? fallback : it->second;
}

// A parameter with a fixed set of spellings, e.g. precision: bf16 | fp16 | fp32 | tf32.
template <typename T>
Result<T> ChoiceParam(const ModelSpec& spec, const std::string& name, const std::string& fallback,
                      const std::vector<std::pair<std::string, T>>& choices) {
  const std::string value = Param(spec, name, fallback);
  std::string expected;
  for (const auto& [spelling, choice] : choices) {
    if (value == spelling) return choice;
    expected += (expected.empty() ? "" : ", ") + spelling;
  }
  return InvalidArgument("parameter " + name + " = '" + value + "': expected one of " + expected);
}

Result<std::int64_t> IntParam(const ModelSpec& spec, const std::string& name,
                              std::int64_t fallback, std::int64_t min_value) {
  const auto it = spec.parameters.find(name);
  if (it == spec.parameters.end()) return fallback;
  std::size_t used = 0;
  std::int64_t value = 0;
  try {
    value = std::stoll(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != it->second.size() || value < min_value) {
    return InvalidArgument("parameter " + name + " = '" + it->second +
                           "': expected an integer >= " + std::to_string(min_value));
  }
  return value;
}

Result<ElemType> IoType(const std::vector<TensorSpec>& tensors, const char* what) {
  if (tensors.empty()) return ElemType::kFp32;
  if (tensors.size() != 1) {
    return InvalidArgument(std::string("the GPU executor serves models with one ") + what +
                           ", the config has " + std::to_string(tensors.size()));
  }
  switch (tensors[0].dtype) {
    case DataType::kFp32: return ElemType::kFp32;
    case DataType::kFp16: return ElemType::kFp16;
    case DataType::kBf16: return ElemType::kBf16;
    default:
      return InvalidArgument(std::string(what) + " '" + tensors[0].name + "' has type " +
                             std::string(WireName(tensors[0].dtype)) +
                             "; the GPU executor takes FP32, FP16 or BF16");
  }
}

std::size_t Append(std::vector<std::byte>& packed, const std::vector<float>& values,
                   ElemType type) {
  if (values.empty()) return kNoOffset;
  const std::size_t offset = (packed.size() + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  packed.resize(offset + values.size() * ElemSize(type));
  std::byte* out = packed.data() + offset;
  for (std::size_t i = 0; i < values.size(); ++i) {
    switch (type) {
      case ElemType::kFp32: std::memcpy(out + 4 * i, &values[i], 4); break;
      case ElemType::kFp16: {
        const std::uint16_t bits = FloatToFp16(values[i]);
        std::memcpy(out + 2 * i, &bits, 2);
        break;
      }
      case ElemType::kBf16: {
        const std::uint16_t bits = FloatToBf16(values[i]);
        std::memcpy(out + 2 * i, &bits, 2);
        break;
      }
    }
  }
  return offset;
}

}  // namespace

std::vector<std::int64_t> Buckets(plan::InputKind kind, std::int64_t capacity) {
  std::vector<std::int64_t> buckets;
  // A token batch has any number of tokens, and a doubling bucket computes up to twice the
  // tokens sent; beyond kTokenBucketStep the buckets go up in steps of it (at most 32 of them),
  // so the excess stays under one step while a step's kernels are long enough that their
  // launch cost no longer matters.
  const std::int64_t step = std::max(kTokenBucketStep, (capacity / 32 + 127) / 128 * 128);
  const bool stepped = kind == plan::InputKind::kTokens;
  for (std::int64_t rows = 1; rows < capacity; rows = stepped && rows >= step ? rows + step : rows * 2) {
    buckets.push_back(rows);
  }
  buckets.push_back(capacity);
  return buckets;
}

void ChooseEpilogue(GemmStep& step, GeluMode gelu) {
  const bool bias = step.bias_offset != kNoOffset;
  plan::Activation fused = plan::Activation::kNone;
  step.after = plan::Activation::kNone;
  switch (step.activation) {
    case plan::Activation::kRelu: fused = plan::Activation::kRelu; break;
    case plan::Activation::kGeluTanh: fused = plan::Activation::kGeluTanh; break;
    case plan::Activation::kGeluErf:
      if (gelu == GeluMode::kTanhEpilogue) {
        fused = plan::Activation::kGeluTanh;
      } else {
        step.after = plan::Activation::kGeluErf;
      }
      break;
    default: step.after = step.activation; break;
  }
  if (!step.fused) {
    step.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    step.after = step.Effective(gelu);
    step.needs_pointwise = true;
    return;
  }
  if (fused == plan::Activation::kRelu) {
    step.epilogue = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  } else if (fused == plan::Activation::kGeluTanh) {
    step.epilogue = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  } else {
    step.epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }
  step.needs_pointwise = step.after != plan::Activation::kNone;
}

Result<ModelOptions> ParseModelOptions(const plan::Plan& plan, const ModelSpec& spec) {
  ModelOptions options;
  LTSERVE_ASSIGN_OR_RETURN(
      options.precision,
      ChoiceParam<Precision>(spec, "precision", "bf16",
                             {{"bf16", Precision::kBf16}, {"fp16", Precision::kFp16},
                              {"fp32", Precision::kFp32}, {"tf32", Precision::kTf32}}));
  // In 16-bit storage the tanh approximation's error is far below one rounding step of the
  // output (docs/gpu_executor.md), so "auto" fuses it there and keeps erf in fp32/tf32.
  const bool half = options.precision == Precision::kBf16 || options.precision == Precision::kFp16;
  const GeluMode auto_gelu = half ? GeluMode::kTanhEpilogue : GeluMode::kExact;
  LTSERVE_ASSIGN_OR_RETURN(
      options.gelu,
      ChoiceParam<GeluMode>(spec, "gelu_epilogue", "auto",
                            {{"auto", auto_gelu}, {"tanh", GeluMode::kTanhEpilogue},
                             {"exact", GeluMode::kExact}}));
  LTSERVE_ASSIGN_OR_RETURN(
      options.small_batch,
      ChoiceParam<SmallBatchMode>(spec, "small_batch_kernel", "auto",
                                  {{"auto", SmallBatchMode::kAuto},
                                   {"always", SmallBatchMode::kAlways},
                                   {"off", SmallBatchMode::kOff}}));
  const std::vector<std::pair<std::string, bool>> booleans{{"true", true}, {"false", false}};
  LTSERVE_ASSIGN_OR_RETURN(options.cuda_graphs,
                           ChoiceParam<bool>(spec, "cuda_graphs", "true", booleans));
  LTSERVE_ASSIGN_OR_RETURN(options.fuse_epilogues,
                           ChoiceParam<bool>(spec, "fuse_epilogues", "true", booleans));
  LTSERVE_ASSIGN_OR_RETURN(std::int64_t workspace,
                           IntParam(spec, "cublaslt_workspace_bytes", 32 << 20, 0));
  options.workspace_bytes = static_cast<std::size_t>(workspace);
  LTSERVE_ASSIGN_OR_RETURN(std::int64_t candidates, IntParam(spec, "algo_candidates", 8, 1));
  options.algo_candidates = static_cast<int>(candidates);
  LTSERVE_ASSIGN_OR_RETURN(std::int64_t device, IntParam(spec, "gpu_device", 0, 0));
  options.device = static_cast<int>(device);
  options.algo_cache_file = Param(spec, "algo_cache_file", "");
  LTSERVE_ASSIGN_OR_RETURN(options.input_type, IoType(spec.inputs, "input"));
  LTSERVE_ASSIGN_OR_RETURN(options.output_type, IoType(spec.outputs, "output"));

  options.output_dims = {plan.output_width()};
  if (!spec.outputs.empty() && !spec.outputs[0].dims.empty()) {
    std::int64_t product = 1;
    for (std::int64_t dim : spec.outputs[0].dims) product *= dim > 0 ? dim : -1;
    if (product == plan.output_width()) options.output_dims = spec.outputs[0].dims;
  }
  const std::int64_t max_batch = spec.max_batch_size > 0 ? spec.max_batch_size : 1;
  if (plan.input_kind() == plan::InputKind::kRows) {
    options.capacity_rows = max_batch;
  } else {
    std::int64_t per_sequence = 0;
    if (!spec.inputs.empty() && !spec.inputs[0].dims.empty() && spec.inputs[0].dims[0] > 0) {
      per_sequence = spec.inputs[0].dims[0];
    }
    LTSERVE_ASSIGN_OR_RETURN(options.capacity_rows,
                             IntParam(spec, "max_tokens_per_batch", max_batch * per_sequence, 1));
    if (options.capacity_rows < 1) {
      return InvalidArgument(
          "a token model whose sequence length is variable needs the parameter "
          "max_tokens_per_batch (the packed tokens an instance is sized for)");
    }
  }
  return options;
}

Result<std::shared_ptr<GpuModel>> GpuModel::Create(std::shared_ptr<const plan::Plan> plan,
                                                   const ModelSpec& spec) {
  if (plan == nullptr) return InvalidArgument("no plan given to the GPU executor");
  LTSERVE_RETURN_IF_ERROR(plan->Validate());
  std::shared_ptr<GpuModel> model(new GpuModel());
  model->plan_ = std::move(plan);
  LTSERVE_ASSIGN_OR_RETURN(model->options_, ParseModelOptions(*model->plan_, spec));
  model->buckets_ = Buckets(model->plan_->input_kind(), model->options_.capacity_rows);
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(model->options_.device));
  LTSERVE_RETURN_IF_ERROR(model->Lower());
  LTSERVE_RETURN_IF_ERROR(model->Upload());
  return model;
}

std::size_t GpuModel::BucketFor(std::int64_t rows) const {
  std::size_t bucket = 0;
  while (bucket + 1 < buckets_.size() && buckets_[bucket] < rows) ++bucket;
  return bucket;
}

Status GpuModel::Lower() {
  const ElemType storage = StorageType(options_.precision);
  for (const plan::Op& op : plan_->ops()) {
    Status status = std::visit(
        [&](const auto& o) -> Status {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, plan::LinearOp>) {
            GemmStep step;
            step.input = o.input;
            step.output = o.output;
            step.residual = o.residual;
            step.n = o.out_features;
            step.k = o.in_features;
            step.weight_offset = Append(host_weights_, o.weight, storage);
            step.bias_offset = Append(host_weights_, o.bias, storage);
            step.activation = o.activation;
            step.fused = options_.fuse_epilogues;
            ChooseEpilogue(step, options_.gelu);
            steps_.push_back(step);
          } else if constexpr (std::is_same_v<T, plan::ActivationOp>) {
            steps_.push_back(PointwiseStep{o.input, plan::kNoValue, o.output, o.activation});
          } else if constexpr (std::is_same_v<T, plan::AddOp>) {
            steps_.push_back(PointwiseStep{o.a, o.b, o.output, plan::Activation::kNone});
          } else if constexpr (std::is_same_v<T, plan::LayerNormOp>) {
            steps_.push_back(LayerNormStep{o.input, o.residual, o.output,
                                           Append(host_weights_, o.gamma, ElemType::kFp32),
                                           Append(host_weights_, o.beta, ElemType::kFp32), o.eps});
          } else if constexpr (std::is_same_v<T, plan::AttentionOp>) {
            if (o.head_dim < 1 || o.head_dim > kAttentionMaxHeadDim || o.num_heads > 65535) {
              return Unimplemented("the GPU attention kernel takes head_dim 1.." +
                                   std::to_string(kAttentionMaxHeadDim) +
                                   " and up to 65535 heads; this model has " +
                                   std::to_string(o.num_heads) + " heads of " +
                                   std::to_string(o.head_dim));
            }
            steps_.push_back(AttentionStep{o.qkv, o.output, o.num_heads, o.head_dim});
          }
          return Status::Ok();
        },
        op);
    LTSERVE_RETURN_IF_ERROR(status);
  }
  return Status::Ok();
}

Status GpuModel::Upload() {
  LTSERVE_ASSIGN_OR_RETURN(weights_, DeviceBuffer::Create(host_weights_.size(), "model weights"));
  if (!host_weights_.empty()) {
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpy(weights_.data(), host_weights_.data(),
                                            host_weights_.size(), cudaMemcpyHostToDevice));
  }
  std::vector<std::byte>().swap(host_weights_);
  return Status::Ok();
}

int GpuModel::gemms() const {
  int count = 0;
  for (const Step& step : steps_) count += std::holds_alternative<GemmStep>(step) ? 1 : 0;
  return count;
}

bool GpuModel::has_attention() const {
  for (const Step& step : steps_) {
    if (std::holds_alternative<AttentionStep>(step)) return true;
  }
  return false;
}

int GpuModel::fused_gemms() const {
  int count = 0;
  for (const Step& step : steps_) {
    const auto* gemm = std::get_if<GemmStep>(&step);
    count += gemm != nullptr && gemm->fused ? 1 : 0;
  }
  return count;
}

}  // namespace ltserve::gpu
