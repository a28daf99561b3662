// A fresh model repository per test, and checks on located error messages.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/status.h"

namespace ltserve::config::testing {

// Owns a new temporary directory and removes it with everything in it.
class TempRepository {
 public:
  TempRepository() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "ltserve-config-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << pattern;
    root_ = pattern;
  }
  ~TempRepository() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  TempRepository(const TempRepository&) = delete;
  TempRepository& operator=(const TempRepository&) = delete;

  const std::filesystem::path& root() const { return root_; }

  // <root>/<model>/config.pbtxt holding `config`; returns the model directory.
  std::filesystem::path WriteConfig(const std::string& model, const std::string& config) const {
    std::filesystem::create_directories(root_ / model);
    WriteFile(root_ / model / "config.pbtxt", config);
    return root_ / model;
  }
  // <root>/<model>/<version>/<file> with placeholder bytes (config never reads the model).
  std::filesystem::path WriteModelFile(const std::string& model, const std::string& version,
                                       const std::string& file = "model.pt") const {
    std::filesystem::create_directories(root_ / model / version);
    WriteFile(root_ / model / version / file, "torchscript archive");
    return root_ / model / version / file;
  }
  static void WriteFile(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
  }

 private:
  std::filesystem::path root_;
};

// "L:C" (1-based) of the first occurrence of `needle` in `text`, found rather than hard-coded
// so that the expectation follows the config text.
inline std::string LineColumnOf(const std::string& text, const std::string& needle) {
  const std::size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle << " not in the config text";
  if (at == std::string::npos) return "?";
  const std::size_t line_start = text.rfind('\n', at == 0 ? 0 : at - 1);
  const std::size_t column = line_start == std::string::npos || at == 0 ? at : at - line_start - 1;
  int line = 1;
  for (std::size_t i = 0; i < at; ++i) line += text[i] == '\n';
  return std::to_string(line) + ":" + std::to_string(column + 1);
}

// The status has `code` and its message holds every one of `parts`.
inline void ExpectError(const Status& status, StatusCode code,
                        const std::vector<std::string>& parts) {
  EXPECT_EQ(status.code(), code) << status.ToString();
  for (const auto& part : parts) {
    EXPECT_NE(status.message().find(part), std::string::npos)
        << "expected '" << part << "' in: " << status.message();
  }
}

}  // namespace ltserve::config::testing
