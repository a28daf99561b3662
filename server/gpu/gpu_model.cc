#include "gpu/gpu_model.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <type_traits>

#include "common/float16.h"
#include "gpu/attention.h"
#include "gpu/cuda_check.h"
#include "gpu/token_kernels.h"

namespace ltserve::gpu {
namespace {

// Every packed tensor starts on this boundary: cuBLASLt wants 16-byte-aligned bias vectors
// and its heuristic is told all pointers are 256-byte aligned (gemm.cc).
constexpr std::size_t kTensorAlignment = 256;

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

namespace {

// A token-id plan's executor inputs are int32 arrays the batcher fills from the ids it
// checked against the layout's vocabularies: those must fit the plan's tables.
Status CheckTokenIds(const plan::Plan& plan, const std::optional<TokenLayout>& tokens) {
  const plan::EmbeddingOp& embedding = *plan.embedding();
  if (!tokens || !tokens->ids) {
    return InvalidArgument("a token-id plan needs the model's token layout with its token ids");
  }
  const TokenIds& ids = *tokens->ids;
  if (ids.vocab_size < 1 || ids.vocab_size > embedding.vocab_size) {
    return InvalidArgument("the layout accepts ids below " + std::to_string(ids.vocab_size) +
                           ", the embedding has " + std::to_string(embedding.vocab_size) + " rows");
  }
  if (ids.type_vocab_size > std::max<std::int64_t>(embedding.type_vocab_size, 1)) {
    return InvalidArgument("the layout accepts token types below " +
                           std::to_string(ids.type_vocab_size) + ", the embedding has " +
                           std::to_string(embedding.type_vocab_size));
  }
  constexpr std::int64_t kInt32Max = 2147483647;
  if (std::max({embedding.vocab_size, embedding.max_positions, embedding.type_vocab_size,
                tokens->max_batch_tokens}) > kInt32Max) {
    return Unimplemented("the GPU executor indexes tables and token batches with int32");
  }
  const std::int64_t width = plan.input_width();
  if (width > kEmbeddingMaxWidth) {
    return Unimplemented("the GPU embedding kernel takes widths up to " +
                         std::to_string(kEmbeddingMaxWidth) + "; this model's is " +
                         std::to_string(width));
  }
  return Status::Ok();
}

}  // namespace

Result<GpuModelOptions> DeriveGpuOptions(const plan::Plan& plan, const ModelSpec& spec,
                                         const std::optional<TokenLayout>& tokens) {
  GpuModelOptions options;
  static_cast<ModelOptions&>(options) = spec.options;
  if (plan.input_kind() == plan::InputKind::kTokenIds) {
    LTSERVE_RETURN_IF_ERROR(CheckTokenIds(plan, tokens));
    options.input_type = StorageType(options.precision);
  } else {
    LTSERVE_ASSIGN_OR_RETURN(options.input_type, IoType(ExecutorInputs(spec, tokens), "input"));
  }
  LTSERVE_ASSIGN_OR_RETURN(options.output_type, IoType(spec.outputs, "output"));

  options.output_dims = {plan.output_width()};
  if (!spec.outputs.empty() && !spec.outputs[0].dims.empty()) {
    std::int64_t product = 1;
    for (std::int64_t dim : spec.outputs[0].dims) product *= dim > 0 ? dim : -1;
    if (product == plan.output_width()) options.output_dims = spec.outputs[0].dims;
  }
  if (plan.input_kind() == plan::InputKind::kRows) {
    options.capacity_rows = spec.max_batch_size > 0 ? spec.max_batch_size : 1;
    return options;
  }
  if (!tokens || tokens->max_batch_tokens < 1) {
    return InvalidArgument("a token plan needs the model's token layout with a token budget");
  }
  options.capacity_rows = tokens->max_batch_tokens;
  if (plan.output_per_sequence()) options.capacity_sequences = std::max(spec.max_batch_size, 1);
  return options;
}

Result<std::shared_ptr<const GpuModel>> GpuModel::Create(std::shared_ptr<const plan::Plan> plan,
                                                         const ModelSpec& spec,
                                                         const std::optional<TokenLayout>& tokens) {
  if (plan == nullptr) return InvalidArgument("no plan given to the GPU executor");
  LTSERVE_RETURN_IF_ERROR(plan->Validate());
  std::shared_ptr<GpuModel> model(new GpuModel());
  model->plan_ = std::move(plan);
  LTSERVE_ASSIGN_OR_RETURN(model->options_, DeriveGpuOptions(*model->plan_, spec, tokens));
  model->buckets_ = Buckets(model->plan_->input_kind(), model->options_.capacity_rows);
  if (model->plan_->output_per_sequence()) {
    model->bucket_sequences_ = BucketSequences(model->buckets_, model->options_.capacity_sequences);
  }
  model->value_per_sequence_.assign(model->plan_->values().size(), 0);
  const std::vector<plan::Op>& ops = model->plan_->ops();
  for (std::size_t i = model->plan_->pool_index(); i < ops.size(); ++i) {
    std::visit([&](const auto& op) { model->value_per_sequence_[op.output] = 1; }, ops[i]);
  }
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(model->options_.gpu_device));
  LTSERVE_RETURN_IF_ERROR(model->Lower());
  LTSERVE_RETURN_IF_ERROR(model->Upload());
  return std::shared_ptr<const GpuModel>(std::move(model));
}

std::shared_ptr<const GpuModel> GpuModel::WithTuning(GemmTuning tuning) const {
  std::shared_ptr<GpuModel> tuned(new GpuModel(*this));
  tuned->steps_ = std::move(tuning.steps);
  tuned->algos_ = std::move(tuning.algos);
  tuned->kernels_ = std::move(tuning.kernels);
  tuned->chains_ = std::move(tuning.chains);
  tuned->layer_norm_schedules_ = std::move(tuning.layer_norm_schedules);
  tuned->half_buckets_ = std::move(tuning.half_buckets);
  tuned->ordinary_launch_ = std::move(tuning.ordinary_launch);
  tuned->notes_.insert(tuned->notes_.end(), tuning.notes.begin(), tuning.notes.end());
  tuned->tuned_ = true;
  return tuned;
}

const std::vector<ChainRun>& GpuModel::Chains(std::size_t bucket) const {
  static const std::vector<ChainRun> kNone;
  return bucket < chains_.size() ? chains_[bucket] : kNone;
}

bool GpuModel::RowLocal(std::size_t step) const {
  if (step >= steps_.size() || step >= plan_->pool_index()) return false;
  const Step& s = steps_[step];
  return std::holds_alternative<GemmStep>(s) || std::holds_alternative<PointwiseStep>(s) ||
         std::holds_alternative<LayerNormStep>(s);
}

std::size_t GpuModel::HalfBucketCandidate(std::size_t bucket) const {
  // Below this many rows a half's kernels are launches and round trips, the same whether one
  // or two run at a time: nothing for the other half to fill.
  constexpr std::int64_t kMinHalfRows = 128;
  if (bucket >= buckets_.size() || buckets_[bucket] % 2 != 0 ||
      buckets_[bucket] / 2 < kMinHalfRows) {
    return kNoHalf;
  }
  const auto half = std::find(buckets_.begin(), buckets_.end(), buckets_[bucket] / 2);
  if (half == buckets_.end()) return kNoHalf;
  const auto h = static_cast<std::size_t>(half - buckets_.begin());
  for (const std::size_t b : {bucket, h}) {
    if (b < chains_.size() && !chains_[b].empty()) return kNoHalf;
  }
  bool row_local = false;
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    row_local = row_local || RowLocal(s);
    if (s < kernels_.size() && h < kernels_[s].size() &&
        kernels_[s][h].kind == GemmKernel::Kind::kNormGemm) {
      return kNoHalf;
    }
  }
  return row_local ? h : kNoHalf;
}

std::vector<std::pair<std::size_t, std::size_t>> ChainableRuns(const std::vector<Step>& steps) {
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  std::size_t first = 0;
  const auto close = [&](std::size_t end) {  // the run [first, end)
    if (end >= first + static_cast<std::size_t>(kChainMinLayers)) runs.emplace_back(first, end - 1);
  };
  for (std::size_t s = 0; s <= steps.size(); ++s) {
    const auto* step = s < steps.size() ? std::get_if<GemmStep>(&steps[s]) : nullptr;
    bool extends = step != nullptr && s > first && s - first < kChainMaxLayers;
    if (extends) {
      extends = step->input == std::get<GemmStep>(steps[s - 1]).output;
      for (std::size_t t = first; extends && t < s; ++t) {
        extends = step->residual == plan::kNoValue ||
                  step->residual != std::get<GemmStep>(steps[t]).output;
      }
    }
    if (extends) continue;
    close(s);
    first = step != nullptr ? s : s + 1;
  }
  return runs;
}

namespace {

// Whether `step` reads value `id`.
bool Reads(const Step& step, plan::ValueId id) {
  return std::visit(
      [id](const auto& o) {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, GemmStep> || std::is_same_v<T, PointwiseStep> ||
                      std::is_same_v<T, LayerNormStep>) {
          return o.input == id || o.residual == id;
        } else if constexpr (std::is_same_v<T, AttentionStep>) {
          return o.qkv == id;
        } else if constexpr (std::is_same_v<T, PoolStep> || std::is_same_v<T, L2NormalizeStep>) {
          return o.input == id;
        } else {
          return false;  // EmbedStep reads the executor's token inputs only
        }
      },
      step);
}

}  // namespace

std::vector<std::size_t> LayerNormFusableGemms(const std::vector<Step>& steps,
                                               plan::ValueId plan_output) {
  std::vector<std::size_t> fusable;
  for (std::size_t s = 0; s + 1 < steps.size(); ++s) {
    const auto* gemm = std::get_if<GemmStep>(&steps[s]);
    const auto* norm = std::get_if<LayerNormStep>(&steps[s + 1]);
    if (gemm == nullptr || norm == nullptr || gemm->activation != plan::Activation::kNone ||
        norm->input != gemm->output || norm->residual == gemm->output ||
        (gemm->residual != plan::kNoValue && norm->residual != plan::kNoValue) ||
        gemm->output == plan_output) {
      continue;
    }
    bool only_reader = true;
    for (std::size_t t = 0; only_reader && t < steps.size(); ++t) {
      only_reader = t == s + 1 || !Reads(steps[t], gemm->output);
    }
    if (only_reader) fusable.push_back(s);
  }
  return fusable;
}

std::size_t GpuModel::BucketFor(std::int64_t rows, std::int64_t sequences) const {
  return SmallestBucket(buckets_, bucket_sequences_, rows, sequences);
}

std::int64_t GpuModel::ValueCapacity(plan::ValueId id) const {
  return value_per_sequence_[static_cast<std::size_t>(id)] != 0 ? options_.capacity_sequences
                                                                 : options_.capacity_rows;
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
          } else if constexpr (std::is_same_v<T, plan::EmbeddingOp>) {
            EmbedStep step;
            step.output = o.output;
            step.word_offset = Append(host_weights_, o.word, storage);
            step.position_offset = Append(host_weights_, o.position, storage);
            step.type_offset = Append(host_weights_, o.token_type, storage);
            step.vocab_size = o.vocab_size;
            step.max_positions = o.max_positions;
            step.type_vocab_size = o.type_vocab_size;
            step.gamma_offset = Append(host_weights_, o.gamma, ElemType::kFp32);
            step.beta_offset = Append(host_weights_, o.beta, ElemType::kFp32);
            step.eps = o.eps;
            steps_.push_back(step);
          } else if constexpr (std::is_same_v<T, plan::PoolOp>) {
            if (options_.capacity_sequences > 65535) {  // the pooling grid's y dimension
              return Unimplemented("the GPU pooling kernel takes batches of up to 65535 "
                                   "sequences; max_batch_size is " +
                                   std::to_string(options_.capacity_sequences));
            }
            steps_.push_back(PoolStep{o.input, o.output, o.pooling, o.empty_value});
          } else if constexpr (std::is_same_v<T, plan::L2NormalizeOp>) {
            steps_.push_back(L2NormalizeStep{o.input, o.output, o.eps});
          }
          return Status::Ok();
        },
        op);
    LTSERVE_RETURN_IF_ERROR(status);
  }
  return Status::Ok();
}

Status GpuModel::Upload() {
  LTSERVE_ASSIGN_OR_RETURN(DeviceBuffer weights,
                           DeviceBuffer::Create(host_weights_.size(), "model weights"));
  if (!host_weights_.empty()) {
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpy(weights.data(), host_weights_.data(),
                                            host_weights_.size(), cudaMemcpyHostToDevice));
  }
  weights_ = std::make_shared<const DeviceBuffer>(std::move(weights));
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
