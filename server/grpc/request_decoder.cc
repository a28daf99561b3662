#include "grpc/request_decoder.h"

#include <cstring>
#include <limits>
#include <numeric>

namespace ltserve {

std::string ShapeToString(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return out + "]";
}

namespace {

// Expected shape of an input as sent, batch dimension included when the model batches;
// -1 marks a dimension the request chooses.
std::vector<std::int64_t> ExpectedShape(const TensorSpec& tensor, int max_batch_size) {
  std::vector<std::int64_t> shape;
  if (max_batch_size > 0) shape.push_back(-1);
  shape.insert(shape.end(), tensor.dims.begin(), tensor.dims.end());
  return shape;
}

Status CheckShape(const TensorSpec& tensor, const std::vector<std::int64_t>& shape,
                  int max_batch_size) {
  const std::vector<std::int64_t> expected = ExpectedShape(tensor, max_batch_size);
  bool matches = shape.size() == expected.size();
  for (std::size_t i = 0; matches && i < shape.size(); ++i) {
    matches = shape[i] >= 0 && (expected[i] == -1 || expected[i] == shape[i]);
  }
  if (!matches) {
    return InvalidArgument("input '" + tensor.name + "' has shape " + ShapeToString(shape) +
                           ", model expects " + ShapeToString(expected) +
                           (max_batch_size > 0 ? " (-1: any size; the first dimension is the batch)"
                                               : " (-1: any size)"));
  }
  if (max_batch_size > 0) {
    if (shape[0] < 1) {
      return InvalidArgument("input '" + tensor.name + "' has batch size 0; at least 1 expected");
    }
    if (shape[0] > max_batch_size) {
      return InvalidArgument("input '" + tensor.name + "' has batch size " +
                             std::to_string(shape[0]) + ", larger than the model's max_batch_size " +
                             std::to_string(max_batch_size));
    }
  }
  return Status::Ok();
}

template <typename Out, typename Repeated>
void CopyTyped(const Repeated& values, std::string* out) {
  out->resize(static_cast<std::size_t>(values.size()) * sizeof(Out));
  auto* dst = reinterpret_cast<Out*>(out->data());
  for (int i = 0; i < values.size(); ++i) dst[i] = static_cast<Out>(values.Get(i));
}

// Converts typed `contents` into raw little-endian bytes of `dtype`.
Status ConvertTypedContents(const inference::InferTensorContents& contents, DataType dtype,
                            const std::string& name, std::int64_t elements, std::string* out) {
  int count = 0;
  switch (dtype) {
    case DataType::kFp32: count = contents.fp32_contents_size(); CopyTyped<float>(contents.fp32_contents(), out); break;
    case DataType::kFp64: count = contents.fp64_contents_size(); CopyTyped<double>(contents.fp64_contents(), out); break;
    case DataType::kInt8: count = contents.int_contents_size(); CopyTyped<std::int8_t>(contents.int_contents(), out); break;
    case DataType::kInt16: count = contents.int_contents_size(); CopyTyped<std::int16_t>(contents.int_contents(), out); break;
    case DataType::kInt32: count = contents.int_contents_size(); CopyTyped<std::int32_t>(contents.int_contents(), out); break;
    case DataType::kInt64: count = contents.int64_contents_size(); CopyTyped<std::int64_t>(contents.int64_contents(), out); break;
    case DataType::kUint8: count = contents.uint_contents_size(); CopyTyped<std::uint8_t>(contents.uint_contents(), out); break;
    case DataType::kUint16: count = contents.uint_contents_size(); CopyTyped<std::uint16_t>(contents.uint_contents(), out); break;
    case DataType::kUint32: count = contents.uint_contents_size(); CopyTyped<std::uint32_t>(contents.uint_contents(), out); break;
    case DataType::kUint64: count = contents.uint64_contents_size(); CopyTyped<std::uint64_t>(contents.uint64_contents(), out); break;
    case DataType::kBool: count = contents.bool_contents_size(); CopyTyped<std::uint8_t>(contents.bool_contents(), out); break;
    case DataType::kFp16:
    case DataType::kBf16:
      return InvalidArgument("input '" + name + "' is " + std::string(WireName(dtype)) +
                             ", which has no typed contents field; send it in raw_input_contents");
    case DataType::kInvalid: return InvalidArgument("input '" + name + "' has no data type");
  }
  if (count != elements) {
    return InvalidArgument("input '" + name + "' has " + std::to_string(count) +
                           " values in contents, shape implies " + std::to_string(elements));
  }
  return Status::Ok();
}

// Triton's clients send integer parameters either way: tritonclient's infer(priority=...) as
// uint64_param, hand-written or older clients as int64_param. Both are read; anything else, or a
// value outside [0, max], names the parameter.
Status ReadUnsignedParameter(const google::protobuf::Map<std::string, inference::InferParameter>& params,
                             const std::string& key, std::uint64_t max, std::uint64_t* out) {
  auto it = params.find(key);
  if (it == params.end()) return Status::Ok();
  const std::string expected = "parameter '" + key + "' must be an int64_param or uint64_param";
  std::uint64_t value = 0;
  switch (it->second.parameter_choice_case()) {
    case inference::InferParameter::kInt64Param:
      if (it->second.int64_param() < 0) {
        return InvalidArgument(expected + " in [0, " + std::to_string(max) + "], got " +
                               std::to_string(it->second.int64_param()));
      }
      value = static_cast<std::uint64_t>(it->second.int64_param());
      break;
    case inference::InferParameter::kUint64Param: value = it->second.uint64_param(); break;
    default: return InvalidArgument(expected);
  }
  if (value > max) {
    return InvalidArgument(expected + " in [0, " + std::to_string(max) + "], got " +
                           std::to_string(value));
  }
  *out = value;
  return Status::Ok();
}

constexpr const char* kRegionKey = "shared_memory_region";

// The shared_memory_region / _offset / _byte_size parameters of one tensor, resolved to a
// bounds-checked slice; nullopt when the tensor names no region.
Result<std::optional<SharedMemorySlice>> ReadSharedMemory(
    const google::protobuf::Map<std::string, inference::InferParameter>& params,
    const std::string& what, const SharedMemoryRegistry* shared_memory) {
  auto region = params.find(kRegionKey);
  if (region == params.end()) return std::optional<SharedMemorySlice>();
  if (region->second.parameter_choice_case() != inference::InferParameter::kStringParam) {
    return InvalidArgument(what + ": parameter 'shared_memory_region' must be a string_param");
  }
  if (params.count("shared_memory_byte_size") == 0) {
    return InvalidArgument(what + " names shared memory region '" +
                           region->second.string_param() +
                           "' without parameter 'shared_memory_byte_size'");
  }
  constexpr std::uint64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::uint64_t byte_size = 0;
  std::uint64_t offset = 0;
  LTSERVE_RETURN_IF_ERROR(ReadUnsignedParameter(params, "shared_memory_byte_size", kMax, &byte_size));
  LTSERVE_RETURN_IF_ERROR(ReadUnsignedParameter(params, "shared_memory_offset", kMax, &offset));
  if (shared_memory == nullptr) {
    return InvalidArgument(what + " names a shared memory region; shared memory is not "
                           "available on this endpoint: send the data in the request");
  }
  LTSERVE_ASSIGN_OR_RETURN(SharedMemorySlice slice,
                           shared_memory->Slice(region->second.string_param(), offset, byte_size, what));
  return std::optional<SharedMemorySlice>(std::move(slice));
}

bool IsNumeric(DataType dtype) { return dtype != DataType::kBool && dtype != DataType::kInvalid; }

// The output parameter `classification` (tritonclient's class_count): k > 0 asks for the top k
// classes instead of the tensor. Checked against the config here; a variable class dimension is
// checked again once the output's shape is known.
Status ReadClassCount(const inference::ModelInferRequest::InferRequestedOutputTensor& requested,
                      const TensorSpec& output, std::uint32_t* class_count) {
  std::uint64_t k = 0;
  LTSERVE_RETURN_IF_ERROR(ReadUnsignedParameter(requested.parameters(), "classification",
                                                std::numeric_limits<std::uint32_t>::max(), &k));
  if (requested.parameters().count("classification") != 0 && k == 0) {
    return InvalidArgument("parameter 'classification' of output '" + output.name +
                           "' must be at least 1 (the number of top classes to return)");
  }
  if (k == 0) return Status::Ok();
  if (!IsNumeric(output.dtype)) {
    return InvalidArgument("output '" + output.name + "' is " + std::string(WireName(output.dtype)) +
                           "; classification needs a numeric output");
  }
  std::int64_t classes = 1;
  for (std::int64_t dim : output.dims) classes = dim < 0 ? -1 : classes * dim;
  if (classes > 0 && k > static_cast<std::uint64_t>(classes)) {
    return InvalidArgument("output '" + output.name + "' has " + std::to_string(classes) +
                           " classes (dims " + ShapeToString(output.dims) +
                           "); classification asks for " + std::to_string(k));
  }
  *class_count = static_cast<std::uint32_t>(k);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<DecodedRequest>> DecodeInferRequest(
    const inference::ModelInferRequest& message, const ModelSpec& spec,
    const SharedMemoryRegistry* shared_memory, std::optional<std::int64_t> direct_device) {
  // A CUDA region the executor reaches itself: on its GPU, and with a device address.
  const auto on_direct_device = [&](const SharedMemorySlice& slice) -> std::byte* {
    const SharedMemoryRegion& region = *slice.region;
    if (!direct_device || region.kind() != SharedMemoryKind::kCuda ||
        region.device_id() != *direct_device || region.device_data() == nullptr) {
      return nullptr;
    }
    return static_cast<std::byte*>(region.device_data()) + slice.offset;
  };
  auto decoded = std::make_unique<DecodedRequest>();
  auto request = std::make_unique<InferenceRequest>();
  // As in Triton, raw_input_contents holds one entry per input not in shared memory, in order.
  int inputs_in_message = 0;
  for (const auto& input : message.inputs()) {
    inputs_in_message += input.parameters().count(kRegionKey) == 0 ? 1 : 0;
  }
  const bool raw = message.raw_input_contents_size() > 0;
  if (raw && message.raw_input_contents_size() != inputs_in_message) {
    return InvalidArgument("request has " + std::to_string(inputs_in_message) +
                           " inputs not in shared memory but " +
                           std::to_string(message.raw_input_contents_size()) +
                           " raw_input_contents; one entry per such input expected");
  }
  int next_raw = 0;
  if (message.inputs_size() != static_cast<int>(spec.inputs.size())) {
    std::string names;
    for (const auto& t : spec.inputs) names += (names.empty() ? "'" : ", '") + t.name + "'";
    return InvalidArgument("model '" + spec.name + "' expects " +
                           std::to_string(spec.inputs.size()) + " input(s) (" + names +
                           "), request has " + std::to_string(message.inputs_size()));
  }

  // Inputs may arrive in any order; the executor wants config order.
  request->inputs.resize(spec.inputs.size());
  std::vector<bool> seen(spec.inputs.size(), false);
  decoded->converted.reserve(spec.inputs.size());  // no reallocation: spans point into it
  std::int64_t batch_size = spec.max_batch_size > 0 ? -1 : 1;
  for (int m = 0; m < message.inputs_size(); ++m) {
    const auto& input = message.inputs(m);
    std::size_t index = spec.inputs.size();
    for (std::size_t i = 0; i < spec.inputs.size(); ++i) {
      if (spec.inputs[i].name == input.name()) index = i;
    }
    if (index == spec.inputs.size()) {
      std::string names;
      for (const auto& t : spec.inputs) names += (names.empty() ? "'" : ", '") + t.name + "'";
      return InvalidArgument("unknown input '" + input.name() + "' for model '" + spec.name +
                             "'; expected " + names);
    }
    if (seen[index]) return InvalidArgument("input '" + input.name() + "' appears twice");
    seen[index] = true;
    const TensorSpec& tensor = spec.inputs[index];

    const DataType dtype = DataTypeFromWireName(input.datatype());
    if (dtype != tensor.dtype) {
      return InvalidArgument("input '" + tensor.name + "' has datatype '" + input.datatype() +
                             "', model expects " + std::string(WireName(tensor.dtype)));
    }
    std::vector<std::int64_t> shape(input.shape().begin(), input.shape().end());
    LTSERVE_RETURN_IF_ERROR(CheckShape(tensor, shape, spec.max_batch_size));
    if (spec.max_batch_size > 0) {
      if (batch_size >= 0 && shape[0] != batch_size) {
        return InvalidArgument("inputs disagree on the batch size: '" + tensor.name + "' has " +
                               std::to_string(shape[0]) + ", another input " +
                               std::to_string(batch_size));
      }
      batch_size = shape[0];
    }
    const std::int64_t elements = std::accumulate(shape.begin(), shape.end(), std::int64_t{1},
                                                  std::multiplies<>());
    const std::size_t expected_bytes = static_cast<std::size_t>(elements) * ElementSize(dtype);

    std::span<const std::byte> bytes;
    DeviceTensor device_input;
    LTSERVE_ASSIGN_OR_RETURN(
        std::optional<SharedMemorySlice> region,
        ReadSharedMemory(input.parameters(), "input '" + tensor.name + "'", shared_memory));
    if (region.has_value()) {
      if (input.has_contents()) {
        return InvalidArgument("input '" + tensor.name +
                               "' has both contents and a shared memory region; use one");
      }
      if (region->byte_size != expected_bytes) {
        return InvalidArgument("input '" + tensor.name + "' has shared_memory_byte_size " +
                               std::to_string(region->byte_size) + "; shape " +
                               ShapeToString(shape) + " of " + std::string(WireName(dtype)) +
                               " needs " + std::to_string(expected_bytes));
      }
      std::byte* device = on_direct_device(*region);
      if (device != nullptr) {
        device_input = DeviceTensor{device, region->byte_size};  // no copy: the executor reads it
      } else if (const std::byte* host = region->region->host_data(); host != nullptr) {
        bytes = std::span(host + region->offset, region->byte_size);  // no copy
      } else {
        std::string& out = decoded->converted.emplace_back(region->byte_size, '\0');
        LTSERVE_RETURN_IF_ERROR(region->region->CopyToHost(
            region->offset, std::as_writable_bytes(std::span(out.data(), out.size()))));
        bytes = std::as_bytes(std::span(out.data(), out.size()));
      }
      decoded->input_regions.push_back(std::move(*region));
    } else if (raw) {
      if (input.has_contents()) {
        return InvalidArgument("input '" + tensor.name +
                               "' has typed contents while the request uses raw_input_contents; "
                               "use one or the other for all inputs");
      }
      const std::string& data = message.raw_input_contents(next_raw++);
      if (data.size() != expected_bytes) {
        return InvalidArgument("input '" + tensor.name + "' has " + std::to_string(data.size()) +
                               " bytes of raw contents; shape " + ShapeToString(shape) + " of " +
                               std::string(WireName(dtype)) + " needs " +
                               std::to_string(expected_bytes));
      }
      bytes = std::as_bytes(std::span(data.data(), data.size()));
    } else {
      if (!input.has_contents()) {
        return InvalidArgument("input '" + tensor.name +
                               "' has no data: set its contents or raw_input_contents");
      }
      std::string& out = decoded->converted.emplace_back();
      LTSERVE_RETURN_IF_ERROR(
          ConvertTypedContents(input.contents(), dtype, tensor.name, elements, &out));
      bytes = std::as_bytes(std::span(out.data(), out.size()));
    }
    request->inputs[index] = RequestInput{bytes, std::move(shape), device_input};
  }
  request->batch_size = batch_size;

  if (message.outputs_size() == 0) {
    for (std::size_t i = 0; i < spec.outputs.size(); ++i) {
      decoded->requested_outputs.push_back(static_cast<int>(i));
    }
    decoded->class_counts.assign(spec.outputs.size(), 0);
    decoded->output_regions.resize(spec.outputs.size());
    decoded->output_on_device.assign(spec.outputs.size(), false);
  }
  for (const auto& requested : message.outputs()) {
    int index = -1;
    for (std::size_t i = 0; i < spec.outputs.size(); ++i) {
      if (spec.outputs[i].name == requested.name()) index = static_cast<int>(i);
    }
    if (index < 0) {
      std::string names;
      for (const auto& t : spec.outputs) names += (names.empty() ? "'" : ", '") + t.name + "'";
      return InvalidArgument("unknown output '" + requested.name() + "' requested; model '" +
                             spec.name + "' has " + names);
    }
    // Each copy would be a full copy of the output in the response: a small request naming
    // one output a thousand times would make the server build a response a thousand times
    // its size.
    for (int earlier : decoded->requested_outputs) {
      if (earlier == index) {
        return InvalidArgument("output '" + requested.name() +
                               "' is requested twice; name each output at most once");
      }
    }
    std::uint32_t class_count = 0;
    LTSERVE_RETURN_IF_ERROR(ReadClassCount(requested, spec.outputs[index], &class_count));
    LTSERVE_ASSIGN_OR_RETURN(
        std::optional<SharedMemorySlice> region,
        ReadSharedMemory(requested.parameters(), "output '" + requested.name() + "'",
                         shared_memory));
    std::byte* device = region && class_count == 0 ? on_direct_device(*region) : nullptr;
    if (device != nullptr) {
      request->device_outputs.resize(spec.outputs.size());
      request->device_outputs[static_cast<std::size_t>(index)] = DeviceTensor{device, region->byte_size};
    }
    decoded->requested_outputs.push_back(index);
    decoded->class_counts.push_back(class_count);
    decoded->output_regions.push_back(std::move(region));
    decoded->output_on_device.push_back(device != nullptr);
  }

  std::uint64_t priority = 0;
  LTSERVE_RETURN_IF_ERROR(ReadUnsignedParameter(message.parameters(), "priority",
                                                std::numeric_limits<std::uint32_t>::max(), &priority));
  LTSERVE_RETURN_IF_ERROR(ReadUnsignedParameter(message.parameters(), "timeout",
                                                std::numeric_limits<std::int64_t>::max(),
                                                &request->timeout_us));
  request->priority = static_cast<std::uint32_t>(priority);
  decoded->request = std::move(request);
  return decoded;
}

}  // namespace ltserve
