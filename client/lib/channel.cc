#include "channel.h"

#include <grpcpp/grpcpp.h>

#include <array>
#include <charconv>
#include <fstream>
#include <sstream>

namespace ltserve::client {
namespace {

constexpr int kMaxChannels = 256;
constexpr std::array<std::string_view, 6> kSchemes = {"dns", "ipv4", "ipv6", "unix",
                                                       "unix-abstract", "vsock"};

bool HasScheme(std::string_view target) {
  const auto colon = target.find(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view head = target.substr(0, colon);
  for (std::string_view scheme : kSchemes) {
    if (head == scheme) return true;
  }
  return false;
}

bool IsPort(std::string_view text) {
  if (text.empty() || text.size() > 5) return false;
  unsigned value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() && value <= 65535;
}

// host:port, [v6]:port.
Status CheckHostPort(std::string_view text, std::string_view whole) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || !IsPort(text.substr(colon + 1))) {
    return InvalidArgument("target '" + std::string(whole) +
                           "' is not host:port (e.g. 127.0.0.1:8001, dns:///svc.ns:8001)");
  }
  return Status::Ok();
}

Result<std::string> ReadFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read the TLS " + std::string(what) + " file '" + path + "'");
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

Result<std::shared_ptr<grpc::ChannelCredentials>> MakeCredentials(const TlsOptions& tls) {
  if (!tls.enabled) return grpc::InsecureChannelCredentials();
  if (tls.client_cert_file.empty() != tls.client_key_file.empty()) {
    return InvalidArgument("TLS client certificate and key go together: give both files or neither");
  }
  grpc::SslCredentialsOptions ssl;
  if (!tls.root_certs_file.empty()) {
    LTSERVE_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile(tls.root_certs_file, "root certificates"));
  }
  if (!tls.client_cert_file.empty()) {
    LTSERVE_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadFile(tls.client_cert_file, "client certificate"));
    LTSERVE_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadFile(tls.client_key_file, "client key"));
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

Result<std::string> ResolveTarget(const ChannelOptions& options) {
  const std::string& target = options.target;
  if (target.empty()) return InvalidArgument("empty target: expected host:port");
  if (!options.load_balancing.empty() && options.load_balancing != "pick_first" &&
      options.load_balancing != "round_robin") {
    return InvalidArgument("unknown load-balancing policy '" + options.load_balancing +
                           "': expected round_robin or pick_first");
  }
  if (options.num_channels < 1 || options.num_channels > kMaxChannels) {
    return InvalidArgument("num_channels is " + std::to_string(options.num_channels) +
                           ": expected 1 to " + std::to_string(kMaxChannels));
  }
  if (HasScheme(target)) {
    if (target.starts_with("dns:")) {
      // dns:[//authority]/host:port
      std::string_view rest = std::string_view(target).substr(4);
      if (rest.starts_with("//")) {
        const auto slash = rest.find('/', 2);
        if (slash == std::string_view::npos) {
          return InvalidArgument("target '" + target + "' lacks the '/' before host:port (dns:///host:port)");
        }
        rest = rest.substr(slash + 1);
      }
      LTSERVE_RETURN_IF_ERROR(CheckHostPort(rest, target));
    } else if (target.find(':') + 1 == target.size()) {
      return InvalidArgument("target '" + target + "' names a scheme but no address");
    }
    return target;
  }
  LTSERVE_RETURN_IF_ERROR(CheckHostPort(target, target));
  if (options.load_balancing == "round_robin") return "dns:///" + target;
  return target;
}

Result<std::vector<std::shared_ptr<grpc::Channel>>> MakeChannels(const ChannelOptions& options) {
  LTSERVE_ASSIGN_OR_RETURN(const std::string target, ResolveTarget(options));
  LTSERVE_ASSIGN_OR_RETURN(auto credentials, MakeCredentials(options.tls));
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  channels.reserve(options.num_channels);
  for (int i = 0; i < options.num_channels; ++i) {
    grpc::ChannelArguments args;
    if (!options.load_balancing.empty()) args.SetLoadBalancingPolicyName(options.load_balancing);
    args.SetMaxReceiveMessageSize(options.max_message_bytes);
    args.SetMaxSendMessageSize(options.max_message_bytes);
    // Without a private subchannel pool and distinct arguments gRPC would give every channel
    // the same TCP connection, defeating the point of several channels.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("ltserve.channel_index", i);
    if (options.tls.enabled && !options.tls.server_name_override.empty()) {
      args.SetSslTargetNameOverride(options.tls.server_name_override);
    }
    channels.push_back(grpc::CreateCustomChannel(target, credentials, args));
  }
  return channels;
}

}  // namespace ltserve::client
