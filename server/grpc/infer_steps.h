// The steps ModelInfer and ModelStreamInfer share: finding the model and decoding a request
// before it is queued, and building the response from the scheduler's output slices.
//
// Thread-safety: stateless; the model's own objects are thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"
#include "grpc/request_decoder.h"
#include "grpc_service.pb.h"
#include "repository/model_repository.h"
#include "repository/server_lifecycle.h"

namespace ltserve {

struct PreparedInfer {
  std::shared_ptr<Model> model;  // held until the response is written: a reload waits for it
  std::unique_ptr<DecodedRequest> decoded;
};

// The model the request names (its version, or the latest ready one) and the decoded request;
// UNAVAILABLE while loading or shutting down. Failures after the model is found are recorded
// in its statistics.
Result<PreparedInfer> PrepareInfer(const ServerLifecycle& lifecycle,
                                   const inference::ModelInferRequest& request,
                                   std::chrono::steady_clock::time_point arrival);

// The response to `request_id`: the requested outputs (or their top k, for `classification`),
// RESOURCE_EXHAUSTED when they add up to more than `max_response_bytes`.
Result<inference::ModelInferResponse> BuildInferResponse(
    const Model& model, const std::string& request_id, const DecodedRequest& decoded,
    std::span<const OutputSlice> outputs, std::size_t max_response_bytes);

std::uint64_t NanosSince(std::chrono::steady_clock::time_point start);

}  // namespace ltserve
