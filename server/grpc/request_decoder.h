// Turns a ModelInferRequest into the scheduler's InferenceRequest, checking it against the
// model's configuration first. Every rejection is INVALID_ARGUMENT with a message that says what
// the model expects, because that message is all a client sees.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model_spec.h"
#include "grpc_service.pb.h"
#include "scheduler/scheduler.h"
#include "shm/shared_memory_registry.h"

namespace ltserve {

struct DecodedRequest {
  std::unique_ptr<InferenceRequest> request;  // inputs point into the message or `converted`
  std::vector<int> requested_outputs;         // indexes into spec.outputs, in response order
  // Parallel to requested_outputs: the `classification` parameter's k, 0 for the tensor itself.
  std::vector<std::uint32_t> class_counts;
  // Typed `contents` converted to raw bytes (owned here; the message owns raw contents).
  std::vector<std::string> converted;
  // Regions inputs point into, held until the request completes so that an Unregister in
  // the meantime does not unmap them.
  std::vector<SharedMemorySlice> input_regions;
  // Parallel to requested_outputs: where an output asked for in shared memory is written.
  std::vector<std::optional<SharedMemorySlice>> output_regions;
  // Parallel to requested_outputs: the executor writes it into its CUDA region itself
  // (InferenceRequest::device_outputs), so the response does not copy it there.
  std::vector<bool> output_on_device;
};

// `message` must outlive the decoded request (the caller keeps both alive together).
// `shared_memory` resolves the shared_memory_region parameters of inputs and outputs; without
// it (nullptr) a request naming a region is refused. `direct_device` is the GPU whose memory
// the model's executor reads and writes itself (Model::direct_device_memory): tensors in CUDA
// regions of that GPU are left there (RequestInput::device, device_outputs) instead of being
// copied through host memory; classification outputs are always answered from host memory.
Result<std::unique_ptr<DecodedRequest>> DecodeInferRequest(
    const inference::ModelInferRequest& message, const ModelSpec& spec,
    const SharedMemoryRegistry* shared_memory = nullptr,
    std::optional<std::int64_t> direct_device = std::nullopt);

// "[2, 128]" for messages.
std::string ShapeToString(const std::vector<std::int64_t>& shape);

}  // namespace ltserve
