// DeviceState's run-time half: the buffers an instance owns and the forward pass it enqueues.
// Choosing the kernels at load is device_state_tuning.cc's.
#include "gpu/device_state.h"

#include <algorithm>
#include <array>

#include "gpu/attention.h"
#include "gpu/cuda_check.h"
#include "gpu/token_kernels.h"

namespace ltserve::gpu {

Result<std::unique_ptr<DeviceState>> DeviceState::Create(std::shared_ptr<const GpuModel> model) {
  std::unique_ptr<DeviceState> state(new DeviceState());
  state->model_ = model;
  const GpuModelOptions& options = model->options();
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.gpu_device));
  int major = 0;
  LTSERVE_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, options.gpu_device));
  state->sm_major_ = major;
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(
      &state->sm_count_, cudaDevAttrMultiProcessorCount, options.gpu_device));
  state->programmatic_ = options.programmatic_launch != ProgrammaticLaunch::kOff && major >= 9;
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
                             AttentionBatch::Create(options.capacity_rows, options.capacity_sequences,
                                                    options.attention_last_sequence_first));
    state->attention_batch_.emplace(std::move(batch));
    LTSERVE_RETURN_IF_ERROR(state->SetSequences({}));
  }
  if (options.layer_chain != OwnKernelMode::kOff && major >= 9 && storage != ElemType::kFp32) {
    std::size_t bytes = 0;
    std::array<ChainLayer, kChainMaxLayers> layers{};
    for (const auto& [first, last] : ChainableRuns(model->steps())) {
      if (!state->ChainLayers(model->steps(), first, last, layers)) continue;
      bytes = std::max(bytes, ChainGemmScratchBytes(layers.data(), last - first + 1, state->sm_count_));
    }
    if (bytes > 0) {
      LTSERVE_ASSIGN_OR_RETURN(state->chain_scratch_,
                               DeviceBuffer::Create(bytes, "layer-chain kernel scratch"));
      LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(state->chain_scratch_.data(), 0, bytes, state->stream()));
    }
  }
  if (major >= 9 && storage != ElemType::kFp32) {
    // 64 bytes: not worth tying to whether a tuned kernel will count on them.
    const std::size_t bytes = kNormGemmMaxRowTiles * sizeof(int);
    LTSERVE_ASSIGN_OR_RETURN(state->norm_counters_,
                             DeviceBuffer::Create(bytes, "GEMM + LayerNorm row-tile counters"));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(state->norm_counters_.data(), 0, bytes, state->stream()));
  }
  LTSERVE_RETURN_IF_ERROR(state->CreateGemms());
  for (std::size_t b = 0; b < model->buckets().size(); ++b) {
    if (model->HalfBucket(b) != kNoHalf) {
      LTSERVE_RETURN_IF_ERROR(state->EnsureSideLane());
      break;
    }
  }
  LTSERVE_RETURN_IF_ERROR(state->CreateCounterSlots());
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(state->stream()));
  return state;
}

Status DeviceState::CreateGemms() {
  const GpuModel& model = *model_;
  gemms_.clear();
  gemms_.resize(model.steps().size());
  for (std::size_t s = 0; s < model.steps().size(); ++s) {
    const auto* step = std::get_if<GemmStep>(&model.steps()[s]);
    if (step == nullptr) continue;
    for (std::size_t b = 0; b < model.buckets().size(); ++b) {
      LTSERVE_ASSIGN_OR_RETURN(
          Gemm gemm, Gemm::Create(model.options().precision, step->Shape(model.StepRows(s, b))));
      if (model.tuned()) gemm.set_algo(model.Algo(s, b));
      gemms_[s].push_back(std::move(gemm));
    }
  }
  return Status::Ok();
}

Status DeviceState::EnsureSideLane() {
  if (side_stream_ != nullptr) return Status::Ok();
  LTSERVE_ASSIGN_OR_RETURN(side_workspace_,
                           DeviceBuffer::Create(workspace_.bytes(), "second stream's cuBLASLt workspace"));
  LTSERVE_ASSIGN_OR_RETURN(part_, CreateEvent(/*timing=*/false));
  LTSERVE_ASSIGN_OR_RETURN(meet_, CreateEvent(/*timing=*/false));
  LTSERVE_ASSIGN_OR_RETURN(side_stream_, CreateStream());
  return Status::Ok();
}

void* DeviceState::ValueRow(plan::ValueId id, std::int64_t row) const {
  const auto width = static_cast<std::size_t>(model_->plan().values()[id].width);
  return static_cast<std::byte*>(Value(id)) +
         static_cast<std::size_t>(row) * width * ElemSize(StorageType(model_->options().precision));
}

void* DeviceState::input_device() const {
  if (token_ids_.data() != nullptr) return token_ids_.data();
  return input_io_.data() != nullptr ? input_io_.data() : Value(model_->plan().input());
}

const void* DeviceState::output_device() const {
  return output_io_.data() != nullptr ? output_io_.data() : Value(model_->plan().output());
}

Status DeviceState::RunRowLocal(std::size_t step_index, std::size_t bucket, const Lane& lane) {
  const plan::Plan& plan = model_->plan();
  const ElemType storage = StorageType(model_->options().precision);
  const std::int64_t rows = model_->StepRows(step_index, bucket);
  const std::int64_t row = lane.first_row;
  const Step& step = model_->steps()[step_index];
  if (const auto* gemm = std::get_if<GemmStep>(&step)) {
    const GemmKernel& kernel = model_->Kernel(step_index, bucket);
    if (kernel.kind != GemmKernel::Kind::kCublasLt) return RunOwnKernel(kernel, *gemm, rows, lane);
    const Gemm& descriptor = gemms_[step_index][bucket];
    return RunCublasLt(*gemm, rows, lane, [&](const GemmOperands& operands) {
      const std::size_t needed =
          workspace_needed_.empty() ? lane.workspace_bytes : workspace_needed_[step_index][bucket];
      return RunInWorkspace(lane, needed, [&](void* workspace, std::size_t bytes) {
        return descriptor.Run(handle_.get(), operands, workspace, bytes, lane.stream);
      });
    });
  }
  if (const auto* pointwise = std::get_if<PointwiseStep>(&step)) {
    const void* residual =
        pointwise->residual == plan::kNoValue ? nullptr : ValueRow(pointwise->residual, row);
    LTSERVE_CUDA_RETURN_IF_ERROR(LaunchPointwise(
        ValueRow(pointwise->input, row), nullptr, residual, ValueRow(pointwise->output, row), rows,
        plan.values()[pointwise->output].width, pointwise->activation, storage, lane.stream));
    return Status::Ok();
  }
  if (const auto* norm = std::get_if<LayerNormStep>(&step)) {
    const void* residual = norm->residual == plan::kNoValue ? nullptr : ValueRow(norm->residual, row);
    LTSERVE_CUDA_RETURN_IF_ERROR(LaunchLayerNorm(
        ValueRow(norm->input, row), residual,
        static_cast<const float*>(model_->Weight(norm->gamma_offset)),
        static_cast<const float*>(model_->Weight(norm->beta_offset)), ValueRow(norm->output, row),
        rows, plan.values()[norm->output].width, norm->eps, storage, lane.programmatic, lane.stream,
        model_->NormSchedule(step_index, bucket)));
    return Status::Ok();
  }
  return Internal("plan step " + std::to_string(step_index) + " is not row-local");
}

Status DeviceState::CreateCounterSlots() {
  const GpuModelOptions& options = model_->options();
  if (!options.consolidate_cublaslt_memsets || !options.cuda_graphs || !model_->tuned()) {
    return Status::Ok();
  }
  std::size_t gemm_steps = 0;
  std::size_t slot_bytes = kCounterSlotZeroedBytes;
  workspace_needed_.assign(gemms_.size(), {});
  for (std::size_t s = 0; s < gemms_.size(); ++s) {
    if (gemms_[s].empty()) continue;
    ++gemm_steps;
    for (const Gemm& gemm : gemms_[s]) {
      LTSERVE_ASSIGN_OR_RETURN(const std::size_t needed, gemm.WorkspaceNeeded(handle_.get()));
      workspace_needed_[s].push_back(needed);
      if (needed <= kMaxCounterSlotBytes) slot_bytes = std::max(slot_bytes, needed);
    }
  }
  if (gemm_steps == 0) return Status::Ok();
  // 256-byte slots keep every slot as aligned as cudaMalloc's own allocations.
  slot_bytes = (slot_bytes + 255) / 256 * 256;
  const std::size_t lanes = side_stream_ != nullptr ? 2 : 1;
  counter_slot_lanes_ = lanes;
  LTSERVE_ASSIGN_OR_RETURN(counter_slot_buffer_,
                           DeviceBuffer::Create(lanes * gemm_steps * slot_bytes,
                                                "cuBLASLt's per-GEMM workspace slots"));
  counter_slots_ = CounterSlots{counter_slot_buffer_.data(), slot_bytes, lanes * gemm_steps,
                                kCounterSlotZeroedBytes};
  return Status::Ok();
}

Status DeviceState::RunInWorkspace(
    const Lane& lane, std::size_t needed,
    const std::function<Status(void* workspace, std::size_t bytes)>& matmul) {
  const std::size_t lane_index = lane.workspace == workspace_.data() ? 0 : 1;
  if (!recording_workspace_calls_ || lane_index >= counter_slot_lanes_ ||
      needed > counter_slots_.slot_bytes ||
      next_slot_[lane_index] >= counter_slots_.count / counter_slot_lanes_) {
    return matmul(lane.workspace, lane.workspace_bytes);
  }
  const std::size_t per_lane = counter_slots_.count / counter_slot_lanes_;
  void* slot = static_cast<std::byte*>(counter_slots_.base) +
               (lane_index * per_lane + next_slot_[lane_index]++) * counter_slots_.slot_bytes;
  CapturedWorkspaceCall call{slot, {}};
  LTSERVE_ASSIGN_OR_RETURN(call.entry, CaptureDependencies(lane.stream));
  LTSERVE_RETURN_IF_ERROR(matmul(slot, counter_slots_.slot_bytes));
  captured_workspace_calls_.push_back(std::move(call));
  return Status::Ok();
}

Result<GraphExec> DeviceState::Capture(const std::function<Status()>& enqueue) {
  recording_workspace_calls_ = counter_slots_.count > 0;
  captured_workspace_calls_.clear();
  next_slot_ = {};
  Result<GraphExec> graph = CaptureGraph(stream(), enqueue, [&](cudaGraph_t captured) -> Status {
    if (!recording_workspace_calls_) return Status::Ok();
    LTSERVE_ASSIGN_OR_RETURN(
        const int deleted,
        ConsolidateWorkspaceMemsets(captured, captured_workspace_calls_, counter_slots_));
    consolidated_memsets_ += deleted;
    return Status::Ok();
  });
  recording_workspace_calls_ = false;
  captured_workspace_calls_.clear();
  return graph;
}

Status DeviceState::RunCublasLt(const GemmStep& step, std::int64_t rows, const Lane& lane,
                                const std::function<Status(const GemmOperands&)>& matmul) {
  const GemmOperands operands = Operands(*model_, step, lane.first_row);
  LTSERVE_RETURN_IF_ERROR(matmul(operands));
  if (!step.needs_pointwise) return Status::Ok();
  const bool has_residual = step.residual != plan::kNoValue;
  const void* bias = step.fused ? nullptr : model_->Weight(step.bias_offset);
  const void* residual =
      !step.fused && has_residual ? ValueRow(step.residual, lane.first_row) : nullptr;
  LTSERVE_CUDA_RETURN_IF_ERROR(LaunchPointwise(operands.output, bias, residual, operands.output,
                                               rows, step.n, step.after,
                                               StorageType(model_->options().precision),
                                               lane.stream));
  return Status::Ok();
}

Status DeviceState::RunOwnKernel(const GemmKernel& kernel, const GemmStep& step,
                                 std::int64_t rows, const Lane& lane) {
  const GemmOperands o = Operands(*model_, step, lane.first_row);
  const plan::Activation act = step.Effective(model_->options().gelu);
  const ElemType storage = StorageType(model_->options().precision);
  if (kernel.kind == GemmKernel::Kind::kChain || kernel.kind == GemmKernel::Kind::kNormGemm) {
    return Internal("a " + kernel.ToText() + " kernel does not run one GEMM step alone");
  }
  if (kernel.kind == GemmKernel::Kind::kSmallBatch) {
    LTSERVE_CUDA_RETURN_IF_ERROR(LaunchSmallBatchLinear(o.input, o.weight, o.bias, o.residual,
                                                        o.output, rows, step.n, step.k, act,
                                                        storage, lane.programmatic, lane.stream));
  } else if (kernel.kind == GemmKernel::Kind::kCutlass) {
    LTSERVE_CUDA_RETURN_IF_ERROR(LaunchCutlassGemm(kernel.cutlass, o.input, o.weight, o.bias,
                                                   o.residual, o.output, rows, step.n, step.k,
                                                   act, storage, sm_count_, lane.programmatic,
                                                   lane.stream));
  } else if (kernel.kind == GemmKernel::Kind::kStaged) {
    LTSERVE_CUDA_RETURN_IF_ERROR(LaunchStagedGemm(kernel.staged, o.input, o.weight, o.bias,
                                                  o.residual, o.output, rows, step.n, step.k,
                                                  act, storage, lane.programmatic, lane.stream));
  } else {
    LTSERVE_CUDA_RETURN_IF_ERROR(LaunchSkinnyGemm(kernel.skinny, o.input, o.weight, o.bias,
                                                  o.residual, o.output, rows, step.n, step.k,
                                                  act, storage, lane.programmatic, lane.stream));
  }
  return Status::Ok();
}

bool DeviceState::ChainLayers(const std::vector<Step>& steps, std::size_t first, std::size_t last,
                              std::array<ChainLayer, kChainMaxLayers>& layers) const {
  if (last < first || last - first >= kChainMaxLayers) return false;
  for (std::size_t s = first; s <= last; ++s) {
    const auto& step = std::get<GemmStep>(steps[s]);
    ChainLayer& layer = layers[s - first];
    layer.weight = model_->Weight(step.weight_offset);
    layer.bias = model_->Weight(step.bias_offset);
    layer.residual = step.residual == plan::kNoValue ? nullptr : Value(step.residual);
    layer.output = Value(step.output);
    layer.out_features = step.n;
    layer.in_features = step.k;
    layer.act = step.Effective(model_->options().gelu);
  }
  return true;
}

Status DeviceState::RunChain(const std::vector<Step>& steps, const ChainRun& run,
                             std::int64_t rows, bool programmatic) {
  std::array<ChainLayer, kChainMaxLayers> layers{};
  if (!ChainLayers(steps, run.first_step, run.last_step, layers)) {
    return Internal("a layer-chain run of more than " + std::to_string(kChainMaxLayers) + " steps");
  }
  const auto& first = std::get<GemmStep>(steps[run.first_step]);
  LTSERVE_CUDA_RETURN_IF_ERROR(LaunchChainGemm(
      run.config, Value(first.input), layers.data(), run.last_step - run.first_step + 1, rows,
      StorageType(model_->options().precision), chain_scratch_.data(), chain_scratch_.bytes(),
      sm_count_, programmatic, stream()));
  return Status::Ok();
}

Status DeviceState::RunNormGemm(const NormGemmConfig& config, std::size_t step_index,
                                std::int64_t rows, bool programmatic) {
  const std::vector<Step>& steps = model_->steps();
  const auto* gemm = std::get_if<GemmStep>(&steps[step_index]);
  const auto* norm = step_index + 1 < steps.size() ? std::get_if<LayerNormStep>(&steps[step_index + 1])
                                                   : nullptr;
  if (gemm == nullptr || norm == nullptr) {
    return Internal("step " + std::to_string(step_index) +
                    " is not a GEMM followed by a LayerNorm, yet runs the GEMM + LayerNorm kernel");
  }
  // LayerNormFusableGemms lets at most one of the two have a residual.
  LTSERVE_CUDA_RETURN_IF_ERROR(LaunchNormGemm(
      config, Value(gemm->input), model_->Weight(gemm->weight_offset),
      model_->Weight(gemm->bias_offset),
      gemm->residual == plan::kNoValue ? nullptr : Value(gemm->residual),
      norm->residual == plan::kNoValue ? nullptr : Value(norm->residual),
      static_cast<const float*>(model_->Weight(norm->gamma_offset)),
      static_cast<const float*>(model_->Weight(norm->beta_offset)), norm->eps, Value(norm->output),
      rows, gemm->n, gemm->k, StorageType(model_->options().precision),
      reinterpret_cast<int*>(norm_counters_.data()), programmatic, stream()));
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
  if (input_io_.data() != nullptr) {
    LTSERVE_RETURN_IF_ERROR(ConvertInputFrom(bucket, input_io_.data()));
  }
  LTSERVE_RETURN_IF_ERROR(RunSteps(bucket, step_marks));
  if (output_io_.data() != nullptr) {
    LTSERVE_RETURN_IF_ERROR(ConvertOutputTo(bucket, output_io_.data()));
  }
  return Status::Ok();
}

Status DeviceState::ConvertInputFrom(std::size_t bucket, const void* from) {
  const GpuModelOptions& options = model_->options();
  const plan::Plan& plan = model_->plan();
  const std::int64_t rows = model_->buckets()[bucket];
  LTSERVE_CUDA_RETURN_IF_ERROR(
      LaunchConvert(from, options.input_type, Value(plan.input()),
                    StorageType(options.precision),
                    static_cast<std::size_t>(rows * plan.input_width()), Programmatic(bucket),
                    stream()));
  return Status::Ok();
}

Status DeviceState::ConvertOutputTo(std::size_t bucket, void* to) {
  const GpuModelOptions& options = model_->options();
  const plan::Plan& plan = model_->plan();
  LTSERVE_CUDA_RETURN_IF_ERROR(
      LaunchConvert(Value(plan.output()), StorageType(options.precision), to, options.output_type,
                    static_cast<std::size_t>(model_->OutputRows(bucket) * plan.output_width()),
                    Programmatic(bucket), stream()));
  return Status::Ok();
}

Status DeviceState::RunSteps(std::size_t bucket, std::span<const Event> step_marks) {
  // Per-step marks time the steps one after another: halves would blur them.
  return RunStepsSplit(bucket, step_marks.empty() ? model_->HalfBucket(bucket) : kNoHalf,
                       step_marks);
}

Status DeviceState::RunHalves(std::size_t first, std::size_t end, std::size_t half,
                              bool programmatic) {
  Lane main = MainLane();
  main.programmatic = programmatic;
  const Lane second{halves_on_one_stream_ ? stream() : side_stream_.get(), side_workspace_.data(),
                    side_workspace_.bytes(), model_->buckets()[half], programmatic};
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(part_.get(), stream()));
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(second.stream, part_.get()));
  // Step by step, alternating: outside a graph both streams get their next kernel early.
  for (std::size_t s = first; s < end; ++s) {
    LTSERVE_RETURN_IF_ERROR(RunRowLocal(s, half, main));
    LTSERVE_RETURN_IF_ERROR(RunRowLocal(s, half, second));
  }
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(meet_.get(), second.stream));
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream(), meet_.get()));
  return Status::Ok();
}

Status DeviceState::RunStepsSplit(std::size_t bucket, std::size_t half,
                                  std::span<const Event> step_marks) {
  const GpuModelOptions& options = model_->options();
  const plan::Plan& plan = model_->plan();
  const ElemType storage = StorageType(options.precision);
  const std::int64_t rows = model_->buckets()[bucket];
  const std::vector<ChainRun>& chains = model_->Chains(bucket);
  if (half != kNoHalf && (side_stream_ == nullptr || !chains.empty())) {
    return Internal("bucket " + std::to_string(rows) + " rows cannot run as two halves");
  }
  const bool programmatic = Programmatic(bucket);
  auto chain = chains.begin();
  for (std::size_t s = 0; s < model_->steps().size(); ++s) {
    const Step& step = model_->steps()[s];
    const std::int64_t step_rows = model_->StepRows(s, bucket);
    if (half != kNoHalf && model_->RowLocal(s)) {
      std::size_t end = s + 1;
      while (end < model_->steps().size() && model_->RowLocal(end)) ++end;
      LTSERVE_RETURN_IF_ERROR(RunHalves(s, end, half, programmatic));
      s = end - 1;
      continue;
    }
    if (chain != chains.end() && chain->first_step == s) {
      LTSERVE_RETURN_IF_ERROR(RunChain(model_->steps(), *chain, step_rows, programmatic));
      // The run's steps end together: each of their marks is the launch's end.
      for (; s < chain->last_step; ++s) {
        if (s < step_marks.size()) {
          LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(step_marks[s].get(), stream()));
        }
      }
      ++chain;
    } else if (const auto* gemm = std::get_if<GemmStep>(&step);
               gemm != nullptr && model_->Kernel(s, bucket).kind == GemmKernel::Kind::kNormGemm) {
      LTSERVE_RETURN_IF_ERROR(
          RunNormGemm(model_->Kernel(s, bucket).norm, s, step_rows, programmatic));
      // The LayerNorm step ran inside this launch: both steps' marks are its end.
      if (s < step_marks.size()) {
        LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(step_marks[s].get(), stream()));
      }
      ++s;
    } else if (gemm != nullptr || std::holds_alternative<PointwiseStep>(step) ||
               std::holds_alternative<LayerNormStep>(step)) {
      LTSERVE_RETURN_IF_ERROR(RunRowLocal(s, bucket, PassLane(bucket)));
    } else if (const auto* attention = std::get_if<AttentionStep>(&step)) {
      LTSERVE_CUDA_RETURN_IF_ERROR(LaunchAttention(
          Value(attention->qkv), Value(attention->output), attention_batch_->device(),
          attention_batch_->max_tokens(), rows, attention->num_heads, attention->head_dim,
          storage, programmatic, stream()));
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
  return Status::Ok();
}
GemmOperands DeviceState::Operands(const GpuModel& model, const GemmStep& step,
                                   std::int64_t first_row) const {
  return GemmOperands{
      model.Weight(step.weight_offset), ValueRow(step.input, first_row),
      step.fused ? model.Weight(step.bias_offset) : nullptr,
      step.fused && step.residual != plan::kNoValue ? ValueRow(step.residual, first_row) : nullptr,
      ValueRow(step.output, first_row)};
}

}  // namespace ltserve::gpu
