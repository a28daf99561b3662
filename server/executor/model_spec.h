// What an executor needs to know of a model's configuration, as plain data.
//
// server/config turns config.pbtxt (a protobuf message) into a ModelSpec; server/torch and
// server/gpu take a ModelSpec, so neither sees protobuf headers (libtorch bundles its own
// protobuf and fmt, which must not meet Debian's in one translation unit).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/data_type.h"

namespace ltserve {

struct TensorSpec {
  std::string name;
  DataType dtype = DataType::kInvalid;
  // Without the batch dimension when max_batch_size > 0, as in config.pbtxt; -1 is variable.
  std::vector<std::int64_t> dims;
};

enum class DeviceKind : std::uint8_t { kAuto, kGpu, kCpu };

struct ModelSpec {
  std::string name;
  std::int64_t version = 1;
  std::filesystem::path model_file;  // <repo>/<model>/<version>/model.pt
  int max_batch_size = 0;            // 0: no batch dimension
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  DeviceKind device = DeviceKind::kAuto;
  int instance_count = 1;
  // config.pbtxt `parameters` (string values): precision, gelu, workspace size, ...
  std::map<std::string, std::string> parameters;
};

}  // namespace ltserve
