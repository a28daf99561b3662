// External programs the metrics tests compare against: `promtool check metrics` (Prometheus'
// own linter for the text format) and nvidia-smi.
#pragma once

#include <map>
#include <optional>
#include <utility>
#include <string>

namespace ltserve::testing {

struct PromtoolResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr: the problems found, empty when clean
};

bool PromtoolAvailable();
// nullopt when promtool could not be run at all.
std::optional<PromtoolResult> PromtoolCheckMetrics(const std::string& exposition);

// GPU index -> (memory used, memory total) in MiB, as nvidia-smi reports them; empty when
// nvidia-smi is missing or fails.
std::map<int, std::pair<double, double>> NvidiaSmiMemory();

}  // namespace ltserve::testing
