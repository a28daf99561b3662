// TLS and mutual TLS against the fake server, with a throw-away CA made by the openssl tool.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "client.h"
#include "fake_server.h"

namespace ltserve::client {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Loopback calls with a TLS handshake on a loaded CI machine; only failures wait this long.
constexpr auto kCallBound = 10s;

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A CA and a server and a client certificate signed by it, in a fresh directory.
class Pki {
 public:
  static std::unique_ptr<Pki> Make() {
    if (std::system("command -v openssl >/dev/null 2>&1") != 0) return nullptr;
    auto pki = std::unique_ptr<Pki>(new Pki());
    const fs::path script = pki->dir_ / "make.sh";
    std::ofstream(script) << "set -e\ncd \"$(dirname \"$0\")\"\n"
                             "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 "
                             "-subj /CN=test-ca\n"
                             "for who in server client; do\n"
                             "  openssl req -newkey rsa:2048 -nodes -keyout $who.key -out $who.csr -subj /CN=$who\n"
                             "  echo subjectAltName=DNS:localhost,IP:127.0.0.1 > $who.ext\n"
                             "  openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
                             "-out $who.pem -days 1 -extfile $who.ext\n"
                             "done\n";
    if (std::system(("bash '" + script.string() + "' >/dev/null 2>&1").c_str()) != 0) return nullptr;
    return pki;
  }
  ~Pki() { fs::remove_all(dir_); }
  fs::path operator/(const std::string& name) const { return dir_ / name; }

 private:
  Pki() : dir_(fs::temp_directory_path() / ("ltserve_tls_" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
  }
  fs::path dir_;
};

std::unique_ptr<testing::FakeInferenceServer> StartTlsServer(const Pki& pki, bool require_client_cert) {
  grpc::SslServerCredentialsOptions ssl(require_client_cert
                                            ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                            : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  ssl.pem_root_certs = Read(pki / "ca.pem");
  ssl.pem_key_cert_pairs.push_back({Read(pki / "server.key"), Read(pki / "server.pem")});
  return testing::FakeInferenceServer::Start(grpc::SslServerCredentials(ssl));
}

Result<bool> Live(const std::string& target, const TlsOptions& tls) {
  ClientOptions options;
  options.channel.target = target;
  options.channel.tls = tls;
  options.default_timeout = kCallBound;
  LTSERVE_ASSIGN_OR_RETURN(auto client, Client::Create(options));
  return client->ServerLive();
}

TEST(Tls, ServerCertificateIsVerified) {
  auto pki = Pki::Make();
  if (!pki) GTEST_SKIP() << "the openssl tool is not available to make test certificates";
  auto server = StartTlsServer(*pki, false);
  ASSERT_NE(server, nullptr);

  TlsOptions tls;
  tls.enabled = true;
  tls.root_certs_file = (*pki / "ca.pem").string();
  auto live = Live(server->address(), tls);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_TRUE(*live);

  TlsOptions wrong_root = tls;
  wrong_root.root_certs_file = (*pki / "client.pem").string();  // not a CA of the server's chain
  EXPECT_EQ(Live(server->address(), wrong_root).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(Live(server->address(), TlsOptions{}).status().code(), StatusCode::kUnavailable)
      << "plaintext must not reach a TLS server";
}

TEST(Tls, MutualTlsNeedsTheClientCertificate) {
  auto pki = Pki::Make();
  if (!pki) GTEST_SKIP() << "the openssl tool is not available to make test certificates";
  auto server = StartTlsServer(*pki, true);
  ASSERT_NE(server, nullptr);

  TlsOptions tls;
  tls.enabled = true;
  tls.root_certs_file = (*pki / "ca.pem").string();
  tls.server_name_override = "localhost";
  EXPECT_EQ(Live(server->address(), tls).status().code(), StatusCode::kUnavailable)
      << "a server that requires a client certificate must refuse one without";
  tls.client_cert_file = (*pki / "client.pem").string();
  tls.client_key_file = (*pki / "client.key").string();
  auto live = Live(server->address(), tls);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_TRUE(*live);
}

}  // namespace
}  // namespace ltserve::client
