// The GPU ExecutorFactory and ExecutorInstance: pinned staging, async copies on the instance's
// stream, and one CUDA graph per batch bucket replayed for each request. For a token model
// the bucket counts packed tokens; the sequences' split travels as data (attention_batch.h),
// so a bucket's graph serves every mix of lengths that fits it.
#include "gpu/gpu_executor.h"

#include <array>
#include <sstream>
#include <type_traits>
#include <variant>

#include "gpu/cuda_check.h"
#include "gpu/cuda_resources.h"
#include "gpu/device_state.h"
#include "gpu/gpu_model.h"

namespace ltserve {
namespace gpu {
namespace {

// Thread-safety: one scheduler worker drives an instance (executor.h).
class GpuInstance final : public ExecutorInstance {
 public:
  static Result<std::unique_ptr<GpuInstance>> Create(std::shared_ptr<const GpuModel> model) {
    std::unique_ptr<GpuInstance> instance(new GpuInstance());
    instance->model_ = model;
    LTSERVE_ASSIGN_OR_RETURN(instance->state_, DeviceState::Create(model, /*for_tuning=*/false));
    const ModelOptions& options = model->options();
    const auto rows = static_cast<std::size_t>(options.capacity_rows);
    LTSERVE_ASSIGN_OR_RETURN(
        instance->pinned_input_,
        PinnedBuffer::Create(rows * model->plan().input_width() * ElemSize(options.input_type),
                             "input staging"));
    LTSERVE_ASSIGN_OR_RETURN(
        instance->pinned_output_,
        PinnedBuffer::Create(rows * model->plan().output_width() * ElemSize(options.output_type),
                             "output staging"));
    for (Event& event : instance->events_) {
      LTSERVE_ASSIGN_OR_RETURN(event, CreateEvent(/*timing=*/true));
    }
    LTSERVE_RETURN_IF_ERROR(instance->WarmUpAndCapture());
    return instance;
  }

  Result<std::span<std::byte>> InputBuffer(std::size_t index, std::size_t bytes) override {
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
    last_rows_ = 0;
    LTSERVE_ASSIGN_OR_RETURN(const std::int64_t rows, Rows(shape));
    if (rows == 0) {
      // Token sequences that were all padding: nothing to compute, an empty [0, width] output.
      if (timings != nullptr) *timings = ExecuteTimings{};
      last_batch_ = shape.batch_size;
      return Status::Ok();
    }
    const ModelOptions& options = model_->options();
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
    const std::size_t bucket = model_->BucketFor(rows);
    const auto in_bytes = static_cast<std::size_t>(rows * model_->plan().input_width()) *
                          ElemSize(options.input_type);
    const auto out_bytes = static_cast<std::size_t>(rows * model_->plan().output_width()) *
                           ElemSize(options.output_type);
    cudaStream_t stream = state_->stream();
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[0].get(), stream));
    // First, since it validates the lengths: a rejected batch enqueues no copy of its input.
    if (model_->plan().input_kind() == plan::InputKind::kTokens) {
      LTSERVE_RETURN_IF_ERROR(state_->SetSequences(shape.sequence_lengths));
    }
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(state_->input_device(), pinned_input_.data(),
                                                 in_bytes, cudaMemcpyHostToDevice, stream));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[1].get(), stream));
    LTSERVE_RETURN_IF_ERROR(Launch(bucket));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[2].get(), stream));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(pinned_output_.data(), state_->output_device(),
                                                 out_bytes, cudaMemcpyDeviceToHost, stream));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[3].get(), stream));
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
    last_rows_ = rows;
    last_batch_ = shape.batch_size;
    return Status::Ok();
  }

  std::span<const std::byte> Output(std::size_t index) const override {
    if (index != 0) return {};
    const auto bytes = static_cast<std::size_t>(last_rows_ * model_->plan().output_width()) *
                       ElemSize(model_->options().output_type);
    return {pinned_output_.data(), bytes};
  }

  std::vector<std::int64_t> OutputShape(std::size_t index) const override {
    if (index != 0) return {};
    if (model_->plan().input_kind() == plan::InputKind::kTokens) {
      return {last_rows_, model_->plan().output_width()};
    }
    std::vector<std::int64_t> shape{last_batch_};
    const auto& dims = model_->options().output_dims;
    shape.insert(shape.end(), dims.begin(), dims.end());
    return shape;
  }

  Result<double> TimeTokenForward(std::span<const std::int32_t> lengths, int iterations) {
    if (model_->plan().input_kind() != plan::InputKind::kTokens) {
      return InvalidArgument("TimeTokenForward needs a token model");
    }
    BatchShape shape;
    shape.batch_size = static_cast<std::int64_t>(lengths.size());
    shape.sequence_lengths = lengths;
    LTSERVE_ASSIGN_OR_RETURN(const std::int64_t rows, Rows(shape));
    LTSERVE_RETURN_IF_ERROR(state_->SetSequences(lengths));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(state_->stream()));
    return TimeForward(rows, iterations);
  }

  Result<std::vector<GpuStepTime>> ProfileTokenForward(std::span<const std::int32_t> lengths,
                                                       int iterations) {
    BatchShape shape;
    shape.batch_size = static_cast<std::int64_t>(lengths.size());
    shape.sequence_lengths = lengths;
    LTSERVE_ASSIGN_OR_RETURN(const std::int64_t rows, Rows(shape));
    if (iterations < 1) return InvalidArgument("ProfileTokenForward: iterations < 1");
    const std::vector<Step>& steps = model_->steps();
    std::vector<Event> marks;
    for (std::size_t s = 0; s <= steps.size(); ++s) {
      LTSERVE_ASSIGN_OR_RETURN(Event event, CreateEvent(/*timing=*/true));
      marks.push_back(std::move(event));
    }
    LTSERVE_RETURN_IF_ERROR(state_->SetSequences(lengths));
    const std::size_t bucket = model_->BucketFor(rows);
    cudaStream_t stream = state_->stream();
    std::vector<GpuStepTime> times(steps.size());
    for (std::size_t s = 0; s < steps.size(); ++s) {
      times[s].kind = std::visit(
          [](const auto& step) -> std::string {
            using T = std::decay_t<decltype(step)>;
            if constexpr (std::is_same_v<T, GemmStep>) return "gemm";
            if constexpr (std::is_same_v<T, AttentionStep>) return "attention";
            if constexpr (std::is_same_v<T, LayerNormStep>) return "layernorm";
            return "pointwise";
          },
          steps[s]);
    }
    LTSERVE_RETURN_IF_ERROR(state_->Forward(bucket));  // warm-up
    for (int i = 0; i < iterations; ++i) {
      LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(marks.front().get(), stream));
      LTSERVE_RETURN_IF_ERROR(
          state_->Forward(bucket, std::span<const Event>(marks).subspan(1)));
      LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(marks.back().get()));
      for (std::size_t s = 0; s < steps.size(); ++s) {
        float ms = 0;
        LTSERVE_CUDA_RETURN_IF_ERROR(
            cudaEventElapsedTime(&ms, marks[s].get(), marks[s + 1].get()));
        times[s].us += static_cast<double>(ms) * 1e3 / iterations;
      }
    }
    return times;
  }

  Result<double> TimeForward(std::int64_t rows, int iterations) {
    if (rows < 1 || rows > model_->options().capacity_rows || iterations < 1) {
      return InvalidArgument("TimeForward: rows or iterations out of range");
    }
    const std::size_t bucket = model_->BucketFor(rows);
    cudaStream_t stream = state_->stream();
    LTSERVE_RETURN_IF_ERROR(Launch(bucket));  // warm-up
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[0].get(), stream));
    for (int i = 0; i < iterations; ++i) LTSERVE_RETURN_IF_ERROR(Launch(bucket));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[1].get(), stream));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events_[1].get()));
    float ms = 0;
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events_[0].get(), events_[1].get()));
    return static_cast<double>(ms) * 1e3 / iterations;
  }

 private:
  GpuInstance() = default;

  Result<std::int64_t> Rows(const BatchShape& shape) const {
    std::int64_t rows = shape.batch_size;
    if (model_->plan().input_kind() == plan::InputKind::kTokens) {
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
    const bool tokens = model_->plan().input_kind() == plan::InputKind::kTokens;
    if (rows < (tokens ? 0 : 1) || rows > model_->options().capacity_rows) {
      return InvalidArgument("batch of " + std::to_string(rows) + " rows is outside 1.." +
                             std::to_string(model_->options().capacity_rows) +
                             ", what the instance was sized for");
    }
    return rows;
  }

  Status Launch(std::size_t bucket) {
    if (graphs_.empty()) return state_->Forward(bucket);
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graphs_[bucket].get(), state_->stream()));
    return Status::Ok();
  }

  // One eager pass per bucket first: it loads kernels and lets cuBLASLt finish its lazy setup,
  // neither of which may happen under capture.
  Status WarmUpAndCapture() {
    cudaStream_t stream = state_->stream();
    const std::size_t buckets = model_->buckets().size();
    for (std::size_t b = 0; b < buckets; ++b) LTSERVE_RETURN_IF_ERROR(state_->Forward(b));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    if (!model_->options().cuda_graphs) return Status::Ok();
    std::vector<GraphExec> graphs;
    for (std::size_t b = 0; b < buckets; ++b) {
      LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      const Status forward = state_->Forward(b);
      cudaGraph_t raw = nullptr;
      const cudaError_t end = cudaStreamEndCapture(stream, &raw);
      Graph graph(raw);
      LTSERVE_RETURN_IF_ERROR(forward);
      if (end != cudaSuccess) return CudaError(end, "cudaStreamEndCapture", __FILE__, __LINE__);
      cudaGraphExec_t exec = nullptr;
      LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&exec, graph.get(), 0));
      graphs.emplace_back(exec);
    }
    graphs_ = std::move(graphs);
    return Status::Ok();
  }

  std::shared_ptr<const GpuModel> model_;
  std::unique_ptr<DeviceState> state_;
  PinnedBuffer pinned_input_;
  PinnedBuffer pinned_output_;
  std::array<Event, 4> events_;
  std::vector<GraphExec> graphs_;  // [bucket]; empty when graphs are off
  std::int64_t last_rows_ = 0;
  std::int64_t last_batch_ = 0;
};

// Thread-safety: CreateInstance may be called from any thread; the model is immutable.
class GpuFactory final : public ExecutorFactory {
 public:
  static Result<std::unique_ptr<ExecutorFactory>> Create(std::shared_ptr<const plan::Plan> plan,
                                                         const ModelSpec& spec) {
    std::string reason;
    if (!GpuAvailable(&reason)) return Unavailable(reason);
    LTSERVE_ASSIGN_OR_RETURN(std::shared_ptr<GpuModel> model,
                             GpuModel::Create(std::move(plan), spec));
    LTSERVE_RETURN_IF_ERROR(DeviceState::Tune(*model));
    return std::unique_ptr<ExecutorFactory>(new GpuFactory(std::move(model)));
  }

  ExecutionPath path() const override { return ExecutionPath::kGpuFused; }

  std::string Describe() const override {
    const ModelOptions& options = model_->options();
    std::ostringstream out;
    out << "cuBLASLt " << PrecisionName(options.precision) << ", " << model_->gemms()
        << " GEMMs (" << model_->fused_gemms() << " with fused epilogue), "
        << model_->steps().size() - static_cast<std::size_t>(model_->gemms())
        << " other kernels, " << (options.cuda_graphs ? "graphs" : "no graphs") << " for "
        << model_->buckets().size() << " buckets up to " << options.capacity_rows
        << " rows, workspace " << options.workspace_bytes << " bytes, GELU "
        << (options.gelu == GeluMode::kExact ? "exact (erf)" : "tanh epilogue");
    for (const std::string& note : model_->notes()) out << "; " << note;
    return out.str();
  }

  Result<std::unique_ptr<ExecutorInstance>> CreateInstance(int /*index*/) override {
    LTSERVE_ASSIGN_OR_RETURN(std::unique_ptr<GpuInstance> instance, GpuInstance::Create(model_));
    return std::unique_ptr<ExecutorInstance>(std::move(instance));
  }

 private:
  explicit GpuFactory(std::shared_ptr<const GpuModel> model) : model_(std::move(model)) {}
  std::shared_ptr<const GpuModel> model_;
};

}  // namespace
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
    std::shared_ptr<const plan::Plan> plan, const ModelSpec& spec) {
  return gpu::GpuFactory::Create(std::move(plan), spec);
}

Result<double> GpuTimeForward(ExecutorInstance& instance, std::int64_t rows, int iterations) {
  auto* gpu_instance = dynamic_cast<gpu::GpuInstance*>(&instance);
  if (gpu_instance == nullptr) return InvalidArgument("GpuTimeForward needs a GPU instance");
  return gpu_instance->TimeForward(rows, iterations);
}

Result<std::vector<GpuStepTime>> GpuProfileTokenForward(
    ExecutorInstance& instance, std::span<const std::int32_t> sequence_lengths, int iterations) {
  auto* gpu_instance = dynamic_cast<gpu::GpuInstance*>(&instance);
  if (gpu_instance == nullptr) return InvalidArgument("GpuProfileTokenForward needs a GPU instance");
  return gpu_instance->ProfileTokenForward(sequence_lengths, iterations);
}

Result<double> GpuTimeTokenForward(ExecutorInstance& instance,
                                   std::span<const std::int32_t> sequence_lengths,
                                   int iterations) {
  auto* gpu_instance = dynamic_cast<gpu::GpuInstance*>(&instance);
  if (gpu_instance == nullptr) return InvalidArgument("GpuTimeTokenForward needs a GPU instance");
  return gpu_instance->TimeTokenForward(sequence_lengths, iterations);
}

}  // namespace ltserve
