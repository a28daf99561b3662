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

// The dims an executor is told for one input: the full shape without a batch dimension; with
// one, the dims after it; none for packed sequences (their lengths travel separately).
std::vector<std::int64_t> ExecutorDims(const std::vector<std::int64_t>& sent, BatchLayout layout) {
  switch (layout) {
    case BatchLayout::kWhole: return sent;
    case BatchLayout::kRows: return {sent.begin() + (sent.empty() ? 0 : 1), sent.end()};
    case BatchLayout::kPackedSequences: return {};
  }
  return sent;
}

}  // namespace

std::int64_t RowsOf(const InferenceRequest& request, BatchLayout layout) {
  switch (layout) {
    case BatchLayout::kWhole: return 1;
    case BatchLayout::kRows: return request.batch_size;
    case BatchLayout::kPackedSequences: return request.batch_size * request.inputs[0].shape[1];
  }
  return request.batch_size;
}

Result<BatchShape> StageInputs(ExecutorInstance& instance, BatchRequests requests,
                               BatchLayout layout, std::vector<std::int32_t>* sequence_lengths) {
  if (requests.empty()) return Internal("staging an empty batch");
  if (layout == BatchLayout::kWhole && requests.size() != 1) {
    return Internal("a model without a batch dimension runs one request at a time");
  }
  const InferenceRequest& first = *requests.front();
  BatchShape shape;
  shape.batch_size = 0;
  for (const InferenceRequest* request : requests) shape.batch_size += request->batch_size;
  if (layout == BatchLayout::kWhole) shape.batch_size = 1;
  if (layout == BatchLayout::kPackedSequences) {
    sequence_lengths->clear();
    for (const InferenceRequest* request : requests) {
      sequence_lengths->insert(sequence_lengths->end(), static_cast<std::size_t>(request->batch_size),
                               static_cast<std::int32_t>(request->inputs[0].shape[1]));
    }
    shape.sequence_lengths = *sequence_lengths;
  }

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
    if (layout != BatchLayout::kPackedSequences) {
      shape.input_dims.push_back(ExecutorDims(first.inputs[input].shape, layout));
    }
  }
  return shape;
}

Result<std::vector<std::vector<OutputSlice>>> SliceOutputs(const ExecutorInstance& instance,
                                                           BatchRequests requests,
                                                           std::size_t num_outputs,
                                                           BatchLayout layout) {
  std::vector<std::vector<OutputSlice>> slices(requests.size());
  for (auto& per_request : slices) per_request.reserve(num_outputs);
  std::int64_t rows = 0;
  for (const InferenceRequest* request : requests) rows += RowsOf(*request, layout);

  for (std::size_t output = 0; output < num_outputs; ++output) {
    std::span<const std::byte> bytes = instance.Output(output);
    std::vector<std::int64_t> shape = instance.OutputShape(output);
    if (layout == BatchLayout::kWhole) {
      slices.front().push_back(OutputSlice{bytes, std::move(shape)});
      continue;
    }
    if (shape.empty() || shape.front() != rows ||
        bytes.size() % static_cast<std::size_t>(rows) != 0) {
      return Internal("output " + std::to_string(output) + " has shape " + ShapeString(shape) +
                      " and " + std::to_string(bytes.size()) + " bytes for a batch of " +
                      std::to_string(rows) + " rows");
    }
    const std::size_t row_bytes = bytes.size() / static_cast<std::size_t>(rows);
    std::size_t offset = 0;
    for (std::size_t r = 0; r < requests.size(); ++r) {
      const InferenceRequest& request = *requests[r];
      const std::size_t length = row_bytes * static_cast<std::size_t>(RowsOf(request, layout));
      std::vector<std::int64_t> request_shape{request.batch_size};
      if (layout == BatchLayout::kPackedSequences) request_shape.push_back(request.inputs[0].shape[1]);
      request_shape.insert(request_shape.end(), shape.begin() + 1, shape.end());
      slices[r].push_back(OutputSlice{bytes.subspan(offset, length), std::move(request_shape)});
      offset += length;
    }
  }
  return slices;
}

}  // namespace ltserve
