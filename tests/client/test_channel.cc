// Target parsing and channel construction, without a network.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "channel.h"

namespace ltserve::client {
namespace {

ChannelOptions Target(std::string target, std::string lb = "") {
  ChannelOptions options;
  options.target = std::move(target);
  options.load_balancing = std::move(lb);
  return options;
}

TEST(ResolveTarget, RoundRobinOverBareHostPortGoesThroughDns) {
  auto resolved = ResolveTarget(Target("ltserve-headless.default.svc.cluster.local:8001", "round_robin"));
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  EXPECT_EQ(*resolved, "dns:///ltserve-headless.default.svc.cluster.local:8001");
}

TEST(ResolveTarget, KeepsExplicitSchemes) {
  for (const std::string target :
       {"dns:///svc.ns:8001", "dns://8.8.8.8:53/svc.ns:8001", "ipv4:10.0.0.1:8001,10.0.0.2:8001",
        "ipv6:[::1]:8001", "unix:/run/ltserve.sock"}) {
    auto resolved = ResolveTarget(Target(target, "round_robin"));
    ASSERT_TRUE(resolved.ok()) << target << ": " << resolved.status().ToString();
    EXPECT_EQ(*resolved, target);
  }
}

TEST(ResolveTarget, LeavesBareTargetsAloneWithoutRoundRobin) {
  for (const std::string target : {"127.0.0.1:8001", "localhost:1", "[::1]:8001"}) {
    auto resolved = ResolveTarget(Target(target));
    ASSERT_TRUE(resolved.ok()) << target << ": " << resolved.status().ToString();
    EXPECT_EQ(*resolved, target);
  }
}

TEST(ResolveTarget, RejectsMalformedTargets) {
  for (const std::string target : {"", "localhost", "localhost:", "host:port", "host:99999", ":8001",
                                   "dns:///svc", "dns://8.8.8.8", "unix:"}) {
    auto resolved = ResolveTarget(Target(target, "round_robin"));
    EXPECT_FALSE(resolved.ok()) << "accepted '" << target << "'";
    EXPECT_EQ(resolved.status().code(), StatusCode::kInvalidArgument) << target;
  }
}

TEST(ResolveTarget, RejectsUnknownPolicyAndChannelCounts) {
  EXPECT_EQ(ResolveTarget(Target("h:1", "least_request_typo")).status().code(), StatusCode::kInvalidArgument);
  ChannelOptions options = Target("h:1");
  for (int count : {0, -1, 257}) {
    options.num_channels = count;
    EXPECT_EQ(ResolveTarget(options).status().code(), StatusCode::kInvalidArgument) << count;
  }
}

TEST(MakeChannels, BuildsTheRequestedNumber) {
  ChannelOptions options = Target("127.0.0.1:1", "round_robin");
  options.num_channels = 3;
  auto channels = MakeChannels(options);
  ASSERT_TRUE(channels.ok()) << channels.status().ToString();
  EXPECT_EQ(channels->size(), 3u);
  EXPECT_NE((*channels)[0].get(), (*channels)[1].get());
}

TEST(MakeChannels, TlsFileErrorsNameTheFile) {
  ChannelOptions options = Target("127.0.0.1:1");
  options.tls.enabled = true;
  options.tls.root_certs_file = "/nonexistent/ca.pem";
  auto missing = MakeChannels(options);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/ca.pem"), std::string::npos);

  const auto cert = std::filesystem::temp_directory_path() / "ltserve_client_test_cert.pem";
  std::ofstream(cert) << "not a real certificate\n";
  options.tls.root_certs_file.clear();
  options.tls.client_cert_file = cert.string();
  EXPECT_EQ(MakeChannels(options).status().code(), StatusCode::kInvalidArgument)
      << "a client certificate without its key must be refused";
  std::filesystem::remove(cert);
}

}  // namespace
}  // namespace ltserve::client
