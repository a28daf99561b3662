#include "torch/torchscript_executor.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "torch/aten_threads.h"
#include "torch/aten_util.h"

namespace ltserve {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t NanosSince(Clock::time_point start) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
}

bool HasVariableDims(const std::vector<std::int64_t>& dims) {
  for (std::int64_t dim : dims) {
    if (dim < 0) return true;
  }
  return false;
}

struct TensorBinding {
  std::string name;
  at::ScalarType dtype;
  std::vector<std::int64_t> dims;  // configured, batch excluded
};

// The config as the instances need it; immutable, shared by the factory and its instances.
struct IoBindings {
  std::vector<TensorBinding> inputs;
  std::vector<TensorBinding> outputs;
  std::int64_t max_batch_size = 0;
};

// Thread-safety: one scheduler worker drives an instance (see ExecutorInstance).
class TorchScriptInstance : public ExecutorInstance {
 public:
  TorchScriptInstance(torch::jit::Module module, std::shared_ptr<const IoBindings> io)
      : module_(std::move(module)),
        io_(std::move(io)),
        inputs_(io_->inputs),
        outputs_(io_->outputs),
        max_batch_size_(io_->max_batch_size),
        staging_(inputs_.size()) {
    // Fixed-shape inputs are sized once for the largest batch; variable ones grow on request.
    const std::int64_t rows = std::max<std::int64_t>(max_batch_size_, 1);
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      if (!HasVariableDims(inputs_[i].dims)) {
        const std::int64_t elements = rows * aten::ElementCount(inputs_[i].dims);
        staging_[i].resize(elements * c10::elementSize(inputs_[i].dtype));
      }
    }
  }

  Result<std::span<std::byte>> InputBuffer(std::size_t index, std::size_t bytes) override {
    if (index >= inputs_.size()) {
      return InvalidArgument("input index " + std::to_string(index) + " out of range");
    }
    std::vector<std::byte>& buffer = staging_[index];
    if (bytes > buffer.size()) {
      if (!HasVariableDims(inputs_[index].dims)) {
        return InvalidArgument("input '" + inputs_[index].name + "': " + std::to_string(bytes) +
                               " bytes exceed the " + std::to_string(buffer.size()) +
                               " a full batch holds");
      }
      buffer.resize(bytes);
    }
    return std::span<std::byte>(buffer.data(), bytes);
  }

  Status Execute(const BatchShape& shape, ExecuteTimings* timings) override {
    aten::FollowIntraOpThreads();
    Clock::time_point start = Clock::now();
    results_.clear();
    std::vector<c10::IValue> arguments;
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      LTSERVE_ASSIGN_OR_RETURN(at::Tensor tensor, WrapInput(i, shape));
      arguments.emplace_back(std::move(tensor));
    }
    if (timings != nullptr) timings->input_ns = NanosSince(start);

    start = Clock::now();
    c10::IValue result;
    try {
      c10::InferenceMode guard;
      result = module_.forward(std::move(arguments));
    } catch (const std::exception& error) {
      // The request passed every check against the config: a forward that raises is the
      // model's failure, not the client's.
      return Internal("TorchScript forward failed: " + aten::ExceptionMessage(error));
    }
    if (timings != nullptr) timings->infer_ns = NanosSince(start);

    start = Clock::now();
    Status collected = CollectOutputs(result);
    if (!collected.ok()) {
      results_.clear();
      return collected;
    }
    if (timings != nullptr) timings->output_ns = NanosSince(start);
    return Status::Ok();
  }

  std::span<const std::byte> Output(std::size_t index) const override {
    if (index >= results_.size()) return {};
    const at::Tensor& tensor = results_[index];
    return {static_cast<const std::byte*>(tensor.const_data_ptr()), tensor.nbytes()};
  }

  std::vector<std::int64_t> OutputShape(std::size_t index) const override {
    if (index >= results_.size()) return {};
    return results_[index].sizes().vec();
  }

 private:
  // A tensor over the staging buffer (no copy), shaped [batch, dims...] as the model expects.
  Result<at::Tensor> WrapInput(std::size_t index, const BatchShape& shape) {
    const TensorBinding& input = inputs_[index];
    std::vector<std::int64_t> dims = input.dims;
    if (index < shape.input_dims.size() && !shape.input_dims[index].empty()) {
      dims = shape.input_dims[index];
    }
    if (HasVariableDims(dims)) {
      return InvalidArgument("input '" + input.name + "' has variable dims " +
                             aten::DimsToString(dims) + " and the batch gave none");
    }
    if (max_batch_size_ > 0) {
      if (shape.batch_size < 1 || shape.batch_size > max_batch_size_) {
        return InvalidArgument("batch of " + std::to_string(shape.batch_size) +
                               " rows; the model takes 1 to " + std::to_string(max_batch_size_));
      }
      dims.insert(dims.begin(), shape.batch_size);
    }
    const std::size_t bytes = aten::ElementCount(dims) * c10::elementSize(input.dtype);
    if (bytes > staging_[index].size()) {
      return InvalidArgument("input '" + input.name + "' of shape " + aten::DimsToString(dims) +
                             " is larger than its staging buffer");
    }
    try {
      return at::from_blob(staging_[index].data(), dims, at::TensorOptions().dtype(input.dtype));
    } catch (const std::exception& error) {
      return Internal("wrapping input '" + input.name + "': " + aten::ExceptionMessage(error));
    }
  }

  Status CollectOutputs(const c10::IValue& result) {
    std::vector<at::Tensor> tensors;
    if (result.isTensor()) {
      tensors.push_back(result.toTensor());
    } else if (result.isTuple()) {
      for (const c10::IValue& element : result.toTupleRef().elements()) {
        if (!element.isTensor()) return Internal("forward returned a tuple holding a non-tensor");
        tensors.push_back(element.toTensor());
      }
    } else if (result.isTensorList()) {
      tensors = result.toTensorVector();
    } else {
      return Internal("forward returned " + result.tagKind() + ", not tensors");
    }
    if (tensors.size() != outputs_.size()) {
      return Internal("forward returned " + std::to_string(tensors.size()) +
                      " tensors; the config declares " + std::to_string(outputs_.size()) +
                      " outputs");
    }
    try {
      for (std::size_t i = 0; i < tensors.size(); ++i) {
        results_.push_back(tensors[i].to(at::kCPU, outputs_[i].dtype).contiguous());
      }
    } catch (const std::exception& error) {
      return Internal("converting outputs: " + aten::ExceptionMessage(error));
    }
    return Status::Ok();
  }

  torch::jit::Module module_;
  std::shared_ptr<const IoBindings> io_;
  const std::vector<TensorBinding>& inputs_;
  const std::vector<TensorBinding>& outputs_;
  const std::int64_t max_batch_size_;
  std::vector<std::vector<std::byte>> staging_;
  std::vector<at::Tensor> results_;  // the last Execute's outputs, alive until the next one
};

// Thread-safety: CreateInstance may be called from any thread; it only copies immutable state.
class TorchScriptFactory : public ExecutorFactory {
 public:
  TorchScriptFactory(torch::jit::Module module, std::shared_ptr<const IoBindings> io,
                     aten::AtenThreadCounts threads)
      : module_(std::move(module)), io_(std::move(io)), threads_(std::move(threads)) {}

  ExecutionPath path() const override { return ExecutionPath::kTorchScript; }
  std::string Describe() const override {
    return "TorchScript forward on the CPU (libtorch, " + threads_.Describe() + ")";
  }
  Result<std::unique_ptr<ExecutorInstance>> CreateInstance(int /*index*/) override {
    try {
      return std::unique_ptr<ExecutorInstance>(new TorchScriptInstance(module_, io_));
    } catch (const std::exception& error) {
      return ResourceExhausted("allocating TorchScript staging buffers: " +
                               aten::ExceptionMessage(error));
    }
  }

 private:
  torch::jit::Module module_;
  std::shared_ptr<const IoBindings> io_;
  const aten::AtenThreadCounts threads_;  // as the load found them
};

Result<std::vector<TensorBinding>> Bind(const std::vector<TensorSpec>& specs) {
  std::vector<TensorBinding> bindings;
  for (const TensorSpec& spec : specs) {
    std::optional<at::ScalarType> dtype = aten::ToScalarType(spec.dtype);
    if (!dtype) {
      return InvalidArgument("tensor '" + spec.name + "' has type " +
                             std::string(WireName(spec.dtype)) + ", which libtorch cannot hold");
    }
    bindings.push_back(TensorBinding{spec.name, *dtype, spec.dims});
  }
  return bindings;
}

}  // namespace

Result<std::unique_ptr<ExecutorFactory>> CreateTorchScriptFactory(torch::jit::Module module,
                                                                  const ModelSpec& spec) {
  auto io = std::make_shared<IoBindings>();
  LTSERVE_ASSIGN_OR_RETURN(io->inputs, Bind(spec.inputs));
  LTSERVE_ASSIGN_OR_RETURN(io->outputs, Bind(spec.outputs));
  if (io->inputs.empty() || io->outputs.empty()) {
    return InvalidArgument("model '" + spec.name + "' declares no inputs or no outputs");
  }
  io->max_batch_size = spec.max_batch_size;
  aten::AtenThreadCounts threads = aten::ConfigureThreads(
      spec.name, spec.options.intra_op_threads, spec.options.inter_op_threads);
  return std::unique_ptr<ExecutorFactory>(
      new TorchScriptFactory(std::move(module), std::move(io), std::move(threads)));
}

}  // namespace ltserve
