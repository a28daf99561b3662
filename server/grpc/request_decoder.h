// Turns a ModelInferRequest into the scheduler's InferenceRequest, checking it against the
// model's configuration first. Every rejection is INVALID_ARGUMENT with a message that says what
// the model expects, because that message is all a client sees.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model_spec.h"
#include "grpc_service.pb.h"
#include "scheduler/scheduler.h"

namespace ltserve {

struct DecodedRequest {
  std::unique_ptr<InferenceRequest> request;  // inputs point into the message or `converted`
  std::vector<int> requested_outputs;         // indexes into spec.outputs, in response order
  // Parallel to requested_outputs: the `classification` parameter's k, 0 for the tensor itself.
  std::vector<std::uint32_t> class_counts;
  // Typed `contents` converted to raw bytes (owned here; the message owns raw contents).
  std::vector<std::string> converted;
};

// `message` must outlive the decoded request (the caller keeps both alive together).
Result<std::unique_ptr<DecodedRequest>> DecodeInferRequest(
    const inference::ModelInferRequest& message, const ModelSpec& spec);

// "[2, 128]" for messages.
std::string ShapeToString(const std::vector<std::int64_t>& shape);

}  // namespace ltserve
