#include "scheduler/batch_data.h"

#include <cstring>
#include <string>

namespace ltserve {
namespace {

std::string ShapeString(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

}  // namespace

Result<BatchShape> StageInputs(ExecutorInstance& instance, BatchRequests requests,
                               bool has_batch_dim) {
  if (requests.empty()) return Internal("staging an empty batch");
  if (!has_batch_dim && requests.size() != 1) {
    return Internal("a model without a batch dimension runs one request at a time");
  }
  const InferenceRequest& first = *requests.front();
  BatchShape shape;
  shape.batch_size = 0;
  for (const InferenceRequest* request : requests) shape.batch_size += request->batch_size;
  if (!has_batch_dim) shape.batch_size = 1;

  for (std::size_t input = 0; input < first.inputs.size(); ++input) {
    std::size_t total = 0;
    for (const InferenceRequest* request : requests) total += request->inputs[input].bytes.size();
    LTSERVE_ASSIGN_OR_RETURN(std::span<std::byte> buffer, instance.InputBuffer(input, total));
    if (buffer.size() < total) {
      return Internal("input " + std::to_string(input) + ": staging buffer of " +
                      std::to_string(buffer.size()) + " bytes for a batch of " +
                      std::to_string(total));
    }
    std::byte* cursor = buffer.data();
    for (const InferenceRequest* request : requests) {
      std::span<const std::byte> bytes = request->inputs[input].bytes;
      if (!bytes.empty()) std::memcpy(cursor, bytes.data(), bytes.size());
      cursor += bytes.size();
    }
    const std::vector<std::int64_t>& sent = first.inputs[input].shape;
    if (has_batch_dim) {
      shape.input_dims.emplace_back(sent.begin() + (sent.empty() ? 0 : 1), sent.end());
    } else {
      shape.input_dims.push_back(sent);
    }
  }
  return shape;
}

Result<std::vector<std::vector<OutputSlice>>> SliceOutputs(const ExecutorInstance& instance,
                                                           BatchRequests requests,
                                                           std::size_t num_outputs,
                                                           bool has_batch_dim) {
  std::vector<std::vector<OutputSlice>> slices(requests.size());
  for (auto& per_request : slices) per_request.reserve(num_outputs);
  std::int64_t rows = 0;
  for (const InferenceRequest* request : requests) rows += request->batch_size;

  for (std::size_t output = 0; output < num_outputs; ++output) {
    std::span<const std::byte> bytes = instance.Output(output);
    std::vector<std::int64_t> shape = instance.OutputShape(output);
    if (!has_batch_dim) {
      slices.front().push_back(OutputSlice{bytes, std::move(shape)});
      continue;
    }
    if (shape.empty() || shape.front() != rows || bytes.size() % static_cast<std::size_t>(rows) != 0) {
      return Internal("output " + std::to_string(output) + " has shape " + ShapeString(shape) +
                      " and " + std::to_string(bytes.size()) + " bytes for a batch of " +
                      std::to_string(rows) + " rows");
    }
    const std::size_t row_bytes = bytes.size() / static_cast<std::size_t>(rows);
    std::size_t offset = 0;
    for (std::size_t r = 0; r < requests.size(); ++r) {
      const std::int64_t batch = requests[r]->batch_size;
      const std::size_t length = row_bytes * static_cast<std::size_t>(batch);
      std::vector<std::int64_t> request_shape = shape;
      request_shape.front() = batch;
      slices[r].push_back(OutputSlice{bytes.subspan(offset, length), std::move(request_shape)});
      offset += length;
    }
  }
  return slices;
}

}  // namespace ltserve
