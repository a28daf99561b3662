// config.pbtxt `parameters` -> ModelOptions (model/model_options.h): the one table of keys with
// their rules, defaults and messages. Needs no protobuf, so it builds wherever the executors do
// (the GPU-only build included); server/config's BuildModelSpec applies it to a parsed config.
//
// Thread-safety: a ParameterParser is used by one thread; ParseModelOptions is stateless.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "common/status.h"
#include "model/model_options.h"

namespace ltserve::config {

// `parameters` as config.pbtxt's string values, parsed by exactly the rules a config file's are
// (for programs and tests that build a ModelSpec in memory); a relative algo_cache_file is
// resolved against `model_dir`. INVALID_ARGUMENT naming the key and what was expected; Triton
// PyTorch-backend keys are ignored.
Result<ModelOptions> ParseModelOptions(const std::map<std::string, std::string>& parameters,
                                       const std::filesystem::path& model_dir = {});

namespace internal {

// One `parameters` entry at a time into ModelOptions, with the rules of parameters.cc; Finish
// resolves what depends on several keys (gelu_epilogue "auto" on the precision).
struct ParameterOutcome {
  enum Kind { kApplied, kIgnored, kUnknown, kInvalid } kind;
  std::string message;  // the warning (kIgnored) or what was expected (kUnknown, kInvalid)
};
class ParameterParser {
 public:
  explicit ParameterParser(std::filesystem::path model_dir) : model_dir_(std::move(model_dir)) {}
  ParameterOutcome Apply(const std::string& key, const std::string& value);
  ModelOptions Finish() &&;

 private:
  std::filesystem::path model_dir_;
  ModelOptions options_;
  std::string gelu_ = "auto";
};

}  // namespace internal
}  // namespace ltserve::config
