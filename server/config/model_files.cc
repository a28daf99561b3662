// Version directories: <model>/<version>/<model file>, the highest version that holds the file.
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
  for (const auto& [version, dir] : versions) {
    if (std::filesystem::is_regular_file(dir / file_name, ec)) {
      spec->version = version;
      spec->model_file = dir / file_name;
      return Status::Ok();
    }
    warnings->push_back("version " + std::to_string(version) + " has no " + file_name +
                        "; it is skipped");
  }
  std::string found = versions.empty() ? "there are no version directories" : "versions found:";
  for (std::size_t i = 0; i < versions.size(); ++i) {
    found += (i == 0 ? " " : ", ") + std::to_string(versions[i].first);
  }
  return NotFound(model_dir.string() + ": no version directory holds '" + file_name + "' (" +
                  found + "); put the TorchScript file at " +
                  (model_dir / "1" / file_name).string());
}

}  // namespace ltserve::config::internal
