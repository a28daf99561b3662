// How the client reaches a server: target, TLS, load balancing and the number of independent
// connections. Kept apart from the Client so the target rules can be checked without a network.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace grpc {
class Channel;
}

namespace ltserve::client {

struct TlsOptions {
  bool enabled = false;
  // PEM files. Empty root_certs_file: the system's trust store. client_cert_file and
  // client_key_file go together (mutual TLS) or not at all.
  std::string root_certs_file;
  std::string client_cert_file;
  std::string client_key_file;
  // Checks the server certificate against this name instead of the target's host (test
  // certificates issued for "localhost" while dialling an IP).
  std::string server_name_override;
};

struct ChannelOptions {
  // "host:port", "dns:///host:port", "ipv4:a:p,b:p", "unix:/path" (gRPC's naming syntax).
  std::string target = "127.0.0.1:8001";
  // "" (gRPC's default, pick_first) or "round_robin". round_robin spreads calls over every
  // address the resolver returns, e.g. the pods behind a Kubernetes headless service; a plain
  // "host:port" target is resolved through "dns:///" for it.
  std::string load_balancing;
  // Independent HTTP/2 connections; calls are spread over them. One connection multiplexes
  // ~100 concurrent streams before calls queue on the client, so high concurrency wants several.
  int num_channels = 1;
  // Receive/send limit; tensors larger than gRPC's 4 MiB default are common.
  int max_message_bytes = 256 * 1024 * 1024;
  TlsOptions tls;
};

// The target string handed to gRPC: checks the syntax and the load-balancing policy name, and
// prefixes "dns:///" to a bare host:port when round_robin needs a resolver that returns every
// address.
Result<std::string> ResolveTarget(const ChannelOptions& options);

// Builds options.num_channels channels that do not share connections. Reads the TLS files;
// connects lazily (the first call, or WaitForConnected, dials).
Result<std::vector<std::shared_ptr<grpc::Channel>>> MakeChannels(const ChannelOptions& options);

}  // namespace ltserve::client
