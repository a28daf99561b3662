// One typed description of a model, as plain data: what config.pbtxt says (tensors, batching,
// placement, typed options), made by server/config and read by every other component. No
// protobuf or torch here: server/torch and server/gpu include it next to headers that must not
// meet Debian's protobuf in one translation unit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/data_type.h"
#include "model/model_options.h"

namespace ltserve {

struct TensorSpec {
  std::string name;
  DataType dtype = DataType::kInvalid;
  // Without the batch dimension when max_batch_size > 0, as in config.pbtxt; -1 is variable.
  std::vector<std::int64_t> dims;
};

enum class DeviceKind : std::uint8_t { kAuto, kGpu, kCpu };

struct VersionFile {
  std::int64_t version = 1;
  std::filesystem::path model_file;
};

struct ModelSpec {
  std::string name;
  std::int64_t version = 1;
  std::filesystem::path model_file;  // <repo>/<model>/<version>/model.pt
  // Every version the config's version_policy serves, highest first; `version` and
  // `model_file` are those of the first. The repository loads one copy of the spec per entry.
  std::vector<VersionFile> versions;
  int max_batch_size = 0;            // 0: no batch dimension
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  DeviceKind device = DeviceKind::kAuto;
  int instance_count = 1;
  ModelOptions options;              // config.pbtxt `parameters`, parsed
};

}  // namespace ltserve
