// The subcommands of ltserve-cli. Each returns the process exit code: 0 success, 1 the server
// said no (not live/ready, or an error status, printed to stderr).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "client.h"

namespace ltserve::client {

struct InferFlags {
  std::string model;
  std::string version;
  std::vector<std::string> input_files;  // "path" for a single-input model, or "INPUT=path"
  std::vector<std::string> shapes;       // "INPUT:d1,d2" for variable dimensions
  int batch = 1;
  bool print = false;
  std::uint64_t seed = 0;  // 0: a fresh random seed
};

int RunHealth(Client& client);
int RunMetadata(Client& client, const std::string& model, bool json);
int RunInfer(Client& client, const InferFlags& flags);
int RunStats(Client& client, const std::string& model, bool json);

}  // namespace ltserve::client
