// The GPU ExecutorFactory and ExecutorInstance: pinned staging, async copies on the instance's
// stream, and one CUDA graph per batch bucket replayed for each request. For a token model
// the bucket counts packed tokens; the sequences' split travels as data (attention_batch.h),
// so a bucket's graph serves every mix of lengths that fits it.
#include "gpu/gpu_executor.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <sstream>
#include <type_traits>
#include <variant>

#include "gpu/bucket_graphs.h"
#include "gpu/cuda_check.h"
#include "gpu/cuda_resources.h"
#include "gpu/device_state.h"
#include "gpu/gpu_factory.h"
#include "gpu/gpu_model.h"
#include "gpu/row_copies.h"

namespace ltserve {
namespace gpu {
namespace {

// The conversion kernels of a staged graph read and write host memory over PCIe, a whole
// bucket's rows: fine for a few KiB, where two DMA transfers and their latency are what a lone
// request would otherwise pay, not for a large bucket holding a small batch.
constexpr std::size_t kStagedCopyMaxBytes = std::size_t{256} << 10;

// Row plans with graphs stage their copies inside small buckets' graphs (copies_in_graph);
// a token plan repacks its inputs per batch and copies them itself.
bool StagesInGraphs(const GpuModel& model) {
  const GpuModelOptions& options = model.options();
  return options.cuda_graphs && options.copies_in_graph &&
         !plan::TakesTokens(model.plan().input_kind());
}

// The row sizes, the bound and the staging capacities (an instance's pinned buffers hold
// capacity_rows input rows and the output value's capacity); the instance adds its buffers'
// device addresses and its events.
StagedCopies StagedCopiesOf(const GpuModel& model) {
  StagedCopies copies;
  copies.input_row_bytes = static_cast<std::size_t>(model.plan().input_width()) *
                           ElemSize(model.options().input_type);
  copies.output_row_bytes = static_cast<std::size_t>(model.plan().output_width()) *
                            ElemSize(model.options().output_type);
  copies.input_capacity_bytes =
      static_cast<std::size_t>(model.options().capacity_rows) * copies.input_row_bytes;
  copies.output_capacity_bytes =
      static_cast<std::size_t>(model.ValueCapacity(model.plan().output())) *
      copies.output_row_bytes;
  copies.max_bytes = kStagedCopyMaxBytes;
  return copies;
}

// The largest bucket (in rows) that StagedGraphs::Capture gives a staged graph; 0: none.
std::int64_t LargestStagedBucket(const GpuModel& model) {
  if (!StagesInGraphs(model)) return 0;
  const StagedCopies copies = StagedCopiesOf(model);
  std::int64_t largest = 0;
  for (std::int64_t rows : model.buckets()) {
    if (StagedGraphs::Takes(rows, copies)) largest = std::max(largest, rows);
  }
  return largest;
}

// Thread-safety: one scheduler worker drives an instance (executor.h).
class GpuInstance final : public ExecutorInstance {
 public:
  static Result<std::unique_ptr<GpuInstance>> Create(std::shared_ptr<const GpuModel> model) {
    std::unique_ptr<GpuInstance> instance(new GpuInstance());
    instance->model_ = model;
    LTSERVE_ASSIGN_OR_RETURN(instance->state_, DeviceState::Create(model));
    const GpuModelOptions& options = model->options();
    const plan::Plan& plan = model->plan();
    const auto rows = static_cast<std::size_t>(options.capacity_rows);
    const std::size_t input_bytes =
        plan.input_kind() == plan::InputKind::kTokenIds
            ? kTokenIdInputs * rows * sizeof(std::int32_t)
            : rows * plan.input_width() * ElemSize(options.input_type);
    LTSERVE_ASSIGN_OR_RETURN(instance->pinned_input_,
                             PinnedBuffer::Create(input_bytes, "input staging"));
    const auto output_rows = static_cast<std::size_t>(model->ValueCapacity(plan.output()));
    LTSERVE_ASSIGN_OR_RETURN(
        instance->pinned_output_,
        PinnedBuffer::Create(output_rows * plan.output_width() * ElemSize(options.output_type),
                             "output staging"));
    // At most a device copy and a run of staged rows per request, and the run after the last.
    const std::size_t copies = 2 * rows + 1;
    instance->copies_.reserve(copies);
    instance->destinations_.reserve(copies);
    instance->sources_.reserve(copies);
    instance->sizes_.reserve(copies);
    for (Event& event : instance->events_) {
      LTSERVE_ASSIGN_OR_RETURN(event, CreateEvent(/*timing=*/true));
    }
    LTSERVE_ASSIGN_OR_RETURN(instance->graphs_,
                             BucketGraphs::Capture(*instance->state_, model->buckets().size(),
                                                   options.cuda_graphs));
    if (StagesInGraphs(*model)) {
      StagedCopies copies = StagedCopiesOf(*model);
      if (copies.input_capacity_bytes > instance->pinned_input_.bytes() ||
          copies.output_capacity_bytes > instance->pinned_output_.bytes()) {
        return Internal("staged graphs: the staging buffers are smaller than the model's capacity");
      }
      void* host_input = nullptr;
      void* host_output = nullptr;
      LTSERVE_CUDA_RETURN_IF_ERROR(
          cudaHostGetDevicePointer(&host_input, instance->pinned_input_.data(), 0));
      LTSERVE_CUDA_RETURN_IF_ERROR(
          cudaHostGetDevicePointer(&host_output, instance->pinned_output_.data(), 0));
      copies.host_input = host_input;
      copies.host_output = host_output;
      for (std::size_t i = 0; i < copies.events.size(); ++i) {
        copies.events[i] = instance->events_[i].get();
      }
      // Rows past a batch's own are read and computed too: zeroed staging keeps them finite
      // before the first batch has written them.
      std::memset(instance->pinned_input_.data(), 0, instance->pinned_input_.bytes());
      auto staged = StagedGraphs::Capture(*instance->state_, model->buckets(), copies);
      if (!staged.ok()) {
        return Internal("capturing the staging copies into the graphs: " +
                        staged.status().message() +
                        " (the model parameter copies_in_graph false leaves them out)");
      }
      instance->staged_ = std::move(staged).value();
    }
    return instance;
  }

  Result<std::span<std::byte>> InputBuffer(std::size_t index, std::size_t bytes) override {
    if (model_->plan().input_kind() == plan::InputKind::kTokenIds) {
      return TokenIdBuffer(index, bytes);
    }
    if (index != 0) {
      return InvalidArgument("input " + std::to_string(index) + " does not exist; the model has one");
    }
    if (bytes > pinned_input_.bytes()) {
      return InvalidArgument("input of " + std::to_string(bytes) + " bytes exceeds the " +
                             std::to_string(pinned_input_.bytes()) +
                             " bytes the instance was sized for");
    }
    return std::span<std::byte>(pinned_input_.data(), bytes);
  }

  Status Execute(const BatchShape& shape, ExecuteTimings* timings) override {
    last_output_rows_ = 0;
    const plan::Plan& plan = model_->plan();
    LTSERVE_ASSIGN_OR_RETURN(const std::int64_t rows, Rows(shape));
    const bool pooled = plan.output_per_sequence();
    if (rows == 0 && !pooled) {
      // Token sequences that were all padding: nothing to compute, an empty [0, width] output.
      if (timings != nullptr) *timings = ExecuteTimings{};
      last_batch_ = shape.batch_size;
      return Status::Ok();
    }
    const bool token_ids = plan.input_kind() == plan::InputKind::kTokenIds;
    if (token_ids) {
      for (std::size_t i = 0; i < kTokenIdInputs; ++i) {
        if (staged_tokens_[i] != rows) {
          return InvalidArgument("token-id input " + std::to_string(i) + " was staged for " +
                                 std::to_string(staged_tokens_[i]) + " tokens; the batch has " +
                                 std::to_string(rows));
        }
      }
    }
    const GpuModelOptions& options = model_->options();
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.gpu_device));
    const std::size_t bucket = model_->BucketFor(rows, pooled ? shape.batch_size : 0);
    const std::int64_t output_rows = pooled ? shape.batch_size : rows;
    const auto out_bytes = static_cast<std::size_t>(output_rows * plan.output_width()) *
                           ElemSize(options.output_type);
    cudaStream_t stream = state_->stream();
    if (StagedRun(shape, bucket)) {
      // One launch: conversions from and to host staging, the steps, the four events.
      LTSERVE_RETURN_IF_ERROR(staged_.Launch(*state_, bucket));
      return Finish(output_rows, shape.batch_size, timings);
    }
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[0].get(), stream));
    // First, since it validates the lengths: a rejected batch enqueues no copy of its input.
    if (plan::TakesTokens(plan.input_kind())) {
      LTSERVE_RETURN_IF_ERROR(state_->SetSequences(shape.sequence_lengths));
    }
    if (token_ids && rows > 0) {
      // One copy of all three inputs: staged back to back `rows` long, each lands at its
      // bucket-long slot (DeviceState::input_device).
      const std::size_t row_bytes = static_cast<std::size_t>(rows) * sizeof(std::int32_t);
      const std::size_t pitch =
          static_cast<std::size_t>(TokenIdsAt(1, model_->buckets()[bucket])) * sizeof(std::int32_t);
      LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(state_->input_device(), pitch,
                                                     pinned_input_.data(), row_bytes, row_bytes,
                                                     kTokenIdInputs, cudaMemcpyHostToDevice, stream));
    } else if (!token_ids && shape.device_inputs.empty()) {
      const auto in_bytes = static_cast<std::size_t>(rows * plan.input_width()) *
                            ElemSize(options.input_type);
      LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(state_->input_device(), pinned_input_.data(),
                                                   in_bytes, cudaMemcpyHostToDevice, stream));
    } else if (!token_ids) {
      // Some requests' rows are in their own GPU memory: device to device for those, host to
      // device for the runs between them, in one call.
      copies_.clear();
      LTSERVE_RETURN_IF_ERROR(PlanInputCopies(
          shape.device_inputs, rows, plan.input_width() * ElemSize(options.input_type),
          pinned_input_.data(), static_cast<std::byte*>(state_->input_device()), &copies_));
      LTSERVE_RETURN_IF_ERROR(IssueCopies(stream));
    }
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[1].get(), stream));
    LTSERVE_RETURN_IF_ERROR(Launch(bucket));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[2].get(), stream));
    if (!shape.device_outputs.empty()) {
      copies_.clear();
      LTSERVE_RETURN_IF_ERROR(PlanOutputCopies(
          shape.device_outputs, output_rows, plan.output_width() * ElemSize(options.output_type),
          static_cast<const std::byte*>(state_->output_device()), pinned_output_.data(), &copies_));
      LTSERVE_RETURN_IF_ERROR(IssueCopies(stream));
    } else if (out_bytes > 0) {
      LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(pinned_output_.data(), state_->output_device(),
                                                   out_bytes, cudaMemcpyDeviceToHost, stream));
    }
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[3].get(), stream));
    return Finish(output_rows, shape.batch_size, timings);
  }

  std::span<const std::byte> Output(std::size_t index) const override {
    if (index != 0) return {};
    const auto bytes = static_cast<std::size_t>(last_output_rows_ * model_->plan().output_width()) *
                       ElemSize(model_->options().output_type);
    return {pinned_output_.data(), bytes};
  }

  std::vector<std::int64_t> OutputShape(std::size_t index) const override {
    if (index != 0) return {};
    if (plan::TakesTokens(model_->plan().input_kind())) {
      // [tokens, width], or [sequences, width] for a pooled plan (0 rows after a failed run).
      return {last_output_rows_, model_->plan().output_width()};
    }
    std::vector<std::int64_t> shape{last_batch_};
    const auto& dims = model_->options().output_dims;
    shape.insert(shape.end(), dims.begin(), dims.end());
    return shape;
  }

 private:
  GpuInstance() = default;

  // Token-id inputs are staged back to back, each as long as the caller says (the batch's
  // token count, which Execute checks against the lengths).
  Result<std::span<std::byte>> TokenIdBuffer(std::size_t index, std::size_t bytes) {
    if (index >= kTokenIdInputs) {
      return InvalidArgument("input " + std::to_string(index) + " does not exist; a token-id model has " +
                             std::to_string(kTokenIdInputs) + " (ids, positions, token types)");
    }
    const auto capacity = static_cast<std::size_t>(model_->options().capacity_rows);
    if (bytes % sizeof(std::int32_t) != 0 || bytes / sizeof(std::int32_t) > capacity) {
      return InvalidArgument("token-id input of " + std::to_string(bytes) +
                             " bytes is not int32 values for at most the " +
                             std::to_string(capacity) + " tokens the instance was sized for");
    }
    staged_tokens_[index] = static_cast<std::int64_t>(bytes / sizeof(std::int32_t));
    return std::span<std::byte>(pinned_input_.data() + index * bytes, bytes);
  }

  Result<std::int64_t> Rows(const BatchShape& shape) const {
    std::int64_t rows = shape.batch_size;
    if (plan::TakesTokens(model_->plan().input_kind())) {
      if (shape.batch_size < 1) return InvalidArgument("a token batch needs at least one sequence");
      if (shape.sequence_lengths.size() != static_cast<std::size_t>(shape.batch_size)) {
        return InvalidArgument("token batch of " + std::to_string(shape.batch_size) +
                               " sequences came with " +
                               std::to_string(shape.sequence_lengths.size()) + " lengths");
      }
      rows = 0;
      for (std::int32_t length : shape.sequence_lengths) {
        if (length < 0) return InvalidArgument("negative sequence length");
        rows += length;
      }
    }
    // A token batch may hold 0 tokens (every sequence all padding); a row batch has rows.
    const bool tokens = plan::TakesTokens(model_->plan().input_kind());
    if (rows < (tokens ? 0 : 1) || rows > model_->options().capacity_rows) {
      return InvalidArgument("batch of " + std::to_string(rows) + " rows is outside 1.." +
                             std::to_string(model_->options().capacity_rows) +
                             ", what the instance was sized for");
    }
    return rows;
  }

  Status Launch(std::size_t bucket) { return graphs_.Launch(*state_, bucket); }

  // Whether this batch runs as its bucket's staged graph: rows from host staging only, outputs
  // to host staging only (a row plan; token plans never have staged graphs).
  bool StagedRun(const BatchShape& shape, std::size_t bucket) const {
    return staged_.Has(bucket) && shape.device_inputs.empty() && shape.device_outputs.empty();
  }

  // Waits for the batch (events_[3]) and reads the three phases from the events around them.
  Status Finish(std::int64_t output_rows, std::int64_t batch_size, ExecuteTimings* timings) {
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events_[3].get()));
    if (timings != nullptr) {
      std::array<float, 3> ms{};
      for (std::size_t i = 0; i < ms.size(); ++i) {
        LTSERVE_CUDA_RETURN_IF_ERROR(
            cudaEventElapsedTime(&ms[i], events_[i].get(), events_[i + 1].get()));
      }
      timings->input_ns = static_cast<std::uint64_t>(ms[0] * 1e6);
      timings->infer_ns = static_cast<std::uint64_t>(ms[1] * 1e6);
      timings->output_ns = static_cast<std::uint64_t>(ms[2] * 1e6);
    }
    last_output_rows_ = output_rows;
    last_batch_ = batch_size;
    return Status::Ok();
  }

  // copies_ in one cudaMemcpyBatchAsync, in stream order: one call whatever the mix of host
  // and device memory, where one cudaMemcpyAsync per request would cost a few µs of host time
  // each.
  Status IssueCopies(cudaStream_t stream) {
    if (copies_.empty()) return Status::Ok();
    destinations_.clear();
    sources_.clear();
    sizes_.clear();
    for (const PlannedCopy& copy : copies_) {
      destinations_.push_back(copy.destination);
      sources_.push_back(copy.source);
      sizes_.push_back(copy.bytes);
    }
    cudaMemcpyAttributes attributes{};
    attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    std::size_t attributes_index = 0;
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyBatchAsync(destinations_.data(), sources_.data(),
                                                      sizes_.data(), copies_.size(), &attributes,
                                                      &attributes_index, 1, stream));
    return Status::Ok();
  }

  std::shared_ptr<const GpuModel> model_;
  std::unique_ptr<DeviceState> state_;
  PinnedBuffer pinned_input_;
  PinnedBuffer pinned_output_;
  std::array<Event, 4> events_;
  BucketGraphs graphs_;
  StagedGraphs staged_;  // empty unless StagesInGraphs(model)
  std::array<std::int64_t, kTokenIdInputs> staged_tokens_{};  // token-id plans: per input
  // A batch's copies to and from requests' GPU memory; reserved at Create for a batch of
  // capacity_rows one-row requests, so Execute does not allocate.
  std::vector<PlannedCopy> copies_;
  std::vector<void*> destinations_;
  std::vector<const void*> sources_;
  std::vector<std::size_t> sizes_;
  std::int64_t last_output_rows_ = 0;  // of the last run: tokens, or sequences when pooled
  std::int64_t last_batch_ = 0;
};

// Thread-safety: CreateInstance may be called from any thread; the model is immutable.
class GpuFactory final : public ExecutorFactory {
 public:
  explicit GpuFactory(std::shared_ptr<const GpuModel> model) : model_(std::move(model)) {}

  ExecutionPath path() const override { return ExecutionPath::kGpuFused; }

  std::string Describe() const override {
    const GpuModelOptions& options = model_->options();
    std::ostringstream out;
    out << "cuBLASLt " << PrecisionName(options.precision) << ", " << model_->gemms()
        << " GEMMs (" << model_->fused_gemms() << " with fused epilogue), "
        << model_->steps().size() - static_cast<std::size_t>(model_->gemms())
        << " other kernels, " << (options.cuda_graphs ? "graphs" : "no graphs") << " for "
        << model_->buckets().size() << " buckets up to " << options.capacity_rows
        << " rows, workspace " << options.workspace_bytes << " bytes"
        << (options.cuda_graphs && options.consolidate_cublaslt_memsets
                ? " (a slot a GEMM in the graphs, counter memsets one a graph)"
                : "")
        << ", GELU "
        << (options.gelu == GeluMode::kExact ? "exact (erf)" : "tanh epilogue")
        << (options.programmatic_launch == ProgrammaticLaunch::kOff ? ", programmatic launch off"
            : options.programmatic_launch == ProgrammaticLaunch::kAuto
                ? ", programmatic launch chosen per bucket"
                : "");
    if (const std::int64_t staged = LargestStagedBucket(*model_); staged > 0) {
      out << ", copies inside the graphs up to " << staged << " rows";
    }
    for (const std::string& note : model_->notes()) out << "; " << note;
    return out.str();
  }

  Result<std::unique_ptr<ExecutorInstance>> CreateInstance(int /*index*/) override {
    LTSERVE_ASSIGN_OR_RETURN(std::unique_ptr<GpuInstance> instance, GpuInstance::Create(model_));
    return std::unique_ptr<ExecutorInstance>(std::move(instance));
  }

  // Row plans copy a request's rows as they are; a token plan's inputs are repacked on the
  // host (sequences, positions), so its tensors go through host memory.
  std::optional<std::int64_t> DirectDeviceMemory() const override {
    if (plan::TakesTokens(model_->plan().input_kind())) return std::nullopt;
    return model_->options().gpu_device;
  }

  // Execute sets the device itself and everything else is the instance's own stream, handles
  // and buffers.
  bool RunsOnAnyThread() const override { return true; }

 private:
  std::shared_ptr<const GpuModel> model_;
};

}  // namespace

Result<std::shared_ptr<const GpuModel>> LoadGpuModel(std::shared_ptr<const plan::Plan> plan,
                                                     const ModelSpec& spec,
                                                     const std::optional<TokenLayout>& tokens) {
  std::string reason;
  if (!GpuAvailable(&reason)) return Unavailable(reason);
  LTSERVE_ASSIGN_OR_RETURN(std::shared_ptr<const GpuModel> untuned,
                           GpuModel::Create(std::move(plan), spec, tokens));
  return DeviceState::Tune(std::move(untuned));
}

std::unique_ptr<ExecutorFactory> CreateGpuFactory(std::shared_ptr<const GpuModel> model) {
  return std::make_unique<GpuFactory>(std::move(model));
}

}  // namespace gpu

bool GpuAvailable(std::string* reason) {
  int count = 0;
  const cudaError_t code = cudaGetDeviceCount(&count);
  std::string why;
  if (code != cudaSuccess) {
    (void)cudaGetLastError();
    why = std::string("no usable CUDA device: ") + cudaGetErrorName(code) + ": " +
          cudaGetErrorString(code);
  } else if (count == 0) {
    why = "no CUDA device present";
  } else {
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, 0) == cudaSuccess && properties.major < 8) {
      why = std::string(properties.name) + " has compute capability " +
            std::to_string(properties.major) + "." + std::to_string(properties.minor) +
            "; the GPU executor needs 8.0 or newer (bf16 tensor cores)";
    }
  }
  if (reason != nullptr) *reason = why;
  return why.empty();
}

Result<std::unique_ptr<ExecutorFactory>> CreateGpuExecutorFactory(
    std::shared_ptr<const plan::Plan> plan, const ModelSpec& spec,
    const std::optional<TokenLayout>& tokens) {
  LTSERVE_ASSIGN_OR_RETURN(std::shared_ptr<const gpu::GpuModel> model,
                           gpu::LoadGpuModel(std::move(plan), spec, tokens));
  return gpu::CreateGpuFactory(std::move(model));
}

}  // namespace ltserve
