#include "http/kserve_json.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include "common/data_type.h"

namespace ltserve {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Tensor element types as the JSON carries them; BYTES is the one ltserve's DataType lacks.
struct ElementType {
  DataType dtype = DataType::kInvalid;
  bool bytes = false;  // BYTES: each element a string, sent as its 4-byte length and its bytes
};

std::optional<ElementType> ElementTypeOf(const std::string& name) {
  if (name == "BYTES") return ElementType{DataType::kInvalid, true};
  const DataType dtype = DataTypeFromWireName(name);
  if (dtype == DataType::kInvalid) return std::nullopt;
  return ElementType{dtype, false};
}

const char* JsonTypeName(const json& value) {
  if (value.is_number_float()) return "a fraction";
  if (value.is_number_unsigned()) return "an unsigned integer";
  if (value.is_number_integer()) return "a negative integer";
  return value.type_name();
}

template <typename T>
void AppendRaw(T value, std::string* out) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out->append(bytes, sizeof(T));
}

template <typename T>
Status AppendInteger(const json& value, std::string* out) {
  const Status out_of_range = InvalidArgument(
      std::is_unsigned_v<T>
          ? "a non-negative integer of at most " + std::to_string(std::numeric_limits<T>::max())
          : "an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
                std::to_string(std::numeric_limits<T>::max()) + "]");
  if (!value.is_number_integer()) return out_of_range;
  if (value.is_number_unsigned()) {
    const auto v = value.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return out_of_range;
    AppendRaw(static_cast<T>(v), out);
    return Status::Ok();
  }
  const auto v = value.get<std::int64_t>();
  if constexpr (std::is_unsigned_v<T>) {
    return out_of_range;
  } else {
    if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return out_of_range;
    AppendRaw(static_cast<T>(v), out);
    return Status::Ok();
  }
}

// Appends one element; on a mismatch the status message says what was expected.
Status AppendElement(const json& value, ElementType type, std::string* out) {
  if (type.bytes) {
    if (!value.is_string()) return InvalidArgument("a string");
    const std::string& text = value.get_ref<const std::string&>();
    AppendRaw(static_cast<std::uint32_t>(text.size()), out);
    out->append(text);
    return Status::Ok();
  }
  switch (type.dtype) {
    case DataType::kBool:
      if (!value.is_boolean()) return InvalidArgument("true or false");
      out->push_back(value.get<bool>() ? 1 : 0);
      return Status::Ok();
    case DataType::kUint8: return AppendInteger<std::uint8_t>(value, out);
    case DataType::kUint16: return AppendInteger<std::uint16_t>(value, out);
    case DataType::kUint32: return AppendInteger<std::uint32_t>(value, out);
    case DataType::kUint64: return AppendInteger<std::uint64_t>(value, out);
    case DataType::kInt8: return AppendInteger<std::int8_t>(value, out);
    case DataType::kInt16: return AppendInteger<std::int16_t>(value, out);
    case DataType::kInt32: return AppendInteger<std::int32_t>(value, out);
    case DataType::kInt64: return AppendInteger<std::int64_t>(value, out);
    case DataType::kFp32:
      if (!value.is_number()) return InvalidArgument("a number");
      AppendRaw(static_cast<float>(value.get<double>()), out);
      return Status::Ok();
    case DataType::kFp64:
      if (!value.is_number()) return InvalidArgument("a number");
      AppendRaw(value.get<double>(), out);
      return Status::Ok();
    case DataType::kFp16:
    case DataType::kBf16:
    case DataType::kInvalid: break;
  }
  return InvalidArgument("no JSON value");
}

// Tensor data as Triton accepts it: a flat array in row-major order, or arrays nested by
// dimension. Counts elements as it goes.
Status FlattenData(const json& data, ElementType type, const std::string& input, int depth,
                   std::int64_t* count, std::string* out) {
  if (depth > kMaxJsonDepth) {
    return InvalidArgument("input '" + input + "': 'data' is nested deeper than " +
                           std::to_string(kMaxJsonDepth) + " arrays");
  }
  if (data.is_array()) {
    for (const json& element : data) {
      LTSERVE_RETURN_IF_ERROR(FlattenData(element, type, input, depth + 1, count, out));
    }
    return Status::Ok();
  }
  if (Status appended = AppendElement(data, type, out); !appended.ok()) {
    return InvalidArgument("input '" + input + "': element " + std::to_string(*count) +
                           " of 'data' is " + JsonTypeName(data) + ", expected " +
                           appended.message());
  }
  ++*count;
  return Status::Ok();
}

Result<std::string> StringMember(const json& object, const char* key, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end()) return InvalidArgument(where + " has no '" + key + "'");
  if (!it->is_string()) {
    return InvalidArgument(where + ": '" + key + "' must be a string, got " + JsonTypeName(*it));
  }
  return it->get<std::string>();
}

// A JSON parameter as Triton's clients send it: bool, integer, fraction or string.
Result<inference::InferParameter> ToParameter(const json& value, const std::string& key) {
  inference::InferParameter parameter;
  if (value.is_boolean()) {
    parameter.set_bool_param(value.get<bool>());
  } else if (value.is_number_unsigned()) {
    parameter.set_uint64_param(value.get<std::uint64_t>());
  } else if (value.is_number_integer()) {
    parameter.set_int64_param(value.get<std::int64_t>());
  } else if (value.is_number_float()) {
    parameter.set_double_param(value.get<double>());
  } else if (value.is_string()) {
    parameter.set_string_param(value.get<std::string>());
  } else {
    return InvalidArgument("parameter '" + key + "' must be a bool, number or string, got " +
                           JsonTypeName(value));
  }
  return parameter;
}

Result<const json*> ParametersOf(const json& object, const std::string& where) {
  static const json kNone = json::object();
  auto it = object.find("parameters");
  if (it == object.end()) return &kNone;
  if (!it->is_object()) {
    return InvalidArgument(where + ": 'parameters' must be an object, got " + JsonTypeName(*it));
  }
  return &*it;
}

constexpr const char* kSharedMemoryKeys[] = {"shared_memory_region", "shared_memory_offset",
                                             "shared_memory_byte_size"};

// An input in shared memory: its parameters go to the message, where the request decoder reads
// them as it does gRPC's; it carries no data and no binary part.
Result<bool> CopySharedMemoryParameters(const json& parameters, const std::string& where,
                                        inference::ModelInferRequest::InferInputTensor* tensor) {
  if (!parameters.contains("shared_memory_region")) return false;
  if (parameters.contains("binary_data_size")) {
    return InvalidArgument(where + " sets both shared_memory_region and binary_data_size; use one");
  }
  for (const char* key : kSharedMemoryKeys) {
    if (auto it = parameters.find(key); it != parameters.end()) {
      LTSERVE_ASSIGN_OR_RETURN((*tensor->mutable_parameters())[key], ToParameter(*it, key));
    }
  }
  return true;
}

Result<bool> BoolParameter(const json& parameters, const char* key, const std::string& where) {
  auto it = parameters.find(key);
  if (it == parameters.end()) return false;
  if (!it->is_boolean()) {
    return InvalidArgument(where + ": parameter '" + key + "' must be true or false, got " +
                           JsonTypeName(*it));
  }
  return it->get<bool>();
}

Status ParseInput(const json& input, std::size_t position, std::string_view binary,
                  std::size_t* binary_offset, inference::ModelInferRequest* message) {
  std::string where = "input " + std::to_string(position);
  if (!input.is_object()) return InvalidArgument(where + " must be an object");
  LTSERVE_ASSIGN_OR_RETURN(const std::string name, StringMember(input, "name", where));
  where = "input '" + name + "'";
  LTSERVE_ASSIGN_OR_RETURN(const std::string datatype, StringMember(input, "datatype", where));
  auto shape_it = input.find("shape");
  if (shape_it == input.end() || !shape_it->is_array()) {
    return InvalidArgument(where + " needs 'shape', an array of non-negative integers");
  }
  auto* tensor = message->add_inputs();
  tensor->set_name(name);
  tensor->set_datatype(datatype);
  std::int64_t elements = 1;
  for (const json& dim : *shape_it) {
    if (!dim.is_number_unsigned() ||
        dim.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return InvalidArgument(where + ": 'shape' must hold non-negative integers, got " +
                             dim.dump());
    }
    const auto d = static_cast<std::int64_t>(dim.get<std::uint64_t>());
    if (d != 0 && elements > std::numeric_limits<std::int64_t>::max() / d) {
      return InvalidArgument(where + ": shape " + shape_it->dump() + " has too many elements");
    }
    elements *= d;
    tensor->add_shape(d);
  }
  LTSERVE_ASSIGN_OR_RETURN(const json* parameters, ParametersOf(input, where));
  LTSERVE_ASSIGN_OR_RETURN(const bool in_shared_memory,
                           CopySharedMemoryParameters(*parameters, where, tensor));
  if (in_shared_memory) {
    if (input.contains("data")) {
      return InvalidArgument(where + " sets both shared_memory_region and 'data'; use one");
    }
    return Status::Ok();
  }
  const auto size_it = parameters->find("binary_data_size");
  const bool has_binary = size_it != parameters->end();
  const auto data_it = input.find("data");
  const bool has_data = data_it != input.end();
  if (has_binary == has_data) {
    return InvalidArgument(where + " must set exactly one of 'data' and 'binary_data_size' in "
                           "'parameters'; it sets " +
                           std::string(has_data ? "both" : "neither"));
  }
  std::string* contents = message->add_raw_input_contents();
  if (has_binary) {
    if (!size_it->is_number_unsigned()) {
      return InvalidArgument(where + ": 'binary_data_size' must be a non-negative integer, got " +
                             size_it->dump());
    }
    const auto size = size_it->get<std::uint64_t>();
    const std::size_t left = binary.size() - *binary_offset;
    if (size > left) {
      return InvalidArgument(where + " has binary_data_size " + std::to_string(size) + ", but only " +
                             std::to_string(left) +
                             " bytes of binary data follow the JSON for it (check "
                             "Inference-Header-Content-Length)");
    }
    contents->assign(binary.substr(*binary_offset, size));
    *binary_offset += size;
    return Status::Ok();
  }
  const std::optional<ElementType> type = ElementTypeOf(datatype);
  if (!type.has_value()) {
    return InvalidArgument(where + " has unknown datatype '" + datatype +
                           "'; expected BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, "
                           "INT64, FP16, FP32, FP64, BF16 or BYTES");
  }
  if (type->dtype == DataType::kFp16 || type->dtype == DataType::kBf16) {
    // Triton's words, so that a client's error handling matches.
    return InvalidArgument("receiving " + datatype +
                           " data via JSON is not supported. Please use the binary data format "
                           "for input " + name);
  }
  std::int64_t count = 0;
  LTSERVE_RETURN_IF_ERROR(FlattenData(*data_it, *type, name, 0, &count, contents));
  if (count != elements) {
    return InvalidArgument(where + " has " + std::to_string(count) + " elements in 'data', shape " +
                           shape_it->dump() + " needs " + std::to_string(elements));
  }
  return Status::Ok();
}

Status ParseOutput(const json& output, std::size_t position, HttpInferRequest* request) {
  std::string where = "output " + std::to_string(position);
  if (!output.is_object()) return InvalidArgument(where + " must be an object");
  LTSERVE_ASSIGN_OR_RETURN(const std::string name, StringMember(output, "name", where));
  where = "output '" + name + "'";
  auto* requested = request->message->add_outputs();
  requested->set_name(name);
  LTSERVE_ASSIGN_OR_RETURN(const json* parameters, ParametersOf(output, where));
  for (const auto& [key, value] : parameters->items()) {
    if (key == "binary_data") {
      LTSERVE_ASSIGN_OR_RETURN(request->binary_outputs[name],
                               BoolParameter(*parameters, "binary_data", where));
      continue;
    }
    LTSERVE_ASSIGN_OR_RETURN((*requested->mutable_parameters())[key], ToParameter(value, key));
  }
  return Status::Ok();
}

Result<std::size_t> ElementCount(const inference::ModelInferResponse::InferOutputTensor& tensor) {
  std::size_t count = 1;
  for (std::int64_t dim : tensor.shape()) {
    if (dim < 0) return Internal("output '" + tensor.name() + "' has a negative dimension");
    count *= static_cast<std::size_t>(dim);
  }
  return count;
}

template <typename T>
void AppendNumbers(std::string_view bytes, ordered_json* data) {
  for (std::size_t offset = 0; offset + sizeof(T) <= bytes.size(); offset += sizeof(T)) {
    T value;
    std::memcpy(&value, bytes.data() + offset, sizeof(T));
    if constexpr (std::is_same_v<T, float>) {
      data->push_back(static_cast<double>(value));
    } else {
      data->push_back(value);
    }
  }
}

Result<ordered_json> OutputData(const inference::ModelInferResponse::InferOutputTensor& tensor, std::string_view bytes) {
  LTSERVE_ASSIGN_OR_RETURN(const std::size_t elements, ElementCount(tensor));
  const std::optional<ElementType> type = ElementTypeOf(tensor.datatype());
  if (!type.has_value()) return Internal("output '" + tensor.name() + "' has no known datatype");
  if (type->dtype == DataType::kFp16 || type->dtype == DataType::kBf16) {
    return InvalidArgument("sending " + tensor.datatype() +
                           " data via JSON is not supported. Please use the binary data format "
                           "for output");
  }
  const auto mismatch = [&] {
    return Internal("output '" + tensor.name() + "' has " + std::to_string(bytes.size()) +
                    " bytes, which do not match its shape");
  };
  ordered_json data = ordered_json::array();
  if (type->bytes) {
    std::size_t offset = 0;
    for (std::size_t e = 0; e < elements; ++e) {
      std::uint32_t length = 0;
      if (offset + sizeof(length) > bytes.size()) return mismatch();
      std::memcpy(&length, bytes.data() + offset, sizeof(length));
      offset += sizeof(length);
      if (length > bytes.size() - offset) return mismatch();
      data.push_back(std::string(bytes.substr(offset, length)));
      offset += length;
    }
    if (offset != bytes.size()) return mismatch();
    return data;
  }
  if (bytes.size() != elements * ElementSize(type->dtype)) return mismatch();
  switch (type->dtype) {
    case DataType::kBool:
      for (char b : bytes) data.push_back(b != 0);
      break;
    case DataType::kUint8: AppendNumbers<std::uint8_t>(bytes, &data); break;
    case DataType::kUint16: AppendNumbers<std::uint16_t>(bytes, &data); break;
    case DataType::kUint32: AppendNumbers<std::uint32_t>(bytes, &data); break;
    case DataType::kUint64: AppendNumbers<std::uint64_t>(bytes, &data); break;
    case DataType::kInt8: AppendNumbers<std::int8_t>(bytes, &data); break;
    case DataType::kInt16: AppendNumbers<std::int16_t>(bytes, &data); break;
    case DataType::kInt32: AppendNumbers<std::int32_t>(bytes, &data); break;
    case DataType::kInt64: AppendNumbers<std::int64_t>(bytes, &data); break;
    case DataType::kFp32: AppendNumbers<float>(bytes, &data); break;
    case DataType::kFp64: AppendNumbers<double>(bytes, &data); break;
    case DataType::kFp16:
    case DataType::kBf16:
    case DataType::kInvalid: break;
  }
  return data;
}

std::string Base64(const std::string& bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const auto n = (static_cast<unsigned char>(bytes[i]) << 16) |
                   (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                   static_cast<unsigned char>(bytes[i + 2]);
    out += {kAlphabet[(n >> 18) & 63], kAlphabet[(n >> 12) & 63], kAlphabet[(n >> 6) & 63],
            kAlphabet[n & 63]};
  }
  if (i + 1 == bytes.size()) {
    const auto n = static_cast<unsigned char>(bytes[i]) << 16;
    out += {kAlphabet[(n >> 18) & 63], kAlphabet[(n >> 12) & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    const auto n = (static_cast<unsigned char>(bytes[i]) << 16) |
                   (static_cast<unsigned char>(bytes[i + 1]) << 8);
    out += {kAlphabet[(n >> 18) & 63], kAlphabet[(n >> 12) & 63], kAlphabet[(n >> 6) & 63], '='};
  }
  return out;
}

using google::protobuf::FieldDescriptor;

ordered_json FieldValue(const google::protobuf::Message& message, const FieldDescriptor* field,
                        int index) {
  const google::protobuf::Reflection* r = message.GetReflection();
  const bool repeated = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return repeated ? r->GetRepeatedInt32(message, field, index) : r->GetInt32(message, field);
    case FieldDescriptor::CPPTYPE_INT64:
      return repeated ? r->GetRepeatedInt64(message, field, index) : r->GetInt64(message, field);
    case FieldDescriptor::CPPTYPE_UINT32:
      return repeated ? r->GetRepeatedUInt32(message, field, index) : r->GetUInt32(message, field);
    case FieldDescriptor::CPPTYPE_UINT64:
      return repeated ? r->GetRepeatedUInt64(message, field, index) : r->GetUInt64(message, field);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return repeated ? r->GetRepeatedDouble(message, field, index) : r->GetDouble(message, field);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return repeated ? r->GetRepeatedFloat(message, field, index) : r->GetFloat(message, field);
    case FieldDescriptor::CPPTYPE_BOOL:
      return repeated ? r->GetRepeatedBool(message, field, index) : r->GetBool(message, field);
    case FieldDescriptor::CPPTYPE_ENUM:
      return (repeated ? r->GetRepeatedEnum(message, field, index) : r->GetEnum(message, field))
          ->name();
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string value = repeated ? r->GetRepeatedString(message, field, index)
                                   : r->GetString(message, field);
      return field->type() == FieldDescriptor::TYPE_BYTES ? Base64(value) : value;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return MessageToJson(repeated ? r->GetRepeatedMessage(message, field, index)
                                    : r->GetMessage(message, field));
  }
  return nullptr;
}

std::string MapKey(const google::protobuf::Message& entry) {
  const FieldDescriptor* key = entry.GetDescriptor()->map_key();
  const ordered_json value = FieldValue(entry, key, -1);
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace

Result<json> ParseJson(std::string_view text, const std::string& what) {
  bool too_deep = false;
  const json::parser_callback_t limit_depth = [&too_deep](int depth, json::parse_event_t,
                                                          json&) {
    if (depth > kMaxJsonDepth) too_deep = true;
    return !too_deep;
  };
  try {
    json parsed = json::parse(text.begin(), text.end(), limit_depth);
    if (too_deep) {
      return InvalidArgument(what + " is nested deeper than " + std::to_string(kMaxJsonDepth) +
                             " levels");
    }
    return parsed;
  } catch (const json::exception& e) {
    return InvalidArgument("failed to parse the " + what + ": " + e.what());
  }
}

Result<HttpInferRequest> ParseInferRequest(std::string_view body,
                                           std::optional<std::size_t> header_length,
                                           const std::string& model_name,
                                           const std::string& model_version,
                                           std::size_t max_json_bytes) {
  const std::size_t json_length = header_length.value_or(body.size());
  if (json_length > body.size()) {
    return InvalidArgument("Inference-Header-Content-Length is " + std::to_string(json_length) +
                           ", more than the " + std::to_string(body.size()) +
                           " bytes of the (decompressed) body");
  }
  if (json_length == 0) {
    return InvalidArgument("the request has no JSON header: the body is empty");
  }
  if (json_length > max_json_bytes) {
    return InvalidArgument("the request JSON has " + std::to_string(json_length) +
                           " bytes, more than the " + std::to_string(max_json_bytes) +
                           " this server parses; send large tensors as binary data "
                           "(parameters.binary_data_size)");
  }
  LTSERVE_ASSIGN_OR_RETURN(const json request, ParseJson(body.substr(0, json_length), "request JSON"));
  if (!request.is_object()) return InvalidArgument("the request JSON must be an object");
  const std::string_view binary = body.substr(json_length);

  HttpInferRequest out;
  out.message = std::make_unique<inference::ModelInferRequest>();
  inference::ModelInferRequest& message = *out.message;
  message.set_model_name(model_name);
  message.set_model_version(model_version);
  if (auto id = request.find("id"); id != request.end()) {
    if (!id->is_string()) return InvalidArgument("'id' must be a string, got " + std::string(JsonTypeName(*id)));
    message.set_id(id->get<std::string>());
  }
  LTSERVE_ASSIGN_OR_RETURN(const json* parameters, ParametersOf(request, "the request"));
  for (const auto& [key, value] : parameters->items()) {
    if (key == "binary_data_output") {
      LTSERVE_ASSIGN_OR_RETURN(out.binary_by_default,
                               BoolParameter(*parameters, "binary_data_output", "the request"));
      continue;
    }
    LTSERVE_ASSIGN_OR_RETURN((*message.mutable_parameters())[key], ToParameter(value, key));
  }
  auto inputs = request.find("inputs");
  if (inputs == request.end() || !inputs->is_array()) {
    return InvalidArgument("the request JSON needs 'inputs', an array of tensors");
  }
  std::size_t binary_offset = 0;
  for (std::size_t i = 0; i < inputs->size(); ++i) {
    LTSERVE_RETURN_IF_ERROR(ParseInput((*inputs)[i], i, binary, &binary_offset, &message));
  }
  if (binary_offset != binary.size()) {
    return InvalidArgument(std::to_string(binary.size() - binary_offset) +
                           " bytes of binary data follow the inputs' binary_data_size; expected "
                           "none (check Inference-Header-Content-Length)");
  }
  if (auto outputs = request.find("outputs"); outputs != request.end()) {
    if (!outputs->is_array()) return InvalidArgument("'outputs' must be an array");
    for (std::size_t i = 0; i < outputs->size(); ++i) {
      LTSERVE_RETURN_IF_ERROR(ParseOutput((*outputs)[i], i, &out));
    }
  }
  return out;
}

Result<HttpInferRequest> ParseRawBinaryRequest(std::string_view body,
                                               const inference::ModelConfig& config,
                                               const std::string& model_name,
                                               const std::string& model_version) {
  const std::string what = "a raw binary request (Inference-Header-Content-Length 0)";
  if (config.input_size() != 1) {
    return InvalidArgument(what + " needs a model with exactly one input; '" + model_name +
                           "' has " + std::to_string(config.input_size()));
  }
  const inference::ModelInput& input = config.input(0);
  // TYPE_FP32 -> FP32; the config's TYPE_STRING is the protocol's BYTES.
  std::string datatype = inference::DataType_Name(input.data_type());
  if (datatype.rfind("TYPE_", 0) == 0) datatype = datatype.substr(5);
  if (datatype == "STRING") datatype = "BYTES";
  const std::optional<ElementType> type = ElementTypeOf(datatype);
  if (!type.has_value()) return InvalidArgument("input '" + input.name() + "' has no datatype");
  std::vector<std::int64_t> shape;
  if (config.max_batch_size() > 0) shape.push_back(1);
  if (type->bytes) {
    if (input.dims_size() != 1 || (input.dims(0) != 1 && input.dims(0) != -1)) {
      return InvalidArgument(what + " of BYTES needs the input's shape to be [1]");
    }
    shape.push_back(1);
  } else {
    std::size_t fixed_bytes = ElementSize(type->dtype);
    int variable = -1;
    for (int d = 0; d < input.dims_size(); ++d) {
      if (input.dims(d) < 0) {
        if (variable >= 0) {
          return InvalidArgument(what + " needs at most one variable dimension; input '" +
                                 input.name() + "' has more");
        }
        variable = static_cast<int>(shape.size());
        shape.push_back(0);
      } else {
        fixed_bytes *= static_cast<std::size_t>(input.dims(d));
        shape.push_back(input.dims(d));
      }
    }
    if (variable >= 0) {
      if (fixed_bytes == 0 || body.size() % fixed_bytes != 0) {
        return InvalidArgument(what + ": " + std::to_string(body.size()) +
                               " bytes are not a whole number of elements of input '" +
                               input.name() + "'");
      }
      shape[static_cast<std::size_t>(variable)] = static_cast<std::int64_t>(body.size() / fixed_bytes);
    }
  }
  HttpInferRequest out;
  out.message = std::make_unique<inference::ModelInferRequest>();
  out.message->set_model_name(model_name);
  out.message->set_model_version(model_version);
  auto* tensor = out.message->add_inputs();
  tensor->set_name(input.name());
  tensor->set_datatype(datatype);
  for (std::int64_t d : shape) tensor->add_shape(d);
  out.message->add_raw_input_contents(std::string(body));
  out.binary_by_default = true;
  return out;
}

Result<HttpInferResponse> WriteInferResponse(const inference::ModelInferResponse& response,
                                             const HttpInferRequest& request) {
  ordered_json out = ordered_json::object();
  if (!response.id().empty()) out["id"] = response.id();
  out["model_name"] = response.model_name();
  out["model_version"] = response.model_version();
  ordered_json outputs = ordered_json::array();
  std::string binary;
  for (int i = 0; i < response.outputs_size(); ++i) {
    const inference::ModelInferResponse::InferOutputTensor& tensor = response.outputs(i);
    const std::string_view bytes = i < response.raw_output_contents_size()
                                       ? std::string_view(response.raw_output_contents(i))
                                       : std::string_view();
    ordered_json output = ordered_json::object();
    output["name"] = tensor.name();
    output["datatype"] = tensor.datatype();
    output["shape"] = ordered_json::array();
    for (std::int64_t dim : tensor.shape()) output["shape"].push_back(dim);
    if (tensor.parameters().count("shared_memory_region") != 0) {
      // Written into the client's region: Triton answers where, not the data.
      ordered_json parameters = ordered_json::object();
      for (const char* key : kSharedMemoryKeys) {
        if (auto it = tensor.parameters().find(key); it != tensor.parameters().end()) {
          if (it->second.has_string_param()) {
            parameters[key] = it->second.string_param();
          } else {
            parameters[key] = it->second.uint64_param();
          }
        }
      }
      output["parameters"] = std::move(parameters);
      outputs.push_back(std::move(output));
      continue;
    }
    const auto explicit_kind = request.binary_outputs.find(tensor.name());
    const bool as_binary = explicit_kind != request.binary_outputs.end() ? explicit_kind->second
                                                                         : request.binary_by_default;
    if (as_binary) {
      output["parameters"] = {{"binary_data_size", bytes.size()}};
      binary.append(bytes);
    } else {
      LTSERVE_ASSIGN_OR_RETURN(output["data"], OutputData(tensor, bytes));
    }
    outputs.push_back(std::move(output));
  }
  out["outputs"] = std::move(outputs);
  HttpInferResponse written;
  // BYTES outputs need not be UTF-8; JSON text must be.
  written.body = out.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  if (!binary.empty()) {
    written.header_length = written.body.size();
    written.body += binary;
  }
  return written;
}

ordered_json MessageToJson(const google::protobuf::Message& message) {
  ordered_json out = ordered_json::object();
  const google::protobuf::Descriptor* descriptor = message.GetDescriptor();
  const google::protobuf::Reflection* r = message.GetReflection();
  for (int f = 0; f < descriptor->field_count(); ++f) {
    const FieldDescriptor* field = descriptor->field(f);
    if (field->is_map()) {
      ordered_json object = ordered_json::object();
      for (int i = 0; i < r->FieldSize(message, field); ++i) {
        const google::protobuf::Message& entry = r->GetRepeatedMessage(message, field, i);
        object[MapKey(entry)] = FieldValue(entry, entry.GetDescriptor()->map_value(), -1);
      }
      out[field->name()] = std::move(object);
    } else if (field->is_repeated()) {
      ordered_json array = ordered_json::array();
      for (int i = 0; i < r->FieldSize(message, field); ++i) {
        array.push_back(FieldValue(message, field, i));
      }
      out[field->name()] = std::move(array);
    } else if (!field->has_presence() || r->HasField(message, field)) {
      out[field->name()] = FieldValue(message, field, -1);
    }
  }
  return out;
}

Result<inference::LogSettingsRequest> ParseLogSettings(std::string_view body) {
  inference::LogSettingsRequest request;
  if (body.empty()) return request;
  LTSERVE_ASSIGN_OR_RETURN(const json settings, ParseJson(body, "log settings JSON"));
  if (!settings.is_object()) return InvalidArgument("the log settings JSON must be an object");
  for (const auto& [key, value] : settings.items()) {
    auto& setting = (*request.mutable_settings())[key];
    if (value.is_boolean()) {
      setting.set_bool_param(value.get<bool>());
    } else if (value.is_number_unsigned() &&
               value.get<std::uint64_t>() <= std::numeric_limits<std::uint32_t>::max()) {
      setting.set_uint32_param(static_cast<std::uint32_t>(value.get<std::uint64_t>()));
    } else if (value.is_string()) {
      setting.set_string_param(value.get<std::string>());
    } else {
      return InvalidArgument("log setting '" + key +
                             "' must be true/false, a non-negative integer or a string, got " +
                             value.dump());
    }
  }
  return request;
}

namespace {

using RepositoryParameters = google::protobuf::Map<std::string, inference::ModelRepositoryParameter>;

Status ReadRepositoryParameters(std::string_view body, const std::string& what,
                                RepositoryParameters* out) {
  if (body.empty()) return Status::Ok();
  LTSERVE_ASSIGN_OR_RETURN(const json parsed, ParseJson(body, what));
  if (!parsed.is_object()) return InvalidArgument("the " + what + " must be an object");
  const auto parameters = parsed.find("parameters");
  if (parameters == parsed.end()) return Status::Ok();
  if (!parameters->is_object()) {
    return InvalidArgument("'parameters' in the " + what + " must be an object");
  }
  for (const auto& [key, value] : parameters->items()) {
    inference::ModelRepositoryParameter& parameter = (*out)[key];
    if (value.is_boolean()) {
      parameter.set_bool_param(value.get<bool>());
    } else if (value.is_number_integer()) {
      parameter.set_int64_param(value.get<std::int64_t>());
    } else if (value.is_string()) {
      parameter.set_string_param(value.get<std::string>());
    } else {
      return InvalidArgument("parameter '" + key +
                             "' must be a string, true/false or an integer, got " + value.dump());
    }
  }
  return Status::Ok();
}

}  // namespace

Result<inference::RepositoryModelLoadRequest> ParseModelLoadRequest(std::string_view body,
                                                                    const std::string& model) {
  inference::RepositoryModelLoadRequest request;
  request.set_model_name(model);
  LTSERVE_RETURN_IF_ERROR(
      ReadRepositoryParameters(body, "model load JSON", request.mutable_parameters()));
  return request;
}

Result<inference::RepositoryModelUnloadRequest> ParseModelUnloadRequest(
    std::string_view body, const std::string& model) {
  inference::RepositoryModelUnloadRequest request;
  request.set_model_name(model);
  LTSERVE_RETURN_IF_ERROR(
      ReadRepositoryParameters(body, "model unload JSON", request.mutable_parameters()));
  return request;
}

ordered_json LogSettingsToJson(const inference::LogSettingsResponse& response) {
  ordered_json out = ordered_json::object();
  std::map<std::string, const inference::LogSettingsResponse::SettingValue*> sorted;
  for (const auto& [key, value] : response.settings()) sorted[key] = &value;
  for (const auto& [key, value] : sorted) {
    using Value = inference::LogSettingsResponse::SettingValue;
    switch (value->parameter_choice_case()) {
      case Value::kBoolParam: out[key] = value->bool_param(); break;
      case Value::kUint32Param: out[key] = value->uint32_param(); break;
      case Value::kStringParam: out[key] = value->string_param(); break;
      case Value::PARAMETER_CHOICE_NOT_SET: out[key] = nullptr; break;
    }
  }
  return out;
}

}  // namespace ltserve
