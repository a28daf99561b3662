#include "infer_data.h"

#include <limits>

#include "common/float16.h"

namespace ltserve::client {
namespace {

std::string ShapeText(std::span<const std::int64_t> shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

// Appends each typed value narrowed to the wire element type.
template <typename Wire, typename Field>
void AppendAs(const Field& field, std::string& out) {
  out.reserve(out.size() + field.size() * sizeof(Wire));
  for (const auto value : field) {
    const Wire wire = static_cast<Wire>(value);
    out.append(reinterpret_cast<const char*>(&wire), sizeof(wire));
  }
}

Result<std::string> TypedToRaw(const inference::InferTensorContents& c, DataType type,
                               std::string_view name) {
  std::string out;
  switch (type) {
    case DataType::kBool: AppendAs<std::uint8_t>(c.bool_contents(), out); break;
    case DataType::kInt8: AppendAs<std::int8_t>(c.int_contents(), out); break;
    case DataType::kInt16: AppendAs<std::int16_t>(c.int_contents(), out); break;
    case DataType::kInt32: AppendAs<std::int32_t>(c.int_contents(), out); break;
    case DataType::kInt64: AppendAs<std::int64_t>(c.int64_contents(), out); break;
    case DataType::kUint8: AppendAs<std::uint8_t>(c.uint_contents(), out); break;
    case DataType::kUint16: AppendAs<std::uint16_t>(c.uint_contents(), out); break;
    case DataType::kUint32: AppendAs<std::uint32_t>(c.uint_contents(), out); break;
    case DataType::kUint64: AppendAs<std::uint64_t>(c.uint64_contents(), out); break;
    case DataType::kFp32: AppendAs<float>(c.fp32_contents(), out); break;
    case DataType::kFp64: AppendAs<double>(c.fp64_contents(), out); break;
    default:
      return InvalidArgument("output '" + std::string(name) + "' of type " +
                             std::string(WireName(type)) +
                             " came without raw contents; that type has no typed field");
  }
  return out;
}

template <typename T>
void WidenInto(std::string_view bytes, std::vector<float>& out) {
  const std::size_t n = bytes.size() / sizeof(T);
  out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    T value;
    std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
    out[i] = static_cast<float>(value);
  }
}

}  // namespace

Result<std::int64_t> ElementCount(std::span<const std::int64_t> shape) {
  std::int64_t count = 1;
  for (const std::int64_t dim : shape) {
    if (dim < 0) return InvalidArgument("shape " + ShapeText(shape) + " has a negative dimension");
    if (dim != 0 && count > std::numeric_limits<std::int64_t>::max() / dim) {
      return InvalidArgument("shape " + ShapeText(shape) + " overflows 64 bits");
    }
    count *= dim;
  }
  return count;
}

InferRequest::InferRequest(std::string model_name, std::string model_version) {
  proto_.set_model_name(std::move(model_name));
  proto_.set_model_version(std::move(model_version));
}

Status InferRequest::AddRawInput(std::string name, DataType type, std::vector<std::int64_t> shape,
                                 std::string_view bytes) {
  if (ElementSize(type) == 0) {
    return InvalidArgument("input '" + name + "': datatype has no fixed element size");
  }
  for (const auto& input : proto_.inputs()) {
    if (input.name() == name) return InvalidArgument("input '" + name + "' was already added");
  }
  LTSERVE_ASSIGN_OR_RETURN(const std::int64_t count, ElementCount(shape));
  const auto expected = static_cast<std::uint64_t>(count) * ElementSize(type);
  if (bytes.size() != expected) {
    return InvalidArgument("input '" + name + "' " + std::string(WireName(type)) + " " +
                           ShapeText(shape) + " needs " + std::to_string(expected) +
                           " bytes, got " + std::to_string(bytes.size()));
  }
  auto* input = proto_.add_inputs();
  input->set_name(std::move(name));
  input->set_datatype(std::string(WireName(type)));
  for (const std::int64_t dim : shape) input->add_shape(dim);
  proto_.add_raw_input_contents(bytes.data(), bytes.size());
  return Status::Ok();
}

Status InferRequest::AddFloatInput(std::string name, DataType type, std::vector<std::int64_t> shape,
                                   std::span<const float> values) {
  std::string bytes;
  switch (type) {
    case DataType::kFp32:
      bytes.assign(reinterpret_cast<const char*>(values.data()), values.size_bytes());
      break;
    case DataType::kFp64: AppendAs<double>(values, bytes); break;
    case DataType::kFp16:
    case DataType::kBf16: {
      bytes.resize(values.size() * sizeof(std::uint16_t));
      for (std::size_t i = 0; i < values.size(); ++i) {
        const std::uint16_t bits =
            type == DataType::kFp16 ? FloatToFp16(values[i]) : FloatToBf16(values[i]);
        std::memcpy(bytes.data() + i * sizeof(bits), &bits, sizeof(bits));
      }
      break;
    }
    default:
      return InvalidArgument("input '" + name + "': float values convert to FP32, FP64, FP16 or BF16, not " +
                             std::string(WireName(type)));
  }
  return AddRawInput(std::move(name), type, std::move(shape), bytes);
}

void InferRequest::RequestOutput(std::string name) { proto_.add_outputs()->set_name(std::move(name)); }

void InferRequest::SetServerTimeoutMicros(std::int64_t micros) {
  (*proto_.mutable_parameters())["timeout"].set_int64_param(micros);
}

void InferRequest::SetPriority(std::int64_t priority) {
  (*proto_.mutable_parameters())["priority"].set_int64_param(priority);
}

Result<InferResult> InferResult::FromResponse(inference::ModelInferResponse response) {
  InferResult result;
  const int outputs = response.outputs_size();
  result.raw_ = response.raw_output_contents_size() > 0;
  if (result.raw_ && response.raw_output_contents_size() != outputs) {
    return Internal("response has " + std::to_string(outputs) + " outputs but " +
                    std::to_string(response.raw_output_contents_size()) + " raw contents");
  }
  if (!result.raw_) result.typed_bytes_.resize(outputs);
  for (int i = 0; i < outputs; ++i) {
    const auto& output = response.outputs(i);
    const DataType type = DataTypeFromWireName(output.datatype());
    if (type == DataType::kInvalid || ElementSize(type) == 0) {
      return Unimplemented("output '" + output.name() + "' has unsupported datatype '" +
                           output.datatype() + "'");
    }
    LTSERVE_ASSIGN_OR_RETURN(const std::int64_t count,
                             ElementCount(std::span(output.shape().data(), output.shape_size())));
    if (!result.raw_) {
      LTSERVE_ASSIGN_OR_RETURN(result.typed_bytes_[i], TypedToRaw(output.contents(), type, output.name()));
    }
    const std::size_t size =
        result.raw_ ? response.raw_output_contents(i).size() : result.typed_bytes_[i].size();
    if (size != static_cast<std::uint64_t>(count) * ElementSize(type)) {
      return Internal("output '" + output.name() + "' " + output.datatype() + " " +
                      ShapeText(std::span(output.shape().data(), output.shape_size())) + " arrived with " +
                      std::to_string(size) + " bytes");
    }
  }
  result.response_ = std::move(response);
  return result;
}

std::vector<std::string> InferResult::OutputNames() const {
  std::vector<std::string> names;
  for (const auto& output : response_.outputs()) names.push_back(output.name());
  return names;
}

Result<OutputView> InferResult::Output(std::string_view name) const {
  for (int i = 0; i < response_.outputs_size(); ++i) {
    const auto& output = response_.outputs(i);
    if (output.name() != name) continue;
    OutputView view;
    view.name = output.name();
    view.type = DataTypeFromWireName(output.datatype());
    view.shape.assign(output.shape().begin(), output.shape().end());
    view.bytes = raw_ ? std::string_view(response_.raw_output_contents(i)) : typed_bytes_[i];
    view.element_count = static_cast<std::int64_t>(view.bytes.size() / ElementSize(view.type));
    return view;
  }
  return NotFound("response has no output '" + std::string(name) + "'");
}

Status InferResult::CheckCopy(const OutputView& view, DataType wanted, std::size_t elements) {
  if (view.type != wanted) {
    return InvalidArgument("output '" + std::string(view.name) + "' is " +
                           std::string(WireName(view.type)) + ", not " + std::string(WireName(wanted)));
  }
  if (elements != static_cast<std::size_t>(view.element_count)) {
    return InvalidArgument("output '" + std::string(view.name) + "' has " +
                           std::to_string(view.element_count) + " elements; the buffer holds " +
                           std::to_string(elements));
  }
  return Status::Ok();
}

Result<std::vector<float>> InferResult::OutputAsFloat(std::string_view name) const {
  LTSERVE_ASSIGN_OR_RETURN(const OutputView view, Output(name));
  std::vector<float> out;
  switch (view.type) {
    case DataType::kFp32: WidenInto<float>(view.bytes, out); break;
    case DataType::kFp64: WidenInto<double>(view.bytes, out); break;
    case DataType::kFp16:
    case DataType::kBf16: {
      out.resize(view.bytes.size() / 2);
      for (std::size_t i = 0; i < out.size(); ++i) {
        std::uint16_t value;
        std::memcpy(&value, view.bytes.data() + 2 * i, 2);
        out[i] = view.type == DataType::kFp16 ? Fp16ToFloat(value) : Bf16ToFloat(value);
      }
      break;
    }
    case DataType::kBool:
    case DataType::kUint8: WidenInto<std::uint8_t>(view.bytes, out); break;
    case DataType::kInt8: WidenInto<std::int8_t>(view.bytes, out); break;
    case DataType::kInt16: WidenInto<std::int16_t>(view.bytes, out); break;
    case DataType::kUint16: WidenInto<std::uint16_t>(view.bytes, out); break;
    case DataType::kInt32: WidenInto<std::int32_t>(view.bytes, out); break;
    case DataType::kUint32: WidenInto<std::uint32_t>(view.bytes, out); break;
    case DataType::kInt64: WidenInto<std::int64_t>(view.bytes, out); break;
    case DataType::kUint64: WidenInto<std::uint64_t>(view.bytes, out); break;
    default: return Unimplemented("output '" + std::string(name) + "' is not numeric");
  }
  return out;
}

}  // namespace ltserve::client
