#include "scheduler/batch_data.h"

#include <array>
#include <cstring>
#include <optional>
#include <string>

namespace ltserve {
namespace {

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

// One sample's mask row: `tokens` elements of `element_bytes` (1 for BOOL, 4 or 8 for INT32 or
// INT64), padding where an element is nonzero for a key-padding mask and zero for an attention
// mask (model/token_layout.h, MaskKind).
struct MaskRow {
  std::span<const std::byte> bytes;
  std::size_t element_bytes = 1;
  bool nonzero_is_padding = true;

  std::size_t size() const { return bytes.size() / element_bytes; }
  bool Padding(std::size_t token) const {
    bool nonzero = false;
    for (std::size_t i = 0; i < element_bytes; ++i) {
      nonzero |= bytes[token * element_bytes + i] != std::byte{0};
    }
    return nonzero == nonzero_is_padding;
  }
};

// Calls fn(first, count, padding) for each run of equal mask values of one sample's `mask`, in
// order: a copy per run instead of per token.
template <typename Fn>
void ForEachRun(const MaskRow& mask, Fn&& fn) {
  std::size_t first = 0;
  const std::size_t tokens = mask.size();
  while (first < tokens) {
    const bool padding = mask.Padding(first);
    std::size_t end = first + 1;
    while (end < tokens && mask.Padding(end) == padding) ++end;
    fn(first, end - first, padding);
    first = end;
  }
}

// Sample `sample`'s mask row of a request validated against the layout's mask input.
MaskRow MaskRowOf(const InferenceRequest& request, const TokenLayout& tokens,
                  std::int64_t sample) {
  const auto seq = static_cast<std::size_t>(request.sequence_length);
  const std::span<const std::byte> bytes = request.inputs[*tokens.mask_input].bytes;
  const std::size_t element = bytes.size() / (static_cast<std::size_t>(request.batch_size) * seq);
  return MaskRow{bytes.subspan(static_cast<std::size_t>(sample) * seq * element, seq * element),
                 element, tokens.mask_kind == MaskKind::kKeyPadding};
}

std::int32_t RealTokens(const MaskRow& mask_row) {
  std::int32_t real = 0;
  for (std::size_t t = 0; t < mask_row.size(); ++t) real += mask_row.Padding(t) ? 0 : 1;
  return real;
}

// Copies the real tokens of `request`'s input `input` to `cursor`; returns the end.
std::byte* CopyRealTokens(const InferenceRequest& request, std::size_t input,
                          const TokenLayout& tokens, std::byte* cursor) {
  const std::span<const std::byte> bytes = request.inputs[input].bytes;
  const std::int64_t seq = request.sequence_length;
  const std::size_t token_bytes = bytes.size() / static_cast<std::size_t>(request.batch_size * seq);
  for (std::int64_t b = 0; b < request.batch_size; ++b) {
    const std::byte* sample = bytes.data() + static_cast<std::size_t>(b * seq) * token_bytes;
    ForEachRun(MaskRowOf(request, tokens, b), [&](std::size_t first, std::size_t count, bool pad) {
      if (pad) return;
      std::memcpy(cursor, sample + first * token_bytes, count * token_bytes);
      cursor += count * token_bytes;
    });
  }
  return cursor;
}

// The token inputs of a packed batch, executor input i being the layout's token input i:
// every token with a mask, only the real ones with one (`real_tokens` of them).
Status StageTokenInputs(ExecutorInstance& instance, BatchRequests requests,
                        const TokenLayout& tokens, std::int64_t real_tokens) {
  const InferenceRequest& first = *requests.front();
  for (std::size_t executor_index = 0; executor_index < tokens.token_inputs.size();
       ++executor_index) {
    const std::size_t input = tokens.token_inputs[executor_index];
    // Token bytes are equal across the batch (SameSampleShape), so `total` is exact.
    const std::size_t token_bytes =
        first.inputs[input].bytes.size() /
        static_cast<std::size_t>(RowsOf(first, BatchLayout::kPackedSequences));
    const std::size_t total = token_bytes * static_cast<std::size_t>(real_tokens);
    LTSERVE_ASSIGN_OR_RETURN(std::span<std::byte> buffer, instance.InputBuffer(executor_index, total));
    if (buffer.size() < total) {
      return Internal("input " + std::to_string(input) + ": staging buffer of " +
                      std::to_string(buffer.size()) + " bytes for " + std::to_string(total));
    }
    std::byte* cursor = buffer.data();
    for (const InferenceRequest* request : requests) {
      if (tokens.mask_input) {
        cursor = CopyRealTokens(*request, input, tokens, cursor);
        continue;
      }
      std::span<const std::byte> bytes = request->inputs[input].bytes;
      if (!bytes.empty()) std::memcpy(cursor, bytes.data(), bytes.size());
      cursor += bytes.size();
    }
  }
  return Status::Ok();
}

// An INT32 or INT64 element (`element_bytes` 4 or 8) of a request's integer input.
std::int64_t IntegerAt(std::span<const std::byte> bytes, std::size_t element_bytes,
                       std::size_t index) {
  if (element_bytes == sizeof(std::int32_t)) {
    std::int32_t value = 0;
    std::memcpy(&value, bytes.data() + index * sizeof value, sizeof value);
    return value;
  }
  std::int64_t value = 0;
  std::memcpy(&value, bytes.data() + index * sizeof value, sizeof value);
  return value;
}

// The three int32 executor inputs of a token-id model (kIdsInput, kPositionInput,
// kTypeInput), one value per real token: ids and types narrowed from the request (validated
// against the vocabularies at Enqueue), positions by the model's PositionRule, which counts
// the padding of the whole row.
Status StageTokenIds(ExecutorInstance& instance, BatchRequests requests,
                     const TokenLayout& tokens, std::int64_t real_tokens) {
  const TokenIds& ids = *tokens.ids;
  const std::size_t total = static_cast<std::size_t>(real_tokens) * sizeof(std::int32_t);
  std::array<std::int32_t*, kTokenIdInputs> out{};
  for (std::size_t i = 0; i < kTokenIdInputs; ++i) {
    LTSERVE_ASSIGN_OR_RETURN(std::span<std::byte> buffer, instance.InputBuffer(i, total));
    if (buffer.size() < total) {
      return Internal("token-id input " + std::to_string(i) + ": staging buffer of " +
                      std::to_string(buffer.size()) + " bytes for " + std::to_string(total));
    }
    out[i] = reinterpret_cast<std::int32_t*>(buffer.data());
  }
  std::size_t next = 0;
  for (const InferenceRequest* request : requests) {
    const auto seq = static_cast<std::size_t>(request->sequence_length);
    const auto cells = static_cast<std::size_t>(request->batch_size) * seq;
    const std::span<const std::byte> id_bytes = request->inputs[ids.ids_input].bytes;
    const std::size_t id_element = id_bytes.size() / cells;
    std::span<const std::byte> type_bytes;
    if (ids.type_input) type_bytes = request->inputs[*ids.type_input].bytes;
    const std::size_t type_element = type_bytes.size() / cells;
    for (std::int64_t b = 0; b < request->batch_size; ++b) {
      const std::size_t row = static_cast<std::size_t>(b) * seq;
      std::optional<MaskRow> mask;
      if (tokens.mask_input) mask = MaskRowOf(*request, tokens, b);
      std::int64_t non_padding_ids = 0;
      for (std::size_t t = 0; t < seq; ++t) {
        const std::int64_t id = IntegerAt(id_bytes, id_element, row + t);
        std::int64_t position = static_cast<std::int64_t>(t);
        if (ids.positions == plan::PositionRule::kAfterPadding) {
          non_padding_ids += id != ids.padding_id ? 1 : 0;
          position = id != ids.padding_id ? ids.padding_id + non_padding_ids : ids.padding_id;
        }
        if (mask && mask->Padding(t)) continue;
        out[kIdsInput][next] = static_cast<std::int32_t>(id);
        out[kPositionInput][next] = static_cast<std::int32_t>(position);
        out[kTypeInput][next] =
            type_element == 0 ? 0
                              : static_cast<std::int32_t>(IntegerAt(type_bytes, type_element, row + t));
        ++next;
      }
    }
  }
  if (next != static_cast<std::size_t>(real_tokens)) {
    return Internal("staged " + std::to_string(next) + " token ids for " +
                    std::to_string(real_tokens) + " real tokens");
  }
  return Status::Ok();
}

}  // namespace

std::string ShapeString(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

std::int64_t RowsOf(const InferenceRequest& request, BatchLayout layout) {
  switch (layout) {
    case BatchLayout::kWhole: return 1;
    case BatchLayout::kRows: return request.batch_size;
    case BatchLayout::kPackedSequences: return request.batch_size * request.sequence_length;
  }
  return request.batch_size;
}

Result<BatchShape> StageInputs(ExecutorInstance& instance, BatchRequests requests,
                               BatchLayout layout, std::vector<std::int32_t>* sequence_lengths,
                               const TokenLayout* tokens) {
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
    if (tokens == nullptr) return Internal("a packed batch needs the model's token layout");
    sequence_lengths->clear();
    std::int64_t real_tokens = 0;
    for (const InferenceRequest* request : requests) {
      for (std::int64_t b = 0; b < request->batch_size; ++b) {
        sequence_lengths->push_back(
            tokens->mask_input ? RealTokens(MaskRowOf(*request, *tokens, b))
                               : static_cast<std::int32_t>(request->sequence_length));
        real_tokens += sequence_lengths->back();
      }
    }
    shape.sequence_lengths = *sequence_lengths;
    if (tokens->ids) {
      LTSERVE_RETURN_IF_ERROR(StageTokenIds(instance, requests, *tokens, real_tokens));
      return shape;
    }
    LTSERVE_RETURN_IF_ERROR(StageTokenInputs(instance, requests, *tokens, real_tokens));
    return shape;
  }

  for (std::size_t input = 0; input < first.inputs.size(); ++input) {
    std::size_t total = 0;
    for (const InferenceRequest* request : requests) total += request->inputs[input].size();
    LTSERVE_ASSIGN_OR_RETURN(std::span<std::byte> buffer, instance.InputBuffer(input, total));
    if (buffer.size() < total) {
      return Internal("input " + std::to_string(input) + ": staging buffer of " +
                      std::to_string(buffer.size()) + " bytes for a batch of " +
                      std::to_string(total));
    }
    std::byte* cursor = buffer.data();
    std::int64_t row = 0;
    for (const InferenceRequest* request : requests) {
      const RequestInput& sent = request->inputs[input];
      if (sent.device.data != nullptr) {
        // Its rows stay in GPU memory: the instance copies them device to device.
        if (layout != BatchLayout::kRows) {
          return Internal("an input in GPU memory reaches only a model with a batch dimension");
        }
        shape.device_inputs.push_back(
            DeviceCopy{input, row, request->batch_size, sent.device.data, sent.device.bytes});
      } else if (!sent.bytes.empty()) {
        std::memcpy(cursor, sent.bytes.data(), sent.bytes.size());
      }
      cursor += sent.size();
      row += RowsOf(*request, layout);
    }
    shape.input_dims.push_back(ExecutorDims(first.inputs[input].shape, layout));
  }
  // Outputs the instance writes into GPU memory itself, at the same rows.
  std::int64_t row = 0;
  for (const InferenceRequest* request : requests) {
    for (std::size_t output = 0; output < request->device_outputs.size(); ++output) {
      const DeviceTensor& destination = request->device_outputs[output];
      if (destination.data == nullptr) continue;
      if (layout != BatchLayout::kRows) {
        return Internal("an output in GPU memory comes only from a model with a batch dimension");
      }
      shape.device_outputs.push_back(
          DeviceCopy{output, row, request->batch_size, destination.data, destination.bytes});
    }
    row += RowsOf(*request, layout);
  }
  return shape;
}

Status CheckOutputDims(std::size_t output, const std::vector<std::int64_t>& shape,
                       const std::vector<std::int64_t>& dims, bool batched) {
  const std::size_t first = batched ? 1 : 0;
  bool matches = shape.size() == dims.size() + first;
  for (std::size_t i = 0; matches && i < dims.size(); ++i) {
    matches = dims[i] < 0 || shape[first + i] == dims[i];
  }
  if (matches) return Status::Ok();
  std::vector<std::int64_t> expected = dims;
  if (batched) expected.insert(expected.begin(), -1);
  return Internal("the model answered output " + std::to_string(output) + " with shape " +
                  ShapeString(shape) + " where its config declares " + ShapeString(expected) +
                  " (-1: any size)");
}

Result<std::vector<std::vector<OutputSlice>>> SliceOutputs(
    const ExecutorInstance& instance, BatchRequests requests, std::size_t num_outputs,
    BatchLayout layout, std::span<const std::vector<std::int64_t>> output_dims) {
  std::vector<std::vector<OutputSlice>> slices(requests.size());
  for (auto& per_request : slices) per_request.reserve(num_outputs);
  std::int64_t rows = 0;
  for (const InferenceRequest* request : requests) rows += RowsOf(*request, layout);

  for (std::size_t output = 0; output < num_outputs; ++output) {
    std::span<const std::byte> bytes = instance.Output(output);
    std::vector<std::int64_t> shape = instance.OutputShape(output);
    if (output < output_dims.size() && layout != BatchLayout::kPackedSequences) {
      LTSERVE_RETURN_IF_ERROR(
          CheckOutputDims(output, shape, output_dims[output], layout == BatchLayout::kRows));
    }
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
      if (layout == BatchLayout::kPackedSequences) request_shape.push_back(request.sequence_length);
      request_shape.insert(request_shape.end(), shape.begin() + 1, shape.end());
      slices[r].push_back(OutputSlice{bytes.subspan(offset, length), std::move(request_shape)});
      offset += length;
    }
  }
  return slices;
}

Result<std::vector<std::vector<OutputSlice>>> ScatterMaskedOutputs(
    const ExecutorInstance& instance, BatchRequests requests, const TokenLayout& tokens,
    std::span<const DataType> output_types, std::span<std::vector<std::byte>> buffers) {
  if (!tokens.mask_input) return Internal("scattering outputs needs a mask");
  const std::size_t num_outputs = output_types.size();
  std::int64_t real_tokens = 0;
  for (const InferenceRequest* request : requests) {
    for (std::int64_t b = 0; b < request->batch_size; ++b) {
      real_tokens += RealTokens(MaskRowOf(*request, tokens, b));
    }
  }
  std::vector<std::vector<OutputSlice>> slices(requests.size());
  for (auto& per_request : slices) per_request.reserve(num_outputs);
  for (std::size_t output = 0; output < num_outputs; ++output) {
    const std::size_t token_bytes = tokens.output_token_bytes[output];
    const std::span<const std::byte> packed = instance.Output(output);
    const std::vector<std::int64_t> shape = instance.OutputShape(output);
    if (shape.empty() || shape.front() != real_tokens ||
        packed.size() != static_cast<std::size_t>(real_tokens) * token_bytes) {
      return Internal("output " + std::to_string(output) + " has shape " + ShapeString(shape) +
                      " and " + std::to_string(packed.size()) + " bytes for " +
                      std::to_string(real_tokens) + " real tokens of " +
                      std::to_string(token_bytes) + " bytes");
    }
    std::span<std::byte> buffer = buffers[output];
    const std::byte* source = packed.data();
    std::size_t offset = 0;
    for (std::size_t r = 0; r < requests.size(); ++r) {
      const InferenceRequest& request = *requests[r];
      const std::int64_t seq = request.sequence_length;
      const std::size_t length =
          static_cast<std::size_t>(RowsOf(request, BatchLayout::kPackedSequences)) * token_bytes;
      if (offset + length > buffer.size()) {
        return Internal("masked outputs of " + std::to_string(offset + length) +
                        " bytes exceed the scatter buffer of " + std::to_string(buffer.size()));
      }
      std::byte* target = buffer.data() + offset;
      for (std::int64_t b = 0; b < request.batch_size; ++b) {
        ForEachRun(MaskRowOf(request, tokens, b), [&](std::size_t first, std::size_t count,
                                                      bool pad) {
          std::byte* at = target + (static_cast<std::size_t>(b * seq) + first) * token_bytes;
          if (pad) {
            std::memset(at, 0, count * token_bytes);
          } else {
            std::memcpy(at, source, count * token_bytes);
            source += count * token_bytes;
          }
        });
      }
      const std::int64_t width =
          static_cast<std::int64_t>(token_bytes / ElementSize(output_types[output]));
      slices[r].push_back(
          OutputSlice{buffer.subspan(offset, length), {request.batch_size, seq, width}});
      offset += length;
    }
  }
  return slices;
}

}  // namespace ltserve
