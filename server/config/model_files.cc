// Version directories: <model>/<version>/<model file>; version_policy picks which of those that
// hold the file are served.
#include <algorithm>
#include <charconv>
#include <system_error>

#include "config/config_internal.h"

namespace ltserve::config::internal {
namespace {

constexpr std::string_view kDefaultModelFile = "model.pt";

// A positive integer name, or 0.
std::int64_t VersionNumber(const std::string& name) {
  std::int64_t version = 0;
  if (name.empty() ||
      !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return 0;
  }
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), version);
  return ec == std::errc() && end == name.data() + name.size() ? version : 0;
}

std::string VersionList(const std::vector<VersionFile>& versions) {
  std::string out;
  for (const VersionFile& v : versions) out += (out.empty() ? "" : ", ") + std::to_string(v.version);
  return out;
}

// Triton's version_policy over the versions that hold the model file (highest first); the
// default is latest { num_versions: 1 }.
Result<std::vector<VersionFile>> ApplyVersionPolicy(const inference::ModelConfig& config,
                                                    const ConfigErrors& errors,
                                                    const std::vector<VersionFile>& available,
                                                    std::vector<std::string>* warnings) {
  const inference::ModelVersionPolicy& policy = config.version_policy();
  switch (policy.policy_choice_case()) {
    case inference::ModelVersionPolicy::kAll:
      return available;
    case inference::ModelVersionPolicy::kSpecific: {
      if (policy.specific().versions_size() == 0) {
        return errors.Invalid({{"version_policy"}, {"specific"}, {"versions"}},
                              "is empty; list the versions to serve, e.g. versions: [ 1, 3 ]");
      }
      std::vector<VersionFile> chosen;
      for (const VersionFile& v : available) {
        const auto& wanted = policy.specific().versions();
        if (std::find(wanted.begin(), wanted.end(), v.version) != wanted.end()) chosen.push_back(v);
      }
      for (std::int64_t wanted : policy.specific().versions()) {
        const bool present = std::any_of(chosen.begin(), chosen.end(),
                                         [&](const VersionFile& v) { return v.version == wanted; });
        if (!present) {
          warnings->push_back("version_policy names version " + std::to_string(wanted) +
                              ", which has no directory with the model file; it is skipped");
        }
      }
      if (chosen.empty()) {
        return errors.Error(StatusCode::kNotFound, {{"version_policy"}, {"specific"}, {"versions"}},
                            "none of the listed versions is in the model directory (versions "
                            "found: " + VersionList(available) + ")");
      }
      return chosen;
    }
    case inference::ModelVersionPolicy::kLatest:
    case inference::ModelVersionPolicy::POLICY_CHOICE_NOT_SET: {
      std::uint32_t count = 1;
      if (policy.has_latest()) {
        count = policy.latest().num_versions();
        if (count == 0) {
          return errors.Invalid({{"version_policy"}, {"latest"}, {"num_versions"}},
                                "is 0; serve at least one version (num_versions: 1 or more)");
        }
      }
      return std::vector<VersionFile>(
          available.begin(), available.begin() + std::min<std::size_t>(count, available.size()));
    }
  }
  return available;
}

}  // namespace

Status ResolveModelFile(const inference::ModelConfig& config, const ConfigErrors& errors,
                        const std::filesystem::path& model_dir, ModelSpec* spec,
                        std::vector<std::string>* warnings) {
  std::string file_name(kDefaultModelFile);
  if (!config.default_model_filename().empty()) {
    file_name = config.default_model_filename();
    const std::filesystem::path as_path(file_name);
    if (as_path.has_parent_path() || file_name == "." || file_name == "..") {
      return errors.Invalid({{"default_model_filename"}},
                            "'" + file_name +
                                "' is not a plain file name; name the file inside "
                                "the version directory, without '/'");
    }
  }
  std::error_code ec;
  std::vector<std::pair<std::int64_t, std::filesystem::path>> versions;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    const std::string name = entry.path().filename().string();
    const std::int64_t version = VersionNumber(name);
    if (version > 0) {
      versions.emplace_back(version, entry.path());
    } else if (name[0] != '.') {
      warnings->push_back("directory '" + name + "' is not a version: version directories are " +
                          "named by positive integers (1, 2, ...)");
    }
  }
  if (ec) {
    return NotFound(model_dir.string() + ": cannot list the model directory: " + ec.message());
  }
  std::sort(versions.rbegin(), versions.rend());
  std::vector<VersionFile> available;  // highest first
  for (const auto& [version, dir] : versions) {
    if (std::filesystem::is_regular_file(dir / file_name, ec)) {
      available.push_back({version, dir / file_name});
      continue;
    }
    warnings->push_back("version " + std::to_string(version) + " has no " + file_name +
                        "; it is skipped");
  }
  if (available.empty()) {
    std::string found = versions.empty() ? "there are no version directories" : "versions found:";
    for (std::size_t i = 0; i < versions.size(); ++i) {
      found += (i == 0 ? " " : ", ") + std::to_string(versions[i].first);
    }
    return NotFound(model_dir.string() + ": no version directory holds '" + file_name + "' (" +
                    found + "); put the TorchScript file at " +
                    (model_dir / "1" / file_name).string());
  }
  LTSERVE_ASSIGN_OR_RETURN(spec->versions, ApplyVersionPolicy(config, errors, available, warnings));
  spec->version = spec->versions.front().version;
  spec->model_file = spec->versions.front().model_file;
  return Status::Ok();
}

}  // namespace ltserve::config::internal
