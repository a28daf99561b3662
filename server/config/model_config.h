// config.pbtxt -> ModelSpec: parsing, validation and repository scanning.
//
// ltserve reads Triton's model repository layout (<repo>/<model>/config.pbtxt and
// <repo>/<model>/<version>/model.pt) with Triton's field names, so a Triton repository holding a
// TorchScript model loads unchanged. Every error names the file, and where the text is known the
// line:column and the field, and says what was expected: these messages are the user's only
// guide when a model refuses to load. docs/model_repository.md lists what is supported.
//
// Thread-safety: the functions are stateless and may be called from any thread at once.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/data_type.h"
#include "common/status.h"
#include "config/parameters.h"
#include "model/model_spec.h"
#include "model_config.pb.h"

namespace ltserve::config {

// Parses a config.pbtxt with protobuf's TextFormat against proto/model_config.proto.
Result<inference::ModelConfig> ParseModelConfigFile(const std::filesystem::path& config_path);

// Validates a parsed config and turns it into the plain ModelSpec (picks the version directory,
// resolves the model file, sums instance_group counts, copies parameters).
Result<ModelSpec> BuildModelSpec(const inference::ModelConfig& config,
                                 const std::filesystem::path& model_dir);

struct RepositoryEntry {
  std::string name;  // directory name
  std::filesystem::path dir;
  inference::ModelConfig config;      // as parsed (empty if parsing failed)
  Result<ModelSpec> spec;             // or the error that stops this model from loading
  std::vector<std::string> warnings;  // accepted-but-ignored settings, for the load log
};

// Every subdirectory of `repo` is a model; one broken model never hides the others.
// Entries come sorted by name; hidden directories (".git") are not models.
Result<std::vector<RepositoryEntry>> ScanRepository(const std::filesystem::path& repo);

// The names ScanRepository would return, without reading any config.
Result<std::vector<std::string>> ListModelNames(const std::filesystem::path& repo);

// One model directory `repo`/`name`, read as ScanRepository reads it; with `config_override`
// that config is used instead of the directory's config.pbtxt (which then need not exist).
// NOT_FOUND when there is no such directory.
Result<RepositoryEntry> ScanModel(const std::filesystem::path& repo, const std::string& name,
                                  const inference::ModelConfig* config_override);

// A ModelConfig written as JSON (protobuf's JSON mapping, as Triton's load request carries it).
// An unknown field is an error naming it, as in config.pbtxt.
Result<inference::ModelConfig> ParseModelConfigJson(const std::string& json);

// TYPE_STRING and TYPE_INVALID map to kInvalid: ltserve has no string tensors.
DataType FromConfigDataType(inference::DataType type);
inference::DataType ToConfigDataType(DataType type);

}  // namespace ltserve::config
