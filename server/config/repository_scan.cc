// <repo>/<model>/ directories -> RepositoryEntry, one per model, broken ones included.
#include <algorithm>
#include <system_error>

#include "config/config_internal.h"
#include "config/model_config.h"

namespace ltserve::config {

Result<std::vector<RepositoryEntry>> ScanRepository(const std::filesystem::path& repo) {
  std::error_code ec;
  if (!std::filesystem::is_directory(repo, ec)) {
    return NotFound(repo.string() +
                    ": the model repository is not a directory; pass the folder "
                    "that holds one subdirectory per model");
  }
  std::vector<std::filesystem::path> model_dirs;
  for (const auto& entry : std::filesystem::directory_iterator(repo, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(ec) && name[0] != '.') model_dirs.push_back(entry.path());
  }
  if (ec) {
    return FailedPrecondition(repo.string() +
                              ": cannot list the model repository: " + ec.message());
  }
  std::sort(model_dirs.begin(), model_dirs.end());

  std::vector<RepositoryEntry> entries;
  entries.reserve(model_dirs.size());
  for (const auto& dir : model_dirs) {
    auto parsed = ParseModelConfigFile(dir / std::string(internal::kConfigFileName));
    if (!parsed.ok()) {
      entries.push_back({dir.filename().string(), dir, {}, parsed.status(), {}});
      continue;
    }
    std::vector<std::string> warnings;
    auto spec = internal::BuildModelSpecWithWarnings(*parsed, dir, &warnings);
    entries.push_back({dir.filename().string(), dir, std::move(parsed).value(), std::move(spec),
                       std::move(warnings)});
  }
  return entries;
}

}  // namespace ltserve::config
