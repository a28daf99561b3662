// input/output validation: names, data types and dims.
#include <set>

#include "config/config_internal.h"
#include "config/model_config.h"

namespace ltserve::config::internal {
namespace {

constexpr std::string_view kSupportedTypes =
    "TYPE_FP32, TYPE_FP16, TYPE_BF16, and for models served by the TorchScript fallback also "
    "TYPE_BOOL, TYPE_UINT8, TYPE_INT8, TYPE_INT16, TYPE_INT32, TYPE_INT64, TYPE_FP64";

bool IsSupportedType(inference::DataType type) {
  switch (type) {
    case inference::TYPE_FP32:
    case inference::TYPE_FP16:
    case inference::TYPE_BF16:
    case inference::TYPE_BOOL:
    case inference::TYPE_UINT8:
    case inference::TYPE_INT8:
    case inference::TYPE_INT16:
    case inference::TYPE_INT32:
    case inference::TYPE_INT64:
    case inference::TYPE_FP64: return true;
    default: return false;
  }
}

Status CheckDataType(inference::DataType type, const FieldPath& path, const ConfigErrors& errors) {
  if (type == inference::TYPE_INVALID) {
    return errors.Invalid(path, "is missing; set one of " + std::string(kSupportedTypes));
  }
  if (!IsSupportedType(type)) {
    std::string why =
        type == inference::TYPE_STRING ? " (ltserve serves numeric tensors only)" : "";
    return errors.Invalid(path, inference::DataType_Name(type) + " is not supported" + why +
                                    "; use one of " + std::string(kSupportedTypes));
  }
  return Status::Ok();
}

Status CheckDims(const google::protobuf::RepeatedField<std::int64_t>& dims, FieldPath path,
                 bool batched, const ConfigErrors& errors) {
  if (dims.empty()) {
    return errors.Invalid(path, batched ? "is empty; give the shape without the batch dimension, "
                                          "e.g. dims: [ 16 ]"
                                        : "is empty; give the full shape, e.g. dims: [ 1, 16 ]");
  }
  for (int j = 0; j < dims.size(); ++j) {
    if (dims[j] > 0 || dims[j] == -1) continue;
    path.back().index = j;
    return errors.Invalid(path, "is " + std::to_string(dims[j]) +
                                    "; each dimension must be > 0, or -1 for a variable size");
  }
  return Status::Ok();
}

template <typename Tensor>
Status CheckTensors(const google::protobuf::RepeatedPtrField<Tensor>& tensors,
                    const std::string& kind, const inference::ModelConfig& config,
                    const ConfigErrors& errors, std::vector<TensorSpec>* out) {
  if (tensors.empty()) {
    return errors.Invalid({{kind}}, "at least one " + kind + " is required; list each model " +
                                        kind + " with name, data_type and dims");
  }
  std::set<std::string> seen;
  for (int i = 0; i < tensors.size(); ++i) {
    const Tensor& tensor = tensors[i];
    if (tensor.name().empty()) {
      return errors.Invalid({{kind, i}, {"name"}}, "is empty; give the tensor's name");
    }
    if (!seen.insert(tensor.name()).second) {
      return errors.Invalid({{kind, i}, {"name"}}, "'" + tensor.name() + "' is used by another " +
                                                       kind + "; " + kind +
                                                       " names must be unique");
    }
    LTSERVE_RETURN_IF_ERROR(CheckDataType(tensor.data_type(), {{kind, i}, {"data_type"}}, errors));
    LTSERVE_RETURN_IF_ERROR(
        CheckDims(tensor.dims(), {{kind, i}, {"dims"}}, config.max_batch_size() > 0, errors));
    if constexpr (std::is_same_v<Tensor, inference::ModelInput>) {
      if (tensor.optional()) {
        return errors.Invalid({{kind, i}, {"optional"}},
                              "optional inputs are not supported: the model's forward takes "
                              "every input; remove 'optional: true'");
      }
    }
    out->push_back({tensor.name(),
                    FromConfigDataType(tensor.data_type()),
                    {tensor.dims().begin(), tensor.dims().end()}});
  }
  return Status::Ok();
}

}  // namespace

Status ValidateTensors(const inference::ModelConfig& config, const ConfigErrors& errors,
                       ModelSpec* spec) {
  LTSERVE_RETURN_IF_ERROR(CheckTensors(config.input(), "input", config, errors, &spec->inputs));
  return CheckTensors(config.output(), "output", config, errors, &spec->outputs);
}

}  // namespace ltserve::config::internal
