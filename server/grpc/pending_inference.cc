#include "grpc/pending_inference.h"

#include <optional>
#include <string>

#include "grpc/classification.h"

namespace ltserve {

std::shared_ptr<PendingInference> PendingInference::Create(
    std::shared_ptr<Model> model, std::unique_ptr<inference::ModelInferRequest> message,
    std::unique_ptr<DecodedRequest> decoded, std::size_t max_response_bytes,
    std::chrono::steady_clock::time_point arrival, Tracing tracing) {
  return std::shared_ptr<PendingInference>(
      new PendingInference(std::move(model), std::move(message), std::move(decoded),
                           max_response_bytes, arrival, std::move(tracing)));
}

PendingInference::PendingInference(std::shared_ptr<Model> model,
                                   std::unique_ptr<inference::ModelInferRequest> message,
                                   std::unique_ptr<DecodedRequest> decoded,
                                   std::size_t max_response_bytes,
                                   std::chrono::steady_clock::time_point arrival,
                                   Tracing tracing)
    : model_(std::move(model)), message_(std::move(message)), decoded_(std::move(decoded)),
      max_response_bytes_(max_response_bytes), arrival_(arrival), tracing_(std::move(tracing)) {}

PendingInference::~PendingInference() {
  if (tracing_.tracer != nullptr) tracing_.tracer->Finish(std::move(tracing_.trace));
}

void PendingInference::Start(std::chrono::steady_clock::time_point deadline, Caller caller,
                             Done done) {
  done_ = std::move(done);
  std::unique_ptr<InferenceRequest> request = std::move(decoded_->request);
  request->arrival = arrival_;
  request->deadline = deadline;
  // Converted typed contents must live as long as the scheduler holds the request.
  request->keep_alive = std::make_shared<std::vector<std::string>>(std::move(decoded_->converted));
  request->trace = tracing_.trace.get();
  // The scheduler holds this object through the callback until it has answered.
  request->on_complete = [self = shared_from_this()](const Status& status,
                                                     std::span<const OutputSlice> outputs) {
    self->Complete(status, outputs);
  };
  Status rejected;
  std::uint64_t cancel_id = 0;
  Scheduler::ClaimedRun claimed;
  {
    std::lock_guard start_lock(start_mutex_);
    Result<std::uint64_t> id = model_->scheduler().Enqueue(
        std::move(request), caller == Caller::kMayRun ? &claimed : nullptr);
    if (id.ok()) {
      request_id_.store(*id);
      if (cancelled_.load()) cancel_id = *id;  // Cancel ran before the id was known
    } else {
      rejected = id.status();  // the scheduler recorded the failure
    }
  }
  if (!rejected.ok()) {
    Done refuse = std::move(done_);
    refuse(rejected, nullptr);
    return;
  }
  if (cancel_id != 0) model_->scheduler().Cancel(cancel_id);
  // Outside start_mutex_, which the completion takes.
  model_->scheduler().RunClaimed(claimed);
}

void PendingInference::Cancel() {
  cancelled_.store(true);
  const std::uint64_t id = request_id_.load();
  if (id != 0) model_->scheduler().Cancel(id);
}

void PendingInference::Complete(const Status& status, std::span<const OutputSlice> outputs) {
  { std::lock_guard wait_for_start(start_mutex_); }
  Done done = std::move(done_);
  if (!status.ok()) {
    done(status, nullptr);
    return;
  }
  Result<inference::ModelInferResponse> response = BuildResponse(outputs);
  if (RequestTrace* trace = tracing_.trace.get()) trace->RecordNow(TraceActivity::kRequestEnd);
  if (!response.ok()) {
    done(response.status(), nullptr);
    return;
  }
  done(Status::Ok(), &*response);
}

namespace {

// An output asked for in shared memory must fit the part of the region it was given. Checked for
// every output before any is written, so that a refused request leaves the regions untouched.
Status CheckFits(const std::optional<SharedMemorySlice>& region, std::size_t bytes,
                 const std::string& output) {
  if (!region.has_value() || bytes <= region->byte_size) return Status::Ok();
  return InvalidArgument("output '" + output + "' has " + std::to_string(bytes) +
                         " bytes; its shared memory region '" + region->region->name() +
                         "' was given shared_memory_byte_size " + std::to_string(region->byte_size));
}

}  // namespace

Result<inference::ModelInferResponse> PendingInference::BuildResponse(
    std::span<const OutputSlice> outputs) const {
  const ModelSpec& spec = model_->spec();
  const std::vector<int>& requested = decoded_->requested_outputs;
  const std::vector<std::uint32_t>& class_counts = decoded_->class_counts;
  // Outputs asked for with `classification` are answered by their top k instead.
  std::vector<std::optional<Classification>> classified(requested.size());
  std::size_t output_bytes = 0;
  for (std::size_t r = 0; r < requested.size(); ++r) {
    const auto index = static_cast<std::size_t>(requested[r]);
    const OutputSlice& slice = outputs[index];
    const std::optional<SharedMemorySlice>& region = decoded_->output_regions[r];
    if (class_counts[r] == 0) {
      LTSERVE_RETURN_IF_ERROR(CheckFits(region, slice.bytes.size(), spec.outputs[index].name));
      if (!region.has_value()) output_bytes += slice.bytes.size();
      continue;
    }
    LTSERVE_ASSIGN_OR_RETURN(
        Classification top,
        Classify(slice.bytes, spec.outputs[index].dtype, slice.shape, spec.max_batch_size > 0,
                 class_counts[r], spec.outputs[index].name, model_->output_labels(index)));
    LTSERVE_RETURN_IF_ERROR(CheckFits(region, top.bytes.size(), spec.outputs[index].name));
    if (!region.has_value()) output_bytes += top.bytes.size();
    classified[r] = std::move(top);
  }
  if (output_bytes > max_response_bytes_) {
    return ResourceExhausted("the response would carry " + std::to_string(output_bytes) +
                             " bytes of outputs, more than the server's limit of " +
                             std::to_string(max_response_bytes_) +
                             " (--grpc-max-send-bytes); send a smaller batch");
  }
  inference::ModelInferResponse response;
  response.set_model_name(spec.name);
  response.set_model_version(model_->version_string());
  response.set_id(message_->id());
  for (std::size_t r = 0; r < requested.size(); ++r) {
    const auto index = static_cast<std::size_t>(requested[r]);
    const OutputSlice& slice = outputs[index];
    auto* tensor = response.add_outputs();
    tensor->set_name(spec.outputs[index].name);
    if (const auto& region = decoded_->output_regions[r]; region.has_value()) {
      // An output the executor wrote into its CUDA region itself is there already (it fitted:
      // CheckFits above and the executor apply the same rule).
      const bool on_device =
          r < decoded_->output_on_device.size() && decoded_->output_on_device[r];
      if (!on_device) {
        LTSERVE_RETURN_IF_ERROR(region->region->CopyFromHost(
            region->offset, classified[r].has_value()
                                ? std::as_bytes(std::span(classified[r]->bytes))
                                : slice.bytes));
      }
      tensor->set_datatype(classified[r].has_value() ? "BYTES"
                                                     : std::string(WireName(spec.outputs[index].dtype)));
      for (std::int64_t dim : classified[r].has_value() ? classified[r]->shape : slice.shape) {
        tensor->add_shape(dim);
      }
      auto& parameters = *tensor->mutable_parameters();
      parameters["shared_memory_region"].set_string_param(region->region->name());
      parameters["shared_memory_offset"].set_uint64_param(region->offset);
      parameters["shared_memory_byte_size"].set_uint64_param(region->byte_size);
      // Triton's C++ client (perf_analyzer) reads raw_output_contents by output position: an
      // empty entry keeps the place of an output written to shared memory.
      response.add_raw_output_contents();
      continue;
    }
    if (classified[r].has_value()) {
      tensor->set_datatype("BYTES");
      for (std::int64_t dim : classified[r]->shape) tensor->add_shape(dim);
      response.add_raw_output_contents(std::move(classified[r]->bytes));
      continue;
    }
    tensor->set_datatype(std::string(WireName(spec.outputs[index].dtype)));
    for (std::int64_t dim : slice.shape) tensor->add_shape(dim);
    // From the executor's buffer into the response, the one copy gRPC's paths make: ModelInfer
    // and ModelStreamInfer hand these bytes to gRPC as slices (infer_response_bytes.h); HTTP's
    // encoding copies them once more.
    response.add_raw_output_contents(reinterpret_cast<const char*>(slice.bytes.data()),
                                     slice.bytes.size());
  }
  return response;
}

}  // namespace ltserve
