// HttpServer: every endpoint and status code, binding errors, handler failures, shutdown and
// concurrent clients, through cpp-httplib's client.
#include "http/http_server.h"

#include <gtest/gtest.h>

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "http_test_util.h"

namespace ltserve {
namespace {

// Handlers backed by state the test flips, as the server's health and repository would.
struct FakeServerState {
  std::atomic<bool> live{true};
  std::atomic<bool> ready{false};
  std::mutex mutex;
  std::map<std::string, bool> models;
  std::string metrics_text;

  HttpHandlers Handlers() {
    return HttpHandlers{
        [this] { return live.load(); },
        [this] { return ready.load(); },
        [this](const std::string& model, const std::string& version) -> std::optional<bool> {
          std::lock_guard lock(mutex);
          const auto it = models.find(model);
          // Every fake model has the one version 1.
          if (it == models.end() || (!version.empty() && version != "1")) return std::nullopt;
          return it->second;
        },
        [this] {
          std::lock_guard lock(mutex);
          return metrics_text;
        },
        nullptr,
    };
  }
};

TEST(HttpServerTest, AnswersEveryEndpointWithTritonsStatusCodes) {
  FakeServerState state;
  state.models = {{"mlp", true}, {"encoder", false}, {"name with space", true}};
  state.metrics_text = testing::RandomMetricsText();
  auto server = HttpServer::Start("127.0.0.1", 0, state.Handlers());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_GT((*server)->port(), 0);
  httplib::Client client("127.0.0.1", (*server)->port());

  EXPECT_EQ(testing::GetStatus(client, "/v2/health/live"), 200);
  state.live = false;
  EXPECT_EQ(testing::GetStatus(client, "/v2/health/live"), 503);
  EXPECT_EQ(testing::GetStatus(client, "/v2/health/ready"), 503);
  state.ready = true;
  EXPECT_EQ(testing::GetStatus(client, "/v2/health/ready"), 200);

  EXPECT_EQ(testing::GetStatus(client, "/v2/models/mlp/ready"), 200);
  EXPECT_EQ(testing::GetStatus(client, "/v2/models/encoder/ready"), 503);
  EXPECT_EQ(testing::GetStatus(client, "/v2/models/name%20with%20space/ready"), 200);
  EXPECT_EQ(testing::GetStatus(client, "/v2/models/unknown/ready"), 404);
  EXPECT_EQ(testing::GetStatus(client, "/v2/models//ready"), 404);
  EXPECT_EQ(testing::GetStatus(client, "/v2/models/mlp/versions/1/ready"), 200);
  EXPECT_EQ(testing::GetStatus(client, "/v2/models/encoder/versions/1/ready"), 503);
  EXPECT_EQ(testing::GetStatus(client, "/v2/models/mlp/versions/2/ready"), 404);
  EXPECT_EQ(testing::GetStatus(client, "/no/such/path"), 404);

  const auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->body, state.metrics_text);
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");

  // What the handler says now, not what it said at start.
  state.metrics_text = testing::RandomMetricsText();
  const auto again = client.Get("/metrics");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->body, state.metrics_text);
}

TEST(HttpServerTest, RejectsMissingHandlersAndBadPorts) {
  FakeServerState state;
  for (int missing = 0; missing < 4; ++missing) {
    HttpHandlers handlers = state.Handlers();
    if (missing == 0) handlers.live = nullptr;
    if (missing == 1) handlers.ready = nullptr;
    if (missing == 2) handlers.model_ready = nullptr;
    if (missing == 3) handlers.metrics = nullptr;
    auto server = HttpServer::Start("127.0.0.1", 0, handlers);
    ASSERT_FALSE(server.ok()) << "handler " << missing << " missing";
    EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
  }
  for (int port : {-1, 65536, 1 << 20}) {
    auto server = HttpServer::Start("127.0.0.1", port, state.Handlers());
    ASSERT_FALSE(server.ok()) << port;
    EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(HttpServerTest, ReportsAnAddressItCannotBind) {
  FakeServerState state;
  auto first = HttpServer::Start("127.0.0.1", 0, state.Handlers());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = HttpServer::Start("127.0.0.1", (*first)->port(), state.Handlers());
  ASSERT_FALSE(second.ok()) << "two servers on one port";
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);

  // 192.0.2.0/24 is reserved for documentation: no interface of this machine has it.
  auto foreign = HttpServer::Start("192.0.2.1", 0, state.Handlers());
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.status().code(), StatusCode::kUnavailable);

  // The first one still answers.
  httplib::Client client("127.0.0.1", (*first)->port());
  EXPECT_EQ(testing::GetStatus(client, "/v2/health/live"), 200);
}

TEST(HttpServerTest, AThrowingHandlerGivesA500AndTheServerLivesOn) {
  FakeServerState state;
  HttpHandlers handlers = state.Handlers();
  handlers.metrics = []() -> std::string { throw std::runtime_error("registry gone"); };
  auto server = HttpServer::Start("127.0.0.1", 0, handlers);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client client("127.0.0.1", (*server)->port());
  EXPECT_EQ(testing::GetStatus(client, "/metrics"), 500);
  EXPECT_EQ(testing::GetStatus(client, "/v2/health/live"), 200);
}

TEST(HttpServerTest, ServesConcurrentClients) {
  FakeServerState state;
  state.ready = true;
  state.models = {{"mlp", true}};
  state.metrics_text = testing::RandomMetricsText();
  auto server = HttpServer::Start("127.0.0.1", 0, state.Handlers());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(testing::HammerAllEndpoints((*server)->port(), state.metrics_text), 0)
      << "requests that did not get the expected answer";
}

TEST(HttpServerTest, ConnectionsThatSendNothingDoNotDelayOthers) {
  // More than any fixed pool the server had (8 workers): each of these held one for its
  // keep-alive second, so a probe behind them waited about 100 / 8 seconds.
  constexpr int kIdleConnections = 100;
  constexpr auto kAnswerBound = std::chrono::seconds(2);  // well under the queue it replaced
  FakeServerState state;
  auto server = HttpServer::Start("127.0.0.1", 0, state.Handlers());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>((*server)->port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<int> idle;
  for (int i = 0; i < kIdleConnections; ++i) {
    const int sock = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(sock, 0);
    ASSERT_EQ(connect(sock, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
    idle.push_back(sock);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // all accepted and waiting
  httplib::Client probe("127.0.0.1", (*server)->port());
  probe.set_read_timeout(kAnswerBound);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(testing::GetStatus(probe, "/v2/health/live"), 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, kAnswerBound);
  for (int sock : idle) close(sock);
}

TEST(HttpServerTest, DestructionStopsServingEvenWithAKeptAliveConnection) {
  // Bounds the destructor's wait for an idle kept-alive connection (1 s in the server) with
  // room for a loaded machine.
  constexpr auto kStopBound = std::chrono::seconds(10);
  FakeServerState state;
  auto server = HttpServer::Start("127.0.0.1", 0, state.Handlers());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  httplib::Client kept("127.0.0.1", port);
  kept.set_keep_alive(true);
  EXPECT_EQ(testing::GetStatus(kept, "/v2/health/live"), 200);

  std::unique_ptr<HttpServer> owned = std::move(server).value();
  const auto start = std::chrono::steady_clock::now();
  owned.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, kStopBound);

  httplib::Client late("127.0.0.1", port);
  late.set_connection_timeout(std::chrono::seconds(2));
  const auto response = late.Get("/v2/health/live");
  EXPECT_FALSE(response) << "answered after destruction with " << response->status;
}

TEST(HttpServerTest, ThePortCanBeReusedAfterTheServerStops) {
  FakeServerState state;
  int port = 0;
  {
    auto server = HttpServer::Start("127.0.0.1", 0, state.Handlers());
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    port = (*server)->port();
    httplib::Client client("127.0.0.1", port);
    EXPECT_EQ(testing::GetStatus(client, "/v2/health/live"), 200);
  }
  // A restart must not wait for the old connections' TIME_WAIT to pass.
  auto again = HttpServer::Start("127.0.0.1", port, state.Handlers());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->port(), port);
}

// An api handler that answers what it was asked, so a test sees what reached it.
HttpHandlers EchoingApi(FakeServerState& state) {
  HttpHandlers handlers = state.Handlers();
  handlers.api = [](const HttpRequest& request) {
    HttpReply reply;
    reply.status = 299;
    reply.content_type = "application/json";
    reply.headers.emplace_back("X-Seen-Header", std::string(request.Header("x-test").value_or("none")));
    reply.body = request.method + " " + request.path + " " + request.body;
    return reply;
  };
  return handlers;
}

std::string Gzip(const std::string& text) {
  httplib::detail::gzip_compressor compressor;
  std::string out;
  EXPECT_TRUE(compressor.compress(text.data(), text.size(), true, [&](const char* data, size_t n) {
    out.append(data, n);
    return true;
  }));
  return out;
}

TEST(HttpServerTest, HandsOtherV2RequestsToTheApiWithTheirHeadersAndBody) {
  FakeServerState state;
  auto server = HttpServer::Start("127.0.0.1", 0, EchoingApi(state));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client client("127.0.0.1", (*server)->port());

  const auto get = client.Get("/v2/models/a%20b/config", {{"X-Test", "yes"}});
  ASSERT_TRUE(get) << httplib::to_string(get.error());
  EXPECT_EQ(get->status, 299);
  EXPECT_EQ(get->body, "GET /v2/models/a b/config ");
  EXPECT_EQ(get->get_header_value("X-Seen-Header"), "yes");
  EXPECT_EQ(get->get_header_value("Content-Type"), "application/json");

  const auto post = client.Post("/v2/models/m/infer", "{\"inputs\": []}", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->body, "POST /v2/models/m/infer {\"inputs\": []}");
  // Readiness stays the server's own route, whatever the api would say.
  EXPECT_EQ(testing::GetStatus(client, "/v2/health/live"), 200);
}

TEST(HttpServerTest, NeverCompressesAnApiReplyAgain) {
  FakeServerState state;
  auto server = HttpServer::Start("127.0.0.1", 0, EchoingApi(state));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client client("127.0.0.1", (*server)->port());
  client.set_decompress(false);
  const auto reply = client.Get("/v2", {{"Accept-Encoding", "gzip, br"}});
  ASSERT_TRUE(reply);
  EXPECT_FALSE(reply->has_header("Content-Encoding"));
  EXPECT_EQ(reply->body, "GET /v2 ");
}

TEST(HttpServerTest, HandsTheApiTheDecompressedBody) {
  FakeServerState state;
  auto server = HttpServer::Start("127.0.0.1", 0, EchoingApi(state));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client client("127.0.0.1", (*server)->port());
  const std::string text(5000, 'x');
  const auto reply = client.Post("/v2/x", {{"Content-Encoding", "gzip"}}, Gzip(text),
                                 "application/octet-stream");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 299);
  EXPECT_EQ(reply->body, "POST /v2/x " + text);
}

HttpServerOptions LoopbackOptions() {
  HttpServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  return options;
}

TEST(HttpServerTest, RefusesABodyOverTheLimitWith413AndSaysSo) {
  FakeServerState state;
  HttpServerOptions options = LoopbackOptions();
  options.max_body_bytes = 1000;
  auto server = HttpServer::Start(options, EchoingApi(state));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client client("127.0.0.1", (*server)->port());

  const auto declared = client.Post("/v2/x", std::string(2000, 'x'), "application/json");
  ASSERT_TRUE(declared);
  EXPECT_EQ(declared->status, 413);
  EXPECT_NE(declared->body.find("\"error\""), std::string::npos) << declared->body;
  EXPECT_NE(declared->body.find("1000"), std::string::npos) << declared->body;

  // Small on the wire, too large once decompressed.
  httplib::Client again("127.0.0.1", (*server)->port());
  const auto inflated = again.Post("/v2/x", {{"Content-Encoding", "gzip"}},
                                   Gzip(std::string(100000, 'x')), "application/json");
  ASSERT_TRUE(inflated);
  EXPECT_EQ(inflated->status, 413);
  EXPECT_EQ(inflated->get_header_value("Connection"), "close");

  httplib::Client exact("127.0.0.1", (*server)->port());
  const auto fits = exact.Post("/v2/x", std::string(1000, 'x'), "application/json");
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->status, 299);
}

TEST(HttpServerTest, ABodyThatIsNotWhatItsEncodingSaysIs400WithAMessage) {
  FakeServerState state;
  auto server = HttpServer::Start("127.0.0.1", 0, EchoingApi(state));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client client("127.0.0.1", (*server)->port());
  const auto garbled = client.Post("/v2/x", {{"Content-Encoding", "gzip"}},
                                   std::string("not gzip at all"), "application/json");
  ASSERT_TRUE(garbled);
  EXPECT_EQ(garbled->status, 400);
  EXPECT_NE(garbled->body.find("Content-Encoding"), std::string::npos) << garbled->body;
}

TEST(HttpServerTest, AnUnknownContentEncodingIs415NamingTheKnownOnes) {
  FakeServerState state;
  auto server = HttpServer::Start("127.0.0.1", 0, EchoingApi(state));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client client("127.0.0.1", (*server)->port());
  const auto reply = client.Post("/v2/x", {{"Content-Encoding", "compress"}}, std::string("abc"),
                                 "application/json");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 415);
  EXPECT_EQ(reply->get_header_value("Accept-Encoding"), "gzip, deflate");
  EXPECT_NE(reply->body.find("compress"), std::string::npos) << reply->body;
}

TEST(HttpServerTest, AnUnknownPathIs404WithAJsonError) {
  FakeServerState state;
  auto server = HttpServer::Start("127.0.0.1", 0, state.Handlers());  // no api
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client client("127.0.0.1", (*server)->port());
  const auto reply = client.Post("/v2/models/m/infer", std::string("{}"), "application/json");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 404);
  EXPECT_EQ(reply->body, "{\"error\":\"Not Found: no endpoint POST /v2/models/m/infer\"}");
}

TEST(HttpServerTest, RefusesHalfATlsConfigurationAndUnusableCertificates) {
  FakeServerState state;
  HttpServerOptions only_cert = LoopbackOptions();
  only_cert.server_cert = "/nonexistent/cert.pem";
  auto half = HttpServer::Start(only_cert, state.Handlers());
  ASSERT_FALSE(half.ok());
  EXPECT_EQ(half.status().code(), StatusCode::kInvalidArgument);

  HttpServerOptions ca_only = LoopbackOptions();
  ca_only.client_ca = "/nonexistent/ca.pem";
  auto mutual_without_cert = HttpServer::Start(ca_only, state.Handlers());
  ASSERT_FALSE(mutual_without_cert.ok());
  EXPECT_EQ(mutual_without_cert.status().code(), StatusCode::kInvalidArgument);

  HttpServerOptions missing = only_cert;
  missing.server_key = "/nonexistent/key.pem";
  auto unusable = HttpServer::Start(missing, state.Handlers());
  ASSERT_FALSE(unusable.ok());
  EXPECT_EQ(unusable.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unusable.status().message().find("/nonexistent/cert.pem"), std::string::npos);
}

}  // namespace
}  // namespace ltserve
