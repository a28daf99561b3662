#include "gpu/device_state.h"

#include "gpu/algo_cache.h"
#include "gpu/attention.h"
#include "gpu/cuda_check.h"
#include "gpu/token_kernels.h"

namespace ltserve::gpu {
namespace {

std::string Fingerprint(int device) {
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, device) != cudaSuccess) return "unknown device";
  return std::string(properties.name) + " sm_" + std::to_string(properties.major) +
         std::to_string(properties.minor) + " cublasLt " + std::to_string(cublasLtGetVersion());
}

}  // namespace

Result<std::unique_ptr<DeviceState>> DeviceState::Create(std::shared_ptr<const GpuModel> model) {
  std::unique_ptr<DeviceState> state(new DeviceState());
  state->model_ = model;
  const GpuModelOptions& options = model->options();
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.gpu_device));
  int major = 0;
  LTSERVE_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, options.gpu_device));
  state->programmatic_ = options.programmatic_launch && major >= 9;
  LTSERVE_ASSIGN_OR_RETURN(state->stream_, CreateStream());
  LTSERVE_ASSIGN_OR_RETURN(state->handle_, CreateLtHandle());
  LTSERVE_ASSIGN_OR_RETURN(state->workspace_,
                           DeviceBuffer::Create(options.workspace_bytes, "cuBLASLt workspace"));
  const ElemType storage = StorageType(options.precision);
  const auto rows = static_cast<std::size_t>(options.capacity_rows);
  const plan::Plan& plan = model->plan();
  for (std::size_t v = 0; v < plan.values().size(); ++v) {
    const plan::Value& value = plan.values()[v];
    const auto value_rows = static_cast<std::size_t>(model->ValueCapacity(static_cast<plan::ValueId>(v)));
    const std::size_t bytes = value_rows * static_cast<std::size_t>(value.width) * ElemSize(storage);
    LTSERVE_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                             DeviceBuffer::Create(bytes, "activation '" + value.name + "'"));
    // Rows past a batch (bucket padding) are computed too: start them as zeros, not garbage.
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buffer.data(), 0, bytes, state->stream()));
    state->values_.push_back(std::move(buffer));
  }
  if (options.input_type != storage) {
    LTSERVE_ASSIGN_OR_RETURN(
        state->input_io_,
        DeviceBuffer::Create(rows * model->plan().input_width() * ElemSize(options.input_type),
                             "input staging"));
    LTSERVE_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(state->input_io_.data(), 0, state->input_io_.bytes(), state->stream()));
  }
  if (options.output_type != storage) {
    const auto output_rows = static_cast<std::size_t>(model->ValueCapacity(plan.output()));
    LTSERVE_ASSIGN_OR_RETURN(
        state->output_io_,
        DeviceBuffer::Create(output_rows * plan.output_width() * ElemSize(options.output_type),
                             "output staging"));
  }
  if (plan.input_kind() == plan::InputKind::kTokenIds) {
    const std::size_t bytes = kTokenIdInputs * rows * sizeof(std::int32_t);
    LTSERVE_ASSIGN_OR_RETURN(state->token_ids_, DeviceBuffer::Create(bytes, "token ids"));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(state->token_ids_.data(), 0, bytes, state->stream()));
  }
  if (model->has_attention() || plan.output_per_sequence()) {
    LTSERVE_ASSIGN_OR_RETURN(AttentionBatch batch,
                             AttentionBatch::Create(options.capacity_rows, options.capacity_sequences));
    state->attention_batch_.emplace(std::move(batch));
    LTSERVE_RETURN_IF_ERROR(state->SetSequences({}));
  }
  state->gemms_.resize(model->steps().size());
  for (std::size_t s = 0; s < model->steps().size(); ++s) {
    const auto* step = std::get_if<GemmStep>(&model->steps()[s]);
    if (step == nullptr) continue;
    for (std::size_t b = 0; b < model->buckets().size(); ++b) {
      LTSERVE_ASSIGN_OR_RETURN(
          Gemm gemm, Gemm::Create(options.precision, step->Shape(model->StepRows(s, b))));
      if (model->tuned()) gemm.set_algo(model->Algo(s, b));
      state->gemms_[s].push_back(std::move(gemm));
    }
  }
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(state->stream()));
  return state;
}

void* DeviceState::input_device() const {
  if (token_ids_.data() != nullptr) return token_ids_.data();
  return input_io_.data() != nullptr ? input_io_.data() : Value(model_->plan().input());
}

const void* DeviceState::output_device() const {
  return output_io_.data() != nullptr ? output_io_.data() : Value(model_->plan().output());
}

Status DeviceState::RunGemm(std::size_t step_index, const GemmStep& step, std::size_t bucket) {
  const std::int64_t rows = model_->StepRows(step_index, bucket);
  const GemmOperands operands = Operands(*model_, step);
  const bool has_residual = step.residual != plan::kNoValue;
  if (model_->SmallBatch(step_index, bucket)) {
    LTSERVE_CUDA_RETURN_IF_ERROR(LaunchSmallBatchLinear(
        operands.input, operands.weight, operands.bias, operands.residual, operands.output, rows,
        step.n, step.k, step.Effective(model_->options().gelu),
        StorageType(model_->options().precision), programmatic_, stream()));
    return Status::Ok();
  }
  LTSERVE_RETURN_IF_ERROR(gemms_[step_index][bucket].Run(
      handle_.get(), operands, workspace_.data(), workspace_.bytes(), stream()));
  if (!step.needs_pointwise) return Status::Ok();
  const void* bias = step.fused ? nullptr : model_->Weight(step.bias_offset);
  const void* residual = !step.fused && has_residual ? Value(step.residual) : nullptr;
  LTSERVE_CUDA_RETURN_IF_ERROR(LaunchPointwise(operands.output, bias, residual, operands.output,
                                               rows, step.n, step.after,
                                               StorageType(model_->options().precision),
                                               stream()));
  return Status::Ok();
}

Status DeviceState::RunEmbed(const EmbedStep& step, std::size_t bucket) {
  const std::int64_t rows = model_->buckets()[bucket];
  const auto* inputs = reinterpret_cast<const std::int32_t*>(token_ids_.data());
  EmbeddingTables tables;
  tables.word = model_->Weight(step.word_offset);
  tables.position = model_->Weight(step.position_offset);
  tables.token_type = model_->Weight(step.type_offset);
  tables.vocab_size = static_cast<std::int32_t>(step.vocab_size);
  tables.max_positions = static_cast<std::int32_t>(step.max_positions);
  tables.type_vocab_size = static_cast<std::int32_t>(step.type_vocab_size);
  tables.gamma = static_cast<const float*>(model_->Weight(step.gamma_offset));
  tables.beta = static_cast<const float*>(model_->Weight(step.beta_offset));
  tables.eps = step.eps;
  LTSERVE_CUDA_RETURN_IF_ERROR(LaunchEmbedding(
      inputs + TokenIdsAt(kIdsInput, rows), inputs + TokenIdsAt(kPositionInput, rows),
      inputs + TokenIdsAt(kTypeInput, rows), tables, Value(step.output), rows,
      model_->plan().values()[step.output].width, StorageType(model_->options().precision),
      stream()));
  return Status::Ok();
}

Status DeviceState::SetSequences(std::span<const std::int32_t> lengths) {
  if (!attention_batch_.has_value()) return Status::Ok();
  return attention_batch_->Upload(lengths, stream());
}

Status DeviceState::Forward(std::size_t bucket, std::span<const Event> step_marks) {
  const GpuModelOptions& options = model_->options();
  const plan::Plan& plan = model_->plan();
  const ElemType storage = StorageType(options.precision);
  const std::int64_t rows = model_->buckets()[bucket];
  if (input_io_.data() != nullptr) {
    LTSERVE_CUDA_RETURN_IF_ERROR(
        LaunchConvert(input_io_.data(), options.input_type, Value(plan.input()), storage,
                      static_cast<std::size_t>(rows * plan.input_width()), programmatic_,
                      stream()));
  }
  for (std::size_t s = 0; s < model_->steps().size(); ++s) {
    const Step& step = model_->steps()[s];
    const std::int64_t step_rows = model_->StepRows(s, bucket);
    if (const auto* gemm = std::get_if<GemmStep>(&step)) {
      LTSERVE_RETURN_IF_ERROR(RunGemm(s, *gemm, bucket));
    } else if (const auto* pointwise = std::get_if<PointwiseStep>(&step)) {
      const void* residual =
          pointwise->residual == plan::kNoValue ? nullptr : Value(pointwise->residual);
      LTSERVE_CUDA_RETURN_IF_ERROR(LaunchPointwise(
          Value(pointwise->input), nullptr, residual, Value(pointwise->output), step_rows,
          plan.values()[pointwise->output].width, pointwise->activation, storage, stream()));
    } else if (const auto* norm = std::get_if<LayerNormStep>(&step)) {
      const void* residual = norm->residual == plan::kNoValue ? nullptr : Value(norm->residual);
      LTSERVE_CUDA_RETURN_IF_ERROR(LaunchLayerNorm(
          Value(norm->input), residual, static_cast<const float*>(model_->Weight(norm->gamma_offset)),
          static_cast<const float*>(model_->Weight(norm->beta_offset)), Value(norm->output),
          step_rows, plan.values()[norm->output].width, norm->eps, storage, programmatic_,
          stream()));
    } else if (const auto* attention = std::get_if<AttentionStep>(&step)) {
      LTSERVE_CUDA_RETURN_IF_ERROR(LaunchAttention(
          Value(attention->qkv), Value(attention->output), attention_batch_->device(),
          attention_batch_->max_tokens(), rows, attention->num_heads, attention->head_dim,
          storage, programmatic_, stream()));
    } else if (const auto* embed = std::get_if<EmbedStep>(&step)) {
      LTSERVE_RETURN_IF_ERROR(RunEmbed(*embed, bucket));
    } else if (const auto* pool = std::get_if<PoolStep>(&step)) {
      LTSERVE_CUDA_RETURN_IF_ERROR(LaunchPool(
          Value(pool->input), attention_batch_->sequences(), Value(pool->output),
          model_->bucket_sequences()[bucket], plan.values()[pool->output].width, pool->pooling,
          pool->empty_value, storage, stream()));
    } else if (const auto* normalize = std::get_if<L2NormalizeStep>(&step)) {
      LTSERVE_CUDA_RETURN_IF_ERROR(LaunchL2Normalize(
          Value(normalize->input), Value(normalize->output), step_rows,
          plan.values()[normalize->output].width, normalize->eps, storage, stream()));
    }
    if (s < step_marks.size()) {
      LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(step_marks[s].get(), stream()));
    }
  }
  if (output_io_.data() != nullptr) {
    LTSERVE_CUDA_RETURN_IF_ERROR(
        LaunchConvert(Value(plan.output()), storage, output_io_.data(), options.output_type,
                      static_cast<std::size_t>(model_->OutputRows(bucket) * plan.output_width()),
                      programmatic_, stream()));
  }
  return Status::Ok();
}

// The algorithm for one GEMM step at one bucket: from the cache when it still applies, else
// timed; NOT_FOUND when cuBLASLt has none for this epilogue.
Result<cublasLtMatmulAlgo_t> DeviceState::ChooseAlgo(const GpuModel& model, const GemmStep& step,
                                                     std::int64_t rows, AlgoCache& cache,
                                                     int* from_cache) {
  const GpuModelOptions& options = model.options();
  const GemmShape shape = step.Shape(rows);
  LTSERVE_ASSIGN_OR_RETURN(Gemm gemm, Gemm::Create(options.precision, shape));
  const std::string key = shape.Key(options.precision, options.workspace_bytes);
  const cublasLtMatmulAlgo_t* cached = cache.Find(key);
  if (cached != nullptr && gemm.Supports(handle_.get(), *cached, options.workspace_bytes)) {
    ++*from_cache;
    return *cached;
  }
  Result<cublasLtMatmulAlgo_t> algo =
      TuneGemm(gemm, handle_.get(), Operands(model, step), workspace_.data(),
               options.workspace_bytes, options.algo_candidates, stream());
  if (!algo.ok()) {
    if (algo.status().code() == StatusCode::kNotFound) return algo.status();
    return algo.status().WithContext("choosing a cuBLASLt algorithm for " + key + ": ");
  }
  cache.Put(key, algo.value());
  return algo;
}

// Whether the small-batch kernel should replace cuBLASLt for this step and bucket.
Result<bool> DeviceState::PreferSmallBatch(const GpuModel& model, const GemmStep& step,
                                           std::int64_t rows, const cublasLtMatmulAlgo_t& algo) {
  const GpuModelOptions& options = model.options();
  const ElemType storage = StorageType(options.precision);
  if (options.small_batch == SmallBatchMode::kOff || !step.fused ||
      !SmallBatchLinearSupports(storage, rows, step.k)) {
    return false;
  }
  if (options.small_batch == SmallBatchMode::kAlways) return true;
  if (rows > kSmallBatchAutoMaxRows) return false;
  const GemmOperands operands = Operands(model, step);
  LTSERVE_ASSIGN_OR_RETURN(Gemm gemm, Gemm::Create(options.precision, step.Shape(rows)));
  LTSERVE_ASSIGN_OR_RETURN(const float cublas_ms, TimeOnStream([&] {
    return gemm.RunWith(algo, handle_.get(), operands, workspace_.data(), workspace_.bytes(),
                        stream());
  }, stream()));
  LTSERVE_ASSIGN_OR_RETURN(const float small_ms, TimeOnStream([&]() -> Status {
    LTSERVE_CUDA_RETURN_IF_ERROR(LaunchSmallBatchLinear(
        operands.input, operands.weight, operands.bias, operands.residual, operands.output, rows,
        step.n, step.k, step.Effective(options.gelu), storage, programmatic_, stream()));
    return Status::Ok();
  }, stream()));
  return ClearlyFaster(small_ms, cublas_ms);
}

GemmOperands DeviceState::Operands(const GpuModel& model, const GemmStep& step) const {
  return GemmOperands{model.Weight(step.weight_offset), Value(step.input),
                      step.fused ? model.Weight(step.bias_offset) : nullptr,
                      step.fused && step.residual != plan::kNoValue ? Value(step.residual) : nullptr,
                      Value(step.output)};
}

Result<std::shared_ptr<const GpuModel>> DeviceState::Tune(std::shared_ptr<const GpuModel> model) {
  if (model == nullptr || model->tuned()) return InvalidArgument("Tune takes an untuned model");
  const GpuModelOptions& options = model->options();
  AlgoCache cache(Fingerprint(options.gpu_device));
  if (!options.algo_cache_file.empty()) LTSERVE_RETURN_IF_ERROR(cache.Load(options.algo_cache_file));
  const std::size_t cached_before = cache.size();
  // Buffers of instance size, so candidates are timed on the real shapes and alignments, and
  // on random values: zeros run faster than real data and would skew the ranking.
  LTSERVE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceState> state, Create(model));
  const ElemType storage = StorageType(options.precision);
  for (std::size_t v = 0; v < state->values_.size(); ++v) {
    LTSERVE_CUDA_RETURN_IF_ERROR(LaunchFillRandom(
        state->values_[v].data(), storage, state->values_[v].bytes() / ElemSize(storage),
        static_cast<std::uint32_t>(v + 1), state->stream()));
  }
  const std::size_t buckets = model->buckets().size();
  GemmTuning tuning;
  tuning.steps = model->steps();
  tuning.algos.assign(tuning.steps.size(), {});
  tuning.small_batch.assign(tuning.steps.size(), std::vector<std::uint8_t>(buckets, 0));
  int from_cache = 0;
  int small_batch = 0;
  for (std::size_t s = 0; s < tuning.steps.size(); ++s) {
    auto* step = std::get_if<GemmStep>(&tuning.steps[s]);
    if (step == nullptr) continue;
    for (std::size_t b = 0; b < buckets; ++b) {
      const std::int64_t rows = model->StepRows(s, b);
      Result<cublasLtMatmulAlgo_t> algo =
          state->ChooseAlgo(*model, *step, rows, cache, &from_cache);
      if (!algo.ok() && algo.status().code() == StatusCode::kNotFound && step->fused) {
        tuning.notes.push_back("linear " + std::to_string(step->k) + "->" +
                               std::to_string(step->n) + " (plan op " + std::to_string(s) +
                               "): cuBLASLt has no fused algorithm at " +
                               std::to_string(rows) +
                               " rows; running matmul + separate bias/activation kernel");
        step->fused = false;
        ChooseEpilogue(*step, options.gelu);
        tuning.algos[s].clear();
        tuning.small_batch[s].assign(buckets, 0);
        b = static_cast<std::size_t>(-1);  // every bucket again, unfused (the loop's ++b wraps)
        continue;
      }
      if (!algo.ok()) return algo.status();
      tuning.algos[s].push_back(algo.value());
      LTSERVE_ASSIGN_OR_RETURN(const bool prefer,
                               state->PreferSmallBatch(*model, *step, rows, algo.value()));
      tuning.small_batch[s][b] = prefer ? 1 : 0;
    }
    for (std::uint8_t chosen : tuning.small_batch[s]) small_batch += chosen;
  }
  if (from_cache > 0) {
    // Repeated shapes (the layers of an encoder) hit the cache too, file or not.
    tuning.notes.push_back(std::to_string(from_cache) + " GEMM algorithms from the cache" +
                           (options.algo_cache_file.empty() ? std::string(" (shapes timed earlier in this load)")
                                                            : " (" + options.algo_cache_file + ")"));
  }
  if (small_batch > 0) {
    tuning.notes.push_back("small-batch kernel for " + std::to_string(small_batch) +
                           " GEMM buckets");
  }
  if (!options.algo_cache_file.empty() && cache.size() != cached_before) {
    LTSERVE_RETURN_IF_ERROR(cache.Save(options.algo_cache_file));
  }
  return model->WithTuning(std::move(tuning));
}

}  // namespace ltserve::gpu
