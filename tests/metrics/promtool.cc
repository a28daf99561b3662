#include "promtool.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ltserve::testing {

namespace {

// The exposition goes through a file rather than a pipe: writing a large one into promtool's
// stdin while its output is unread could fill both pipes and hang.
class TempFile {
 public:
  TempFile() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ltserve-metrics-XXXXXX").string();
    const int fd = mkstemp(pattern.data());
    if (fd >= 0) {
      close(fd);
      path_ = pattern;
    }
  }
  ~TempFile() {
    if (!path_.empty()) std::remove(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

bool PromtoolAvailable() { return std::system("command -v promtool > /dev/null 2>&1") == 0; }

std::optional<PromtoolResult> PromtoolCheckMetrics(const std::string& exposition) {
  TempFile file;
  if (file.path().empty()) return std::nullopt;
  {
    std::ofstream out(file.path(), std::ios::binary);
    out << exposition;
    if (!out) return std::nullopt;
  }
  const std::string command = "promtool check metrics < '" + file.path() + "' 2>&1";
  FILE* raw = popen(command.c_str(), "r");
  if (raw == nullptr) return std::nullopt;
  PromtoolResult result;
  char buffer[4096];
  std::size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), raw)) > 0) result.output.append(buffer, n);
  const int status = pclose(raw);
  if (status == -1 || !WIFEXITED(status)) return std::nullopt;
  result.exit_code = WEXITSTATUS(status);
  return result;
}

std::map<int, std::pair<double, double>> NvidiaSmiMemory() {
  std::map<int, std::pair<double, double>> result;
  FILE* raw = popen(
      "nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits 2>/dev/null",
      "r");
  if (raw == nullptr) return result;
  int index = 0;
  double used = 0, total = 0;
  while (std::fscanf(raw, " %d , %lf , %lf", &index, &used, &total) == 3) result[index] = {used, total};
  if (pclose(raw) != 0) result.clear();
  return result;
}

}  // namespace ltserve::testing
