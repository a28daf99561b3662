// libFuzzer target: the bytes of a model.pt, loaded by LoadTorchScriptModel for
// a row model (FP32 [37] in, FP32 [3] out, as the seed models are), so a module
// that loads is lowered too. libtorch itself is not instrumented (the wheel is
// built with gcc), so coverage guides only through ltserve's loader;
// AddressSanitizer still reports a crash or a bad access anywhere.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "torch/torch_loader.h"

namespace {

namespace fs = std::filesystem;

fs::path ModelFile() {
  static const fs::path file = [] {
    fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    fs::path dir = base / ("ltserve-fuzz-torch-" + std::to_string(getpid()));
    fs::create_directories(dir);
    return dir / "model.pt";
  }();
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ltserve::ModelSpec spec;
  spec.name = "m";
  spec.max_batch_size = 8;
  spec.model_file = ModelFile();
  spec.inputs = {{"INPUT__0", ltserve::DataType::kFp32, {37}}};
  spec.outputs = {{"OUTPUT__0", ltserve::DataType::kFp32, {3}}};
  {
    std::ofstream out(spec.model_file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto loaded = ltserve::LoadTorchScriptModel(spec);
  if (!loaded.ok() && loaded.status().message().empty()) std::abort();
  return 0;
}
