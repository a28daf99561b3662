// TLS on the HTTP port: certificates and client CAs replaced while it serves (ReloadCertificates),
// failed reloads that keep what is in force, and reloads racing handshakes.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http/http_server.h"
#include "test_certificates.h"

namespace ltserve {
namespace {

namespace fs = std::filesystem;
using testing::MakeCa;
using testing::MakeLeaf;
using testing::ReplaceFile;
using testing::TestCertificate;

constexpr int kClientTimeoutS = 5;
constexpr int kRefused = -1;  // TlsGet's answer when the handshake or the request failed

HttpHandlers Handlers() {
  HttpHandlers handlers;
  handlers.live = [] { return true; };
  handlers.ready = [] { return true; };
  handlers.model_ready = [](const std::string&, const std::string&) -> std::optional<bool> {
    return true;
  };
  handlers.metrics = [] { return std::string("# no metrics\n"); };
  return handlers;
}

class HttpTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ltserve-http-tls-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Write("ca.pem", ca_.cert_pem);
    Write("other_ca.pem", other_ca_.cert_pem);
    Write("both_cas.pem", ca_.cert_pem + other_ca_.cert_pem);
    Write("client.pem", client_.cert_pem);
    Write("client.key", client_.key_pem);
    Write("stranger.pem", stranger_.cert_pem);
    Write("stranger.key", stranger_.key_pem);
    Serve(server_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path Path(const std::string& name) const { return dir_ / name; }
  void Write(const std::string& name, const std::string& text) { ReplaceFile(Path(name), text); }
  // The files the server reads: its certificate and key.
  void Serve(const TestCertificate& leaf) {
    Write("served.pem", leaf.cert_pem);
    Write("served.key", leaf.key_pem);
  }

  HttpServerOptions Options(bool mutual) const {
    HttpServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.server_cert = Path("served.pem");
    options.server_key = Path("served.key");
    if (mutual) options.client_ca = Path("client_ca.pem");
    return options;
  }

  // The status of GET /v2/health/live over TLS from a client that trusts `trusted` (a CA file)
  // and presents `client`'s certificate when one is named; kRefused when no answer came.
  int TlsGet(int port, const std::string& trusted, const std::string& client = "") const {
    std::unique_ptr<httplib::SSLClient> connection =
        client.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", port)
                       : std::make_unique<httplib::SSLClient>(
                             "127.0.0.1", port, Path(client + ".pem").string(),
                             Path(client + ".key").string());
    connection->set_ca_cert_path(Path(trusted).c_str());
    connection->enable_server_certificate_verification(true);
    connection->set_connection_timeout(kClientTimeoutS, 0);
    connection->set_read_timeout(kClientTimeoutS, 0);
    const auto reply = connection->Get("/v2/health/live");
    return reply ? reply->status : kRefused;
  }

  fs::path dir_;
  const TestCertificate ca_ = MakeCa("ca");
  const TestCertificate other_ca_ = MakeCa("other_ca");
  const TestCertificate server_ = MakeLeaf(ca_, "server");
  const TestCertificate renewed_ = MakeLeaf(other_ca_, "renewed");  // another CA's
  const TestCertificate client_ = MakeLeaf(ca_, "client");
  const TestCertificate stranger_ = MakeLeaf(other_ca_, "stranger");
};

TEST_F(HttpTlsTest, ServesOnlyClientsThatTrustItsCertificate) {
  auto server = HttpServer::Start(Options(false), Handlers());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(TlsGet((*server)->port(), "ca.pem"), 200);
  EXPECT_EQ(TlsGet((*server)->port(), "other_ca.pem"), kRefused);
}

TEST_F(HttpTlsTest, ARenewedCertificateServesNewConnectionsAfterAReload) {
  auto server = HttpServer::Start(Options(false), Handlers());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  Serve(renewed_);
  // Replacing the files alone changes nothing: the server reads them when told to.
  EXPECT_EQ(TlsGet(port, "ca.pem"), 200);
  EXPECT_EQ(TlsGet(port, "other_ca.pem"), kRefused);
  ASSERT_TRUE((*server)->ReloadCertificates().ok());
  EXPECT_EQ(TlsGet(port, "other_ca.pem"), 200);
  EXPECT_EQ(TlsGet(port, "ca.pem"), kRefused);
}

TEST_F(HttpTlsTest, AConnectionOpenBeforeAReloadKeepsServing) {
  auto server = HttpServer::Start(Options(false), Handlers());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::SSLClient kept("127.0.0.1", (*server)->port());
  kept.set_ca_cert_path(Path("ca.pem").c_str());
  kept.enable_server_certificate_verification(true);
  kept.set_keep_alive(true);
  ASSERT_TRUE(kept.Get("/v2/health/live"));
  Serve(renewed_);
  ASSERT_TRUE((*server)->ReloadCertificates().ok());
  const auto reply = kept.Get("/v2/health/ready");  // on the connection made before
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
}

TEST_F(HttpTlsTest, AFailedReloadKeepsTheCertificateInForceAndNamesTheFile) {
  auto server = HttpServer::Start(Options(false), Handlers());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();

  Write("served.key", renewed_.key_pem);  // half a renewal: the new key, the old certificate
  Status mismatch = (*server)->ReloadCertificates();
  EXPECT_EQ(mismatch.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.message().find("is not the key of the certificate"), std::string::npos)
      << mismatch.message();
  EXPECT_EQ(TlsGet(port, "ca.pem"), 200);

  Write("served.pem", "not a certificate\n");
  Status garbage = (*server)->ReloadCertificates();
  EXPECT_EQ(garbage.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(garbage.message().find(Path("served.pem").string()), std::string::npos)
      << garbage.message();
  EXPECT_EQ(TlsGet(port, "ca.pem"), 200);

  fs::remove(Path("served.pem"));
  Status missing = (*server)->ReloadCertificates();
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("cannot read the certificate"), std::string::npos)
      << missing.message();
  EXPECT_EQ(TlsGet(port, "ca.pem"), 200);

  Serve(renewed_);  // the renewal completed: the next reload takes it
  ASSERT_TRUE((*server)->ReloadCertificates().ok());
  EXPECT_EQ(TlsGet(port, "other_ca.pem"), 200);
}

TEST_F(HttpTlsTest, AKeyThatIsNotTheCertificatesStopsTheStart) {
  Write("served.key", renewed_.key_pem);
  auto server = HttpServer::Start(Options(false), Handlers());
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find(Path("served.key").string()), std::string::npos)
      << server.status().message();
}

TEST_F(HttpTlsTest, MutualTlsFollowsAReloadedClientCa) {
  Write("client_ca.pem", ca_.cert_pem);
  auto server = HttpServer::Start(Options(true), Handlers());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  EXPECT_EQ(TlsGet(port, "ca.pem", "client"), 200);
  EXPECT_EQ(TlsGet(port, "ca.pem", "stranger"), kRefused);
  EXPECT_EQ(TlsGet(port, "ca.pem"), kRefused);  // no certificate at all

  Write("client_ca.pem", other_ca_.cert_pem);  // clients move to the other CA
  ASSERT_TRUE((*server)->ReloadCertificates().ok());
  EXPECT_EQ(TlsGet(port, "ca.pem", "stranger"), 200);
  EXPECT_EQ(TlsGet(port, "ca.pem", "client"), kRefused);

  Write("client_ca.pem", "no CA here\n");
  EXPECT_EQ((*server)->ReloadCertificates().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TlsGet(port, "ca.pem", "stranger"), 200);  // the CA in force stays
}

TEST_F(HttpTlsTest, ReloadsRacingHandshakesFailNoConnection) {
  constexpr int kClients = 3;
  constexpr int kRequestsPerClient = 15;
  constexpr int kReloads = 40;
  auto server = HttpServer::Start(Options(false), Handlers());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      // Trusts both CAs: whichever certificate is in force at its handshake must serve.
      for (int i = 0; i < kRequestsPerClient; ++i) {
        if (TlsGet(port, "both_cas.pem") != 200) ++failures;
      }
    });
  }
  for (int r = 0; r < kReloads; ++r) {
    Serve(r % 2 == 0 ? renewed_ : server_);
    EXPECT_TRUE((*server)->ReloadCertificates().ok());
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(HttpTlsTest, CertificateFilesAreWhatAReloadReads) {
  Write("client_ca.pem", ca_.cert_pem);
  auto server = HttpServer::Start(Options(true), Handlers());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ((*server)->CertificateFiles(),
            (std::vector<fs::path>{Path("served.pem"), Path("served.key"), Path("client_ca.pem")}));
}

TEST(HttpTlsPlaintextTest, APlaintextPortHasNothingToReload) {
  HttpServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  auto server = HttpServer::Start(options, Handlers());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ((*server)->ReloadCertificates().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*server)->CertificateFiles().empty());
}

}  // namespace
}  // namespace ltserve
