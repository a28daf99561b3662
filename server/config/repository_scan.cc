// <repo>/<model>/ directories -> RepositoryEntry, one per model, broken ones included.
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <system_error>

#include "config/config_internal.h"
#include "config/model_config.h"

namespace ltserve::config {
namespace {

RepositoryEntry ReadEntry(const std::filesystem::path& dir, Result<inference::ModelConfig> parsed) {
  if (!parsed.ok()) return {dir.filename().string(), dir, {}, parsed.status(), {}};
  std::vector<std::string> warnings;
  auto spec = internal::BuildModelSpecWithWarnings(*parsed, dir, &warnings);
  return {dir.filename().string(), dir, std::move(parsed).value(), std::move(spec),
          std::move(warnings)};
}

bool IsModelName(const std::string& name) {
  return !name.empty() && name[0] != '.' && name.find('/') == std::string::npos;
}

}  // namespace

Result<std::vector<std::string>> ListModelNames(const std::filesystem::path& repo) {
  std::error_code ec;
  if (!std::filesystem::is_directory(repo, ec)) {
    return NotFound(repo.string() +
                    ": the model repository is not a directory; pass the folder "
                    "that holds one subdirectory per model");
  }
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(repo, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(ec) && IsModelName(name)) names.push_back(name);
  }
  if (ec) {
    return FailedPrecondition(repo.string() +
                              ": cannot list the model repository: " + ec.message());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::vector<RepositoryEntry>> ScanRepository(const std::filesystem::path& repo) {
  LTSERVE_ASSIGN_OR_RETURN(std::vector<std::string> names, ListModelNames(repo));
  std::vector<RepositoryEntry> entries;
  entries.reserve(names.size());
  for (const std::string& name : names) {
    const std::filesystem::path dir = repo / name;
    entries.push_back(ReadEntry(dir, ParseModelConfigFile(dir / std::string(internal::kConfigFileName))));
  }
  return entries;
}

Result<RepositoryEntry> ScanModel(const std::filesystem::path& repo, const std::string& name,
                                  const inference::ModelConfig* config_override) {
  std::error_code ec;
  const std::filesystem::path dir = repo / name;
  if (!IsModelName(name) || !std::filesystem::is_directory(dir, ec)) {
    return NotFound("no model directory '" + name + "' in the model repository " + repo.string());
  }
  if (config_override != nullptr) {
    inference::ModelConfig config = *config_override;
    if (config.name().empty()) config.set_name(name);
    return ReadEntry(dir, std::move(config));
  }
  return ReadEntry(dir, ParseModelConfigFile(dir / std::string(internal::kConfigFileName)));
}

Result<inference::ModelConfig> ParseModelConfigJson(const std::string& json) {
  inference::ModelConfig config;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &config, options);
  if (!status.ok()) {
    return InvalidArgument("the load request's 'config' is not a ModelConfig in JSON: " +
                           std::string(status.message()));
  }
  return config;
}

}  // namespace ltserve::config
