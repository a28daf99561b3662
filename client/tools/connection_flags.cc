#include "connection_flags.h"

namespace ltserve::client {

void ConnectionFlags::Register(CLI::App& app) {
  app.add_option("-u,--url", url, "gRPC target: host:port, dns:///host:port, ipv4:a:p,b:p")
      ->capture_default_str();
  app.add_option("--lb", load_balancing, "load balancing: round_robin spreads calls over every resolved address")
      ->check(CLI::IsMember({"", "pick_first", "round_robin"}));
  app.add_option("--channels", channels, "independent connections to spread calls over")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--timeout-ms", timeout_ms, "deadline of each call in milliseconds (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--tls", tls, "connect with TLS");
  app.add_option("--tls-root-certs", tls_root, "PEM root certificates (default: system store)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-cert", tls_cert, "PEM client certificate (mutual TLS)")->check(CLI::ExistingFile);
  app.add_option("--tls-key", tls_key, "PEM client private key (mutual TLS)")->check(CLI::ExistingFile);
  app.add_option("--tls-server-name", tls_server_name, "expected name in the server certificate");
}

ClientOptions ConnectionFlags::ToOptions() const {
  ClientOptions options;
  options.channel.target = url;
  options.channel.load_balancing = load_balancing;
  options.channel.num_channels = channels;
  options.channel.tls.enabled = tls || !tls_root.empty() || !tls_cert.empty();
  options.channel.tls.root_certs_file = tls_root;
  options.channel.tls.client_cert_file = tls_cert;
  options.channel.tls.client_key_file = tls_key;
  options.channel.tls.server_name_override = tls_server_name;
  options.default_timeout = std::chrono::milliseconds(timeout_ms);
  return options;
}

}  // namespace ltserve::client
