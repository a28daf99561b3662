// Replays files through a fuzz target's LLVMFuzzerTestOneInput without libFuzzer, so that the
// normal (gcc) build runs the seed corpus and every input that once found a bug as a ctest:
// each argument is a file or a directory of files. A crash or abort fails the test; under
// scripts/sanitize.sh asan the sanitizers check each input as the fuzzer did.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

void Replay(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path path(argv[i]);
    if (std::filesystem::is_directory(path)) {
      for (const auto& entry : std::filesystem::directory_iterator(path)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else {
      files.push_back(path);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s <file or directory>...: nothing to replay\n", argv[0]);
    return 2;
  }
  for (const auto& file : files) {
    std::printf("replaying %s\n", file.c_str());
    std::fflush(stdout);
    Replay(file);
  }
  std::printf("%zu input(s) replayed\n", files.size());
  return 0;
}
