// Runs `promtool check metrics` (Prometheus' own linter for the text format) over a string.
#pragma once

#include <optional>
#include <string>

namespace ltserve::testing {

struct PromtoolResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr: the problems found, empty when clean
};

bool PromtoolAvailable();
// nullopt when promtool could not be run at all.
std::optional<PromtoolResult> PromtoolCheckMetrics(const std::string& exposition);

}  // namespace ltserve::testing
