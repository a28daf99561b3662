#include "gpu/algo_cache.h"

#include <fstream>
#include <sstream>

namespace ltserve::gpu {
namespace {

constexpr const char* kHeader = "# ltserve cuBLASLt algorithm cache v1: ";
constexpr std::size_t kAlgoWords = sizeof(cublasLtMatmulAlgo_t{}.data) / sizeof(std::uint64_t);
// A kernel line starts with this word, then the key, then GemmKernel::ToText.
constexpr const char* kKernelTag = "kernel";
// A choice line: this word, the key, the chosen word.
constexpr const char* kChoiceTag = "choice";

}  // namespace

Status AlgoCache::Load(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return Status::Ok();
  std::ifstream in(path);
  if (!in) return Unavailable("cannot read algorithm cache " + path.string());
  std::string line;
  if (!std::getline(in, line) || line.rfind(kHeader, 0) != 0) {
    return InvalidArgument("algorithm cache " + path.string() + " has no ltserve header");
  }
  if (line.substr(std::char_traits<char>::length(kHeader)) != fingerprint_) return Status::Ok();
  int line_number = 1;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string key;
    cublasLtMatmulAlgo_t algo{};
    fields >> key;
    if (key == kChoiceTag) {
      std::string word;
      std::string extra;
      fields >> key >> word >> extra;
      if (key.empty() || word.empty() || !extra.empty()) {
        return InvalidArgument("algorithm cache " + path.string() + " line " +
                               std::to_string(line_number) + " is malformed");
      }
      choices_[key] = word;
      continue;
    }
    if (key == kKernelTag) {
      std::string rest;
      fields >> key;
      std::getline(fields >> std::ws, rest);
      const std::optional<GemmKernel> kernel = GemmKernel::FromText(rest);
      if (key.empty() || !kernel) {
        return InvalidArgument("algorithm cache " + path.string() + " line " +
                               std::to_string(line_number) + " is malformed");
      }
      kernels_[key] = *kernel;
      continue;
    }
    for (std::size_t i = 0; i < kAlgoWords; ++i) fields >> std::hex >> algo.data[i];
    if (!fields) {
      return InvalidArgument("algorithm cache " + path.string() + " line " +
                             std::to_string(line_number) + " is malformed");
    }
    entries_[key] = algo;
  }
  return Status::Ok();
}

Status AlgoCache::Save(const std::filesystem::path& path) const {
  // Write then rename, so a crash never leaves half a cache for the next start to reject.
  const std::filesystem::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    if (!out) return Unavailable("cannot write algorithm cache " + temporary.string());
    out << kHeader << fingerprint_ << "\n";
    for (const auto& [key, algo] : entries_) {
      out << key;
      for (std::size_t i = 0; i < kAlgoWords; ++i) out << ' ' << std::hex << algo.data[i];
      out << std::dec << "\n";
    }
    for (const auto& [key, kernel] : kernels_) {
      out << kKernelTag << ' ' << key << ' ' << kernel.ToText() << "\n";
    }
    for (const auto& [key, word] : choices_) out << kChoiceTag << ' ' << key << ' ' << word << "\n";
    if (!out) return Unavailable("cannot write algorithm cache " + temporary.string());
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) return Unavailable("cannot rename algorithm cache into " + path.string() + ": " + error.message());
  return Status::Ok();
}

const GemmKernel* AlgoCache::FindKernel(const std::string& key) const {
  const auto it = kernels_.find(key);
  return it == kernels_.end() ? nullptr : &it->second;
}

const std::string* AlgoCache::FindChoice(const std::string& key) const {
  const auto it = choices_.find(key);
  return it == choices_.end() ? nullptr : &it->second;
}

const cublasLtMatmulAlgo_t* AlgoCache::Find(const std::string& key) const {
  const auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace ltserve::gpu
