// Pieces shared by the config sources; not part of ltserve's interface.
//
// Validation finds a problem as a path of fields (input[1].dims[0]); ConfigErrors turns that
// path back into the line:column where the field was written, so an error on a semantic
// rule points at the text as precisely as a syntax error does.
//
// Thread-safety: a ConfigErrors is immutable after construction; const use from any thread.
#pragma once

#include <google/protobuf/text_format.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "config/parameters.h"
#include "model/model_spec.h"
#include "model_config.pb.h"

namespace ltserve::config::internal {

inline constexpr std::string_view kConfigFileName = "config.pbtxt";

// The whole file; FAILED_PRECONDITION when it cannot be opened.
Result<std::string> ReadConfigText(const std::filesystem::path& file);

// Parses config text; errors read "<file>:L:C: ...". `locations` may be null.
Result<inference::ModelConfig> ParseConfigText(
    const std::string& text, const std::filesystem::path& file,
    google::protobuf::TextFormat::ParseInfoTree* locations);

// One step from ModelConfig down to the field a problem concerns.
struct FieldStep {
  FieldStep(std::string field_name, int element = -1, std::string key = {})  // NOLINT: {"name"}
      : field(std::move(field_name)), index(element), map_key(std::move(key)) {}

  std::string field;    // the proto field name
  int index = -1;       // element of a repeated field; -1 for a singular field
  std::string map_key;  // entry of a map field, the key as text; empty otherwise
};
using FieldPath = std::vector<FieldStep>;

// "input[1].dims[0]", "parameters[precision]".
std::string FieldPathName(const FieldPath& path);

class ConfigErrors {
 public:
  // Locates fields in `config_file` when that file parses to `config`; otherwise errors name
  // the file and field without a line (the config was built in memory or changed since).
  static ConfigErrors ForFile(const std::filesystem::path& config_file,
                              const inference::ModelConfig& config);

  // "<file>:L:C: field 'input[1].dims[0]': <what>"; L:C left out where the field is not written.
  Status Error(StatusCode code, const FieldPath& path, std::string_view what) const;
  Status Invalid(const FieldPath& path, std::string_view what) const {
    return Error(StatusCode::kInvalidArgument, path, what);
  }
  const std::filesystem::path& file() const { return file_; }

 private:
  ConfigErrors() = default;
  // "L:C" of the field, or "" when unknown.
  std::string Locate(const FieldPath& path) const;

  std::filesystem::path file_;
  std::unique_ptr<google::protobuf::TextFormat::ParseInfoTree> locations_;
  inference::ModelConfig located_;  // the file as parsed with locations_, in text order
};

// Per-step validations, each returning the first problem found.
Status ValidateTensors(const inference::ModelConfig& config, const ConfigErrors& errors,
                       ModelSpec* spec);
Status ValidateDynamicBatching(const inference::ModelConfig& config, const ConfigErrors& errors);
Status ValidateInstanceGroups(const inference::ModelConfig& config, const ConfigErrors& errors,
                              ModelSpec* spec, std::vector<std::string>* warnings);
// Parses `parameters` into spec->options (model_options.h); algo_cache_file is resolved
// against `model_dir`.
Status ValidateParameters(const inference::ModelConfig& config, const ConfigErrors& errors,
                          const std::filesystem::path& model_dir, ModelSpec* spec,
                          std::vector<std::string>* warnings);
// Picks the version directories holding the model file that version_policy serves; sets
// versions (highest first), and version and model_file to the highest of them.
Status ResolveModelFile(const inference::ModelConfig& config, const ConfigErrors& errors,
                        const std::filesystem::path& model_dir, ModelSpec* spec,
                        std::vector<std::string>* warnings);

// BuildModelSpec that also reports accepted-but-ignored settings.
Result<ModelSpec> BuildModelSpecWithWarnings(const inference::ModelConfig& config,
                                             const std::filesystem::path& model_dir,
                                             std::vector<std::string>* warnings);

}  // namespace ltserve::config::internal
