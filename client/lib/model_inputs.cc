#include "model_inputs.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/float16.h"

namespace ltserve::client {
namespace {

template <typename T, typename Dist>
std::string Fill(std::int64_t count, Dist dist, std::mt19937_64& rng) {
  std::string bytes(static_cast<std::size_t>(count) * sizeof(T), '\0');
  for (std::int64_t i = 0; i < count; ++i) {
    const T value = static_cast<T>(dist(rng));
    std::memcpy(bytes.data() + i * sizeof(T), &value, sizeof(T));
  }
  return bytes;
}

template <typename Convert>
std::string Fill16(std::int64_t count, Convert convert, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::string bytes(static_cast<std::size_t>(count) * 2, '\0');
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint16_t bits = convert(dist(rng));
    std::memcpy(bytes.data() + i * 2, &bits, 2);
  }
  return bytes;
}

}  // namespace

Result<int> FetchMaxBatchSize(Client& client, const std::string& model,
                              const inference::ModelMetadataResponse& metadata) {
  auto config = client.ModelConfig(model);
  if (config.ok()) return config->config().max_batch_size();
  if (config.status().code() != StatusCode::kUnimplemented) return config.status();
  for (const auto& input : metadata.inputs()) {
    if (input.shape_size() == 0 || input.shape(0) != -1) return 0;
  }
  return metadata.inputs_size() > 0 ? 1 : 0;
}

Result<std::vector<InputSpec>> ResolveInputs(
    const inference::ModelMetadataResponse& metadata, int max_batch_size, int batch,
    const std::map<std::string, std::vector<std::int64_t>>& shape_overrides) {
  if (batch < 1) return InvalidArgument("batch size must be at least 1");
  if (max_batch_size == 0 && batch != 1) {
    return InvalidArgument("model '" + metadata.name() + "' does not batch; use batch size 1");
  }
  if (max_batch_size > 0 && batch > max_batch_size) {
    return InvalidArgument("batch " + std::to_string(batch) + " exceeds max_batch_size " +
                           std::to_string(max_batch_size) + " of '" + metadata.name() + "'");
  }
  for (const auto& [name, shape] : shape_overrides) {
    bool found = false;
    for (const auto& input : metadata.inputs()) found = found || input.name() == name;
    if (!found) return InvalidArgument("shape given for '" + name + "', which the model does not have");
  }
  std::vector<InputSpec> specs;
  for (const auto& input : metadata.inputs()) {
    InputSpec spec;
    spec.name = input.name();
    spec.type = DataTypeFromWireName(input.datatype());
    if (spec.type == DataType::kInvalid) {
      return Unimplemented("input '" + input.name() + "' has datatype '" + input.datatype() +
                           "', which the tools cannot generate");
    }
    std::vector<std::int64_t> dims(input.shape().begin(), input.shape().end());
    if (max_batch_size > 0) {
      if (dims.empty()) return InvalidArgument("input '" + input.name() + "' lacks the batch dimension");
      dims.erase(dims.begin());
      spec.shape.push_back(batch);
    }
    if (const auto it = shape_overrides.find(input.name()); it != shape_overrides.end()) {
      if (it->second.size() != dims.size()) {
        return InvalidArgument("shape for '" + input.name() + "' needs " + std::to_string(dims.size()) +
                               " dimensions (without the batch dimension)");
      }
      dims = it->second;
    }
    for (const std::int64_t dim : dims) {
      if (dim < 0) {
        return InvalidArgument("input '" + input.name() +
                               "' has a variable dimension: give its shape (--shape " + input.name() +
                               ":d1,d2,...)");
      }
      spec.shape.push_back(dim);
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

namespace {

bool IsIntegerOrBool(DataType type) {
  switch (type) {
    case DataType::kBool: case DataType::kInt8: case DataType::kInt16: case DataType::kInt32:
    case DataType::kInt64: case DataType::kUint8: case DataType::kUint16: case DataType::kUint32:
    case DataType::kUint64:
      return true;
    default:
      return false;
  }
}

// The values a type holds, as int64 (uint64 above INT64_MAX is not offered).
ValueRange Representable(DataType type) {
  switch (type) {
    case DataType::kBool: return {0, 1};
    case DataType::kInt8: return {INT8_MIN, INT8_MAX};
    case DataType::kInt16: return {INT16_MIN, INT16_MAX};
    case DataType::kInt32: return {INT32_MIN, INT32_MAX};
    case DataType::kUint8: return {0, UINT8_MAX};
    case DataType::kUint16: return {0, UINT16_MAX};
    case DataType::kUint32: return {0, UINT32_MAX};
    case DataType::kUint64: return {0, INT64_MAX};
    default: return {INT64_MIN, INT64_MAX};
  }
}

}  // namespace

Status ApplyValueRanges(const std::map<std::string, ValueRange>& ranges,
                        std::vector<InputSpec>* specs) {
  for (const auto& [name, range] : ranges) {
    auto spec = std::find_if(specs->begin(), specs->end(),
                             [&](const InputSpec& s) { return s.name == name; });
    if (spec == specs->end()) {
      return InvalidArgument("value range given for '" + name + "', which the model does not have");
    }
    if (!IsIntegerOrBool(spec->type)) {
      return InvalidArgument("value range given for '" + name + "', which is " +
                             std::string(WireName(spec->type)) + "; ranges are for integer and "
                             "BOOL inputs");
    }
    const ValueRange holds = Representable(spec->type);
    if (range.min > range.max || range.min < holds.min || range.max > holds.max) {
      return InvalidArgument("value range " + std::to_string(range.min) + ":" +
                             std::to_string(range.max) + " for '" + name + "' is empty or outside " +
                             std::string(WireName(spec->type)) + "'s values");
    }
    spec->range = range;
  }
  return Status::Ok();
}

Result<std::string> RandomContents(const InputSpec& spec, std::mt19937_64& rng) {
  LTSERVE_ASSIGN_OR_RETURN(const std::int64_t n, ElementCount(spec.shape));
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<std::int64_t> small(spec.range ? spec.range->min : 0,
                                                    spec.range ? spec.range->max : 99);
  std::uniform_int_distribution<std::int64_t> coin(spec.range ? spec.range->min : 0,
                                                   spec.range ? spec.range->max : 1);
  switch (spec.type) {
    case DataType::kFp32: return Fill<float>(n, real, rng);
    case DataType::kFp64: return Fill<double>(n, real, rng);
    case DataType::kFp16: return Fill16(n, FloatToFp16, rng);
    case DataType::kBf16: return Fill16(n, FloatToBf16, rng);
    case DataType::kBool: return Fill<std::uint8_t>(n, coin, rng);
    case DataType::kInt8: return Fill<std::int8_t>(n, small, rng);
    case DataType::kInt16: return Fill<std::int16_t>(n, small, rng);
    case DataType::kInt32: return Fill<std::int32_t>(n, small, rng);
    case DataType::kInt64: return Fill<std::int64_t>(n, small, rng);
    case DataType::kUint8: return Fill<std::uint8_t>(n, small, rng);
    case DataType::kUint16: return Fill<std::uint16_t>(n, small, rng);
    case DataType::kUint32: return Fill<std::uint32_t>(n, small, rng);
    case DataType::kUint64: return Fill<std::uint64_t>(n, small, rng);
    case DataType::kInvalid: break;
  }
  return InvalidArgument("input '" + spec.name + "' has no datatype");
}

Result<std::string> FileContents(const InputSpec& spec, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read input file '" + path + "'");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string bytes = buffer.str();
  LTSERVE_ASSIGN_OR_RETURN(const std::int64_t n, ElementCount(spec.shape));
  const std::size_t whole = static_cast<std::size_t>(n) * ElementSize(spec.type);
  if (bytes.size() == whole) return bytes;
  const std::int64_t batch = spec.shape.empty() ? 1 : spec.shape[0];
  if (batch > 1 && bytes.size() * batch == whole) {
    std::string repeated;
    repeated.reserve(whole);
    for (std::int64_t i = 0; i < batch; ++i) repeated += bytes;
    return repeated;
  }
  return InvalidArgument("input file '" + path + "' holds " + std::to_string(bytes.size()) +
                         " bytes; input '" + spec.name + "' needs " + std::to_string(whole) +
                         (batch > 1 ? " (or one sample's " + std::to_string(whole / batch) + ")" : ""));
}

Result<InferRequest> BuildRequest(const std::string& model, const std::vector<InputSpec>& specs,
                                  const std::map<std::string, std::string>& files,
                                  std::mt19937_64& rng) {
  for (const auto& [name, path] : files) {
    bool found = false;
    for (const auto& spec : specs) found = found || spec.name == name;
    if (!found) return InvalidArgument("input file '" + path + "' given for unknown input '" + name + "'");
  }
  InferRequest request(model);
  for (const auto& spec : specs) {
    const auto file = files.find(spec.name);
    LTSERVE_ASSIGN_OR_RETURN(const std::string bytes, file == files.end()
                                                          ? RandomContents(spec, rng)
                                                          : FileContents(spec, file->second));
    LTSERVE_RETURN_IF_ERROR(request.AddRawInput(spec.name, spec.type, spec.shape, bytes));
  }
  return request;
}

}  // namespace ltserve::client
