#include "grpc/infer_steps.h"

#include <spdlog/spdlog.h>

#include <optional>
#include <vector>

#include "grpc/classification.h"

namespace ltserve {

std::uint64_t NanosSince(std::chrono::steady_clock::time_point start) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
}

Result<PreparedInfer> PrepareInfer(const ServerLifecycle& lifecycle,
                                   const inference::ModelInferRequest& request,
                                   std::chrono::steady_clock::time_point arrival) {
  ModelRepository* repository = lifecycle.repository.load();
  if (repository == nullptr) return Unavailable("the server is still loading its models");
  LTSERVE_ASSIGN_OR_RETURN(std::shared_ptr<Model> model,
                           repository->Find(request.model_name(), request.model_version()));
  if (lifecycle.shutting_down.load()) {
    model->stats().RecordFailure(FailureReason::kUnavailable, NanosSince(arrival));
    return Unavailable("server is shutting down; retry on another replica");
  }
  auto decoded = DecodeInferRequest(request, model->spec());
  if (!decoded.ok()) {
    model->stats().RecordFailure(FailureReason::kInvalidInput, NanosSince(arrival));
    spdlog::debug("ModelInfer '{}' rejected: {}", request.model_name(), decoded.status().message());
    return decoded.status();
  }
  spdlog::debug("ModelInfer '{}' version {} id '{}': batch {}", request.model_name(),
                model->version_string(), request.id(), (*decoded)->request->batch_size);
  return PreparedInfer{std::move(model), std::move(decoded).value()};
}

Result<inference::ModelInferResponse> BuildInferResponse(
    const Model& model, const std::string& request_id, const DecodedRequest& decoded,
    std::span<const OutputSlice> outputs, std::size_t max_response_bytes) {
  const ModelSpec& spec = model.spec();
  const std::vector<int>& requested = decoded.requested_outputs;
  // Outputs asked for with `classification` are answered by their top k instead.
  std::vector<std::optional<Classification>> classified(requested.size());
  std::size_t output_bytes = 0;
  for (std::size_t r = 0; r < requested.size(); ++r) {
    const auto index = static_cast<std::size_t>(requested[r]);
    const OutputSlice& slice = outputs[index];
    if (decoded.class_counts[r] == 0) {
      output_bytes += slice.bytes.size();
      continue;
    }
    LTSERVE_ASSIGN_OR_RETURN(
        Classification top,
        Classify(slice.bytes, spec.outputs[index].dtype, slice.shape, spec.max_batch_size > 0,
                 decoded.class_counts[r], spec.outputs[index].name, model.output_labels(index)));
    output_bytes += top.bytes.size();
    classified[r] = std::move(top);
  }
  if (output_bytes > max_response_bytes) {
    return ResourceExhausted("the response would carry " + std::to_string(output_bytes) +
                             " bytes of outputs, more than the server's limit of " +
                             std::to_string(max_response_bytes) +
                             " (--grpc-max-send-bytes); send a smaller batch");
  }
  inference::ModelInferResponse response;
  response.set_model_name(spec.name);
  response.set_model_version(model.version_string());
  response.set_id(request_id);
  for (std::size_t r = 0; r < requested.size(); ++r) {
    const auto index = static_cast<std::size_t>(requested[r]);
    const OutputSlice& slice = outputs[index];
    auto* tensor = response.add_outputs();
    tensor->set_name(spec.outputs[index].name);
    if (classified[r].has_value()) {
      tensor->set_datatype("BYTES");
      for (std::int64_t dim : classified[r]->shape) tensor->add_shape(dim);
      response.add_raw_output_contents(std::move(classified[r]->bytes));
      continue;
    }
    tensor->set_datatype(std::string(WireName(spec.outputs[index].dtype)));
    for (std::int64_t dim : slice.shape) tensor->add_shape(dim);
    // From the executor's buffer into the response; serializing copies once more, as gRPC's
    // own serialization of a typed response would.
    response.add_raw_output_contents(reinterpret_cast<const char*>(slice.bytes.data()),
                                     slice.bytes.size());
  }
  return response;
}

}  // namespace ltserve
