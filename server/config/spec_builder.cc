// ModelConfig -> ModelSpec: runs every validation in the order a reader meets the fields.
#include "config/config_internal.h"
#include "config/model_config.h"

namespace ltserve::config {
namespace internal {
namespace {

constexpr std::string_view kPlatform = "pytorch_libtorch";
constexpr std::string_view kBackend = "pytorch";

std::string DirectoryName(const std::filesystem::path& model_dir) {
  std::filesystem::path normal = model_dir.lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();  // "models/mlp/"
  return normal.filename().string();
}

Status ValidateIdentity(const inference::ModelConfig& config, const std::string& dir_name,
                        const ConfigErrors& errors) {
  const std::string what_to_set = "ltserve serves TorchScript models: set platform: \"" +
                                  std::string(kPlatform) + "\" or backend: \"" +
                                  std::string(kBackend) + "\"";
  if (!config.platform().empty() && config.platform() != kPlatform) {
    return errors.Invalid({{"platform"}},
                          "'" + config.platform() + "' is not supported; " + what_to_set);
  }
  if (!config.backend().empty() && config.backend() != kBackend) {
    return errors.Invalid({{"backend"}},
                          "'" + config.backend() + "' is not supported; " + what_to_set);
  }
  if (config.platform().empty() && config.backend().empty()) {
    return errors.Invalid({}, "neither platform nor backend is set; " + what_to_set);
  }
  if (!config.name().empty() && config.name() != dir_name) {
    return errors.Invalid({{"name"}}, "'" + config.name() + "' differs from the model directory '" +
                                          dir_name + "'; set name: \"" + dir_name +
                                          "\" or leave name out");
  }
  if (config.max_batch_size() < 0) {
    return errors.Invalid({{"max_batch_size"}},
                          std::to_string(config.max_batch_size()) +
                              " is negative; give the largest batch to accept, or 0 for a model "
                              "without a batch dimension");
  }
  return Status::Ok();
}

}  // namespace

Result<ModelSpec> BuildModelSpecWithWarnings(const inference::ModelConfig& config,
                                             const std::filesystem::path& model_dir,
                                             std::vector<std::string>* warnings) {
  const ConfigErrors errors =
      ConfigErrors::ForFile(model_dir / std::string(kConfigFileName), config);
  ModelSpec spec;
  spec.name = DirectoryName(model_dir);
  spec.max_batch_size = config.max_batch_size();
  LTSERVE_RETURN_IF_ERROR(ValidateIdentity(config, spec.name, errors));
  LTSERVE_RETURN_IF_ERROR(ValidateTensors(config, errors, &spec));
  LTSERVE_RETURN_IF_ERROR(ValidateInstanceGroups(config, errors, &spec, warnings));
  LTSERVE_RETURN_IF_ERROR(ValidateDynamicBatching(config, errors));
  LTSERVE_RETURN_IF_ERROR(ValidateParameters(config, errors, model_dir, &spec, warnings));
  LTSERVE_RETURN_IF_ERROR(ResolveModelFile(config, errors, model_dir, &spec, warnings));
  return spec;
}

// `parameters` through the shared parser (parameters.h), its errors located in the file.
Status ValidateParameters(const inference::ModelConfig& config, const ConfigErrors& errors,
                          const std::filesystem::path& model_dir, ModelSpec* spec,
                          std::vector<std::string>* warnings) {
  ParameterParser parser(model_dir);
  for (const auto& [key, parameter] : config.parameters()) {
    ParameterOutcome outcome = parser.Apply(key, parameter.string_value());
    switch (outcome.kind) {
      case ParameterOutcome::kApplied: break;
      case ParameterOutcome::kIgnored: warnings->push_back(std::move(outcome.message)); break;
      case ParameterOutcome::kUnknown:
        return errors.Invalid({{"parameters", -1, key}}, outcome.message);
      case ParameterOutcome::kInvalid:
        return errors.Invalid({{"parameters", -1, key}, {"value"}, {"string_value"}},
                              outcome.message);
    }
  }
  spec->options = std::move(parser).Finish();
  return Status::Ok();
}

}  // namespace internal

Result<ModelSpec> BuildModelSpec(const inference::ModelConfig& config,
                                 const std::filesystem::path& model_dir) {
  std::vector<std::string> ignored_warnings;
  return internal::BuildModelSpecWithWarnings(config, model_dir, &ignored_warnings);
}

DataType FromConfigDataType(inference::DataType type) {
  switch (type) {
    case inference::TYPE_BOOL: return DataType::kBool;
    case inference::TYPE_UINT8: return DataType::kUint8;
    case inference::TYPE_UINT16: return DataType::kUint16;
    case inference::TYPE_UINT32: return DataType::kUint32;
    case inference::TYPE_UINT64: return DataType::kUint64;
    case inference::TYPE_INT8: return DataType::kInt8;
    case inference::TYPE_INT16: return DataType::kInt16;
    case inference::TYPE_INT32: return DataType::kInt32;
    case inference::TYPE_INT64: return DataType::kInt64;
    case inference::TYPE_FP16: return DataType::kFp16;
    case inference::TYPE_FP32: return DataType::kFp32;
    case inference::TYPE_FP64: return DataType::kFp64;
    case inference::TYPE_BF16: return DataType::kBf16;
    default: return DataType::kInvalid;
  }
}

inference::DataType ToConfigDataType(DataType type) {
  switch (type) {
    case DataType::kBool: return inference::TYPE_BOOL;
    case DataType::kUint8: return inference::TYPE_UINT8;
    case DataType::kUint16: return inference::TYPE_UINT16;
    case DataType::kUint32: return inference::TYPE_UINT32;
    case DataType::kUint64: return inference::TYPE_UINT64;
    case DataType::kInt8: return inference::TYPE_INT8;
    case DataType::kInt16: return inference::TYPE_INT16;
    case DataType::kInt32: return inference::TYPE_INT32;
    case DataType::kInt64: return inference::TYPE_INT64;
    case DataType::kFp16: return inference::TYPE_FP16;
    case DataType::kFp32: return inference::TYPE_FP32;
    case DataType::kFp64: return inference::TYPE_FP64;
    case DataType::kBf16: return inference::TYPE_BF16;
    case DataType::kInvalid: return inference::TYPE_INVALID;
  }
  return inference::TYPE_INVALID;
}

}  // namespace ltserve::config
