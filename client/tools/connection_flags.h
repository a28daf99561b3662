// Command-line flags shared by ltserve-cli and ltserve-bench: where the server is and how to
// reach it (TLS, load balancing, channels, deadline).
//
// Thread-safety: a plain value filled by CLI11 during parsing on the main thread.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "client.h"

namespace ltserve::client {

struct ConnectionFlags {
  std::string url = "127.0.0.1:8001";
  std::string load_balancing;
  int channels = 1;
  std::int64_t timeout_ms = 0;
  bool tls = false;
  std::string tls_root;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;

  void Register(CLI::App& app);
  ClientOptions ToOptions() const;
};

}  // namespace ltserve::client
