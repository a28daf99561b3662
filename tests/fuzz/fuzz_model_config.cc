// libFuzzer target: config.pbtxt text, through the whole path a model directory
// takes at load (ScanRepository: parse, locate fields for messages, validate,
// build the ModelSpec). The text is written to <tmp>/repo/m/config.pbtxt next
// to an empty 1/model.pt, so version and file resolution run too. Every refusal
// must say why.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "config/model_config.h"

namespace {

namespace fs = std::filesystem;

// /dev/shm keeps the writes off the disk; one directory per process, as
// libFuzzer's -jobs runs several processes at once.
fs::path ModelDir() {
  static const fs::path dir = [] {
    fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    fs::path model = base / ("ltserve-fuzz-config-" + std::to_string(getpid())) / "repo" / "m";
    fs::create_directories(model / "1");
    std::ofstream(model / "1" / "model.pt").put('\0');
    return model;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fs::path model = ModelDir();
  {
    std::ofstream config(model / "config.pbtxt", std::ios::binary | std::ios::trunc);
    config.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto entries = ltserve::config::ScanRepository(model.parent_path());
  if (!entries.ok()) {
    if (entries.status().message().empty()) std::abort();
    return 0;
  }
  for (const auto& entry : *entries) {
    if (!entry.spec.ok() && entry.spec.status().message().empty()) std::abort();
  }
  return 0;
}
