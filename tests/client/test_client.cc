// The client library against an in-process fake KServe v2 server on loopback.
#include <gtest/gtest.h>

#include <condition_variable>
#include <limits>
#include <random>

#include "client.h"
#include "common/float16.h"
#include "fake_server.h"
#include "status_convert.h"

namespace ltserve::client {
namespace {

using testing::FakeInferenceServer;
using namespace std::chrono_literals;

// Generous bound for a loopback call on a loaded 2-core CI machine; only failures wait this long.
constexpr auto kCallBound = 5s;
// Deadline short enough to keep the test quick, long enough to be set before the call starts.
constexpr auto kShortDeadline = 100ms;

std::vector<float> RandomFloats(std::size_t n) {
  static std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  std::vector<float> values(n);
  for (auto& v : values) v = dist(rng);
  return values;
}

// The value of a call that must succeed; records a failure and yields T{} otherwise.
template <typename T>
T Get(Result<T> result) {
  if (!result.ok()) {
    ADD_FAILURE() << result.status().ToString();
    return T{};
  }
  return std::move(result).value();
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = FakeInferenceServer::Start();
    ASSERT_NE(server_, nullptr) << "fake server did not start";
    client_ = MakeClient(server_->address());
    ASSERT_NE(client_, nullptr);
  }

  static std::unique_ptr<Client> MakeClient(std::string target, std::string lb = "", int channels = 1,
                                            std::chrono::microseconds default_timeout = kCallBound) {
    ClientOptions options;
    options.channel.target = std::move(target);
    options.channel.load_balancing = std::move(lb);
    options.channel.num_channels = channels;
    options.default_timeout = default_timeout;
    auto client = Client::Create(std::move(options));
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  std::unique_ptr<FakeInferenceServer> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(ClientTest, HealthAndMetadata) {
  auto live = client_->ServerLive();
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_TRUE(*live);
  EXPECT_TRUE(Get(client_->ServerReady()));
  server_->set_ready(false);
  EXPECT_FALSE(Get(client_->ServerReady()));
  auto health = client_->HealthCheck("inference.GRPCInferenceService");
  ASSERT_TRUE(health.ok()) << health.status().ToString();
  EXPECT_EQ(*health, HealthStatus::kNotServing);
  EXPECT_EQ(Get(client_->HealthCheck()), HealthStatus::kServing);
  EXPECT_EQ(client_->HealthCheck("nope").status().code(), StatusCode::kNotFound);

  EXPECT_TRUE(Get(client_->ModelReady("double")));
  EXPECT_EQ(client_->ModelReady("absent").status().code(), StatusCode::kNotFound);

  auto server = client_->ServerMetadata();
  ASSERT_TRUE(server.ok());
  EXPECT_EQ(server->name(), "fake");
  auto model = client_->ModelMetadata("double");
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->inputs(0).name(), "INPUT__0");
  EXPECT_EQ(model->inputs(0).shape(1), 5);
  EXPECT_EQ(client_->ModelMetadata("absent").status().code(), StatusCode::kNotFound);
  auto config = client_->ModelConfig("double");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->config().max_batch_size(), 8);
}

TEST_F(ClientTest, SyncInferRoundTripsEveryNumericType) {
  const auto values = RandomFloats(3 * 37);
  InferRequest request("double");
  ASSERT_TRUE(request.AddInput<float>("f32", {3, 37}, values).ok());
  ASSERT_TRUE(request.AddFloatInput("f16", DataType::kFp16, {3, 37}, values).ok());
  ASSERT_TRUE(request.AddFloatInput("b16", DataType::kBf16, {111}, values).ok());
  std::vector<std::int64_t> ints(11);
  for (std::size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<std::int64_t>(values[i] * 1e6);
  ASSERT_TRUE(request.AddInput<std::int64_t>("i64", {11}, ints).ok());
  request.SetId("abc");

  auto result = client_->Infer(request);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->proto().id(), "abc");

  std::vector<float> f32(values.size(), std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(result->CopyOutput<float>("f32_x2", f32).ok());
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(f32[i], 2 * values[i]) << i;

  // Doubling is exact in every binary format, so the 16-bit outputs equal twice the rounded input.
  for (const auto& [name, fp16] : {std::pair{"f16_x2", true}, std::pair{"b16_x2", false}}) {
    auto widened = result->OutputAsFloat(name);
    ASSERT_TRUE(widened.ok()) << widened.status().ToString();
    ASSERT_EQ(widened->size(), values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      const float rounded = fp16 ? Fp16ToFloat(FloatToFp16(values[i])) : Bf16ToFloat(FloatToBf16(values[i]));
      EXPECT_EQ((*widened)[i], 2 * rounded) << name << " " << i;
    }
  }
  std::vector<std::int64_t> out_ints(ints.size(), -7);
  ASSERT_TRUE(result->CopyOutput<std::int64_t>("i64_x2", out_ints).ok());
  for (std::size_t i = 0; i < ints.size(); ++i) EXPECT_EQ(out_ints[i], 2 * ints[i]);
}

TEST_F(ClientTest, RequestArrivesAsBuiltWithHeaders) {
  const auto values = RandomFloats(10);
  InferRequest request("double", "3");
  ASSERT_TRUE(request.AddInput<float>("x", {2, 5}, values).ok());
  request.RequestOutput("x_x2");
  request.SetPriority(1);
  CallOptions call;
  call.headers = {{"x-tenant", "blue"}};
  ASSERT_TRUE(client_->Infer(request, call).ok());
  const auto seen = server_->last_request();
  EXPECT_EQ(seen.SerializeAsString(), request.proto().SerializeAsString());
  const auto metadata = server_->last_metadata();
  ASSERT_EQ(metadata.count("x-tenant"), 1u);
  EXPECT_EQ(metadata.find("x-tenant")->second, "blue");
}

TEST_F(ClientTest, TypedResponseContentsDecode) {
  const auto values = RandomFloats(17);
  InferRequest request("double");
  ASSERT_TRUE(request.AddInput<float>("x", {17}, values).ok());
  inference::ModelInferRequest& proto = const_cast<inference::ModelInferRequest&>(request.proto());
  (*proto.mutable_parameters())["typed"].set_bool_param(true);
  auto result = client_->Infer(request);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->proto().raw_output_contents_size(), 0) << "the fake must have used typed contents";
  std::vector<float> out(17, std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(result->CopyOutput<float>("x_x2", out).ok());
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(out[i], 2 * values[i]);
}

TEST_F(ClientTest, AsyncCallbacksMatchTheirRequests) {
  constexpr int kCalls = 64;
  std::mutex mutex;
  std::condition_variable done;
  int finished = 0, correct = 0;
  for (int c = 0; c < kCalls; ++c) {
    auto values = std::make_shared<std::vector<float>>(RandomFloats(1 + c));
    auto request = std::make_shared<InferRequest>("double");
    ASSERT_TRUE(request->AddInput<float>("x", {1 + c}, *values).ok());
    client_->AsyncInfer(request, [&, values](Result<InferResult> result) {
      bool good = false;
      if (result.ok()) {
        std::vector<float> out(values->size(), std::numeric_limits<float>::quiet_NaN());
        good = result->CopyOutput<float>("x_x2", out).ok();
        for (std::size_t i = 0; good && i < out.size(); ++i) good = out[i] == 2 * (*values)[i];
      }
      std::lock_guard lock(mutex);
      correct += good;
      if (++finished == kCalls) done.notify_all();
    });
  }
  std::unique_lock lock(mutex);
  ASSERT_TRUE(done.wait_for(lock, kCallBound, [&] { return finished == kCalls; }))
      << finished << " of " << kCalls << " callbacks ran";
  EXPECT_EQ(correct, kCalls);
  EXPECT_EQ(server_->infer_calls(), kCalls);
}

TEST_F(ClientTest, AsyncWithoutRequestReportsInvalidArgument) {
  std::promise<Status> outcome;
  client_->AsyncInfer(nullptr, [&](Result<InferResult> result) { outcome.set_value(result.status()); });
  auto future = outcome.get_future();
  ASSERT_EQ(future.wait_for(kCallBound), std::future_status::ready);
  EXPECT_EQ(future.get().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->in_flight(), 0u);
}

TEST_F(ClientTest, FutureCarriesErrors) {
  InferRequest request("absent");
  const std::vector<float> one = {1.0f};
  ASSERT_TRUE(request.AddInput<float>("x", {1}, one).ok());
  auto future = client_->InferFuture(std::move(request));
  ASSERT_EQ(future.wait_for(kCallBound), std::future_status::ready);
  EXPECT_EQ(future.get().status().code(), StatusCode::kNotFound);
}

TEST_F(ClientTest, DeadlinesExpire) {
  InferRequest request("slow");
  CallOptions call;
  call.timeout = kShortDeadline;
  const auto start = std::chrono::steady_clock::now();
  auto result = client_->Infer(request, call);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded) << result.status().ToString();
  EXPECT_GE(took, kShortDeadline);
  EXPECT_LT(took, kCallBound);

  auto quick = MakeClient(server_->address(), "", 1, kShortDeadline);
  ASSERT_NE(quick, nullptr);
  auto future = quick->InferFuture(InferRequest("slow"));
  ASSERT_EQ(future.wait_for(kCallBound), std::future_status::ready);
  EXPECT_EQ(future.get().status().code(), StatusCode::kDeadlineExceeded)
      << "the client's default timeout must apply to async calls";
}

TEST_F(ClientTest, ServerErrorCodesMapOntoStatus) {
  const std::vector<std::pair<grpc::StatusCode, StatusCode>> cases = {
      {grpc::StatusCode::INVALID_ARGUMENT, StatusCode::kInvalidArgument},
      {grpc::StatusCode::NOT_FOUND, StatusCode::kNotFound},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, StatusCode::kResourceExhausted},
      {grpc::StatusCode::UNAVAILABLE, StatusCode::kUnavailable},
      {grpc::StatusCode::INTERNAL, StatusCode::kInternal},
      {grpc::StatusCode::UNIMPLEMENTED, StatusCode::kUnimplemented},
      {grpc::StatusCode::FAILED_PRECONDITION, StatusCode::kFailedPrecondition},
      {grpc::StatusCode::UNKNOWN, StatusCode::kInternal},
      {grpc::StatusCode::ABORTED, StatusCode::kUnavailable},
      {grpc::StatusCode::UNAUTHENTICATED, StatusCode::kFailedPrecondition},
  };
  for (const auto& [sent, expected] : cases) {
    InferRequest request("fail");
    const_cast<inference::ModelInferRequest&>(request.proto())
        .mutable_parameters()->operator[]("code").set_int64_param(static_cast<int>(sent));
    auto result = client_->Infer(request);
    EXPECT_EQ(result.status().code(), expected) << "gRPC code " << static_cast<int>(sent);
    EXPECT_NE(result.status().message().find("fake failure " + std::to_string(static_cast<int>(sent))),
              std::string::npos) << result.status().message();
  }
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST_F(ClientTest, UnreachableServerIsUnavailable) {
  const int port = server_->port();
  server_.reset();  // nothing listens on the port any more
  auto client = MakeClient("127.0.0.1:" + std::to_string(port));
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->ServerLive().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(client->WaitForConnected(kShortDeadline.count() * 1ms).code(), StatusCode::kUnavailable);
}

TEST_F(ClientTest, StatisticsReflectCalls) {
  InferRequest request("double");
  const std::vector<float> one = {3.0f};
  ASSERT_TRUE(request.AddInput<float>("x", {1}, one).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client_->Infer(request).ok());
  auto stats = client_->ModelStatistics("double");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  ASSERT_EQ(stats->model_stats_size(), 1);
  EXPECT_EQ(stats->model_stats(0).inference_count(), 3u);
  EXPECT_EQ(client_->ModelStatistics("absent").status().code(), StatusCode::kNotFound);
}

TEST_F(ClientTest, SeveralChannelsOpenSeveralConnections) {
  constexpr int kChannels = 4;
  auto client = MakeClient(server_->address(), "", kChannels);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->WaitForConnected(kCallBound.count() * 1000ms).ok());
  EXPECT_EQ(client->num_channels(), kChannels);
  InferRequest request("double");
  const std::vector<float> one = {1.0f};
  ASSERT_TRUE(request.AddInput<float>("x", {1}, one).ok());
  for (int i = 0; i < 2 * kChannels; ++i) ASSERT_TRUE(client->Infer(request).ok());
  EXPECT_EQ(server_->peers().size(), static_cast<std::size_t>(kChannels));
}

TEST_F(ClientTest, RoundRobinSpreadsOverResolvedAddresses) {
  auto second = FakeInferenceServer::Start();
  ASSERT_NE(second, nullptr);
  const std::string both = "ipv4:" + server_->address() + "," + second->address();
  InferRequest request("double");
  const std::vector<float> one = {1.0f};
  ASSERT_TRUE(request.AddInput<float>("x", {1}, one).ok());
  CallOptions call;
  call.wait_for_ready = true;  // round_robin picks only connected subchannels

  constexpr int kCalls = 20;
  auto round_robin = MakeClient(both, "round_robin");
  ASSERT_NE(round_robin, nullptr);
  ASSERT_TRUE(round_robin->WaitForConnected(kCallBound.count() * 1000ms).ok());
  // WaitForConnected returns once one subchannel is ready; the other may connect later (under
  // a sanitizer, after 20 calls), and round_robin uses it from then on. So at least kCalls,
  // and on until both servers have answered or kCallBound has passed.
  int calls = 0;
  const auto give_up = std::chrono::steady_clock::now() + kCallBound;
  while (calls < kCalls || ((server_->infer_calls() == 0 || second->infer_calls() == 0) &&
                            std::chrono::steady_clock::now() < give_up)) {
    ASSERT_TRUE(round_robin->Infer(request, call).ok());
    ++calls;
  }
  EXPECT_GT(server_->infer_calls(), 0);
  EXPECT_GT(second->infer_calls(), 0);
  EXPECT_EQ(server_->infer_calls() + second->infer_calls(), calls);

  auto pick_first = MakeClient(both, "pick_first");
  ASSERT_NE(pick_first, nullptr);
  const int before_first = server_->infer_calls(), before_second = second->infer_calls();
  for (int i = 0; i < kCalls; ++i) ASSERT_TRUE(pick_first->Infer(request, call).ok());
  const int first_delta = server_->infer_calls() - before_first;
  const int second_delta = second->infer_calls() - before_second;
  EXPECT_TRUE((first_delta == kCalls && second_delta == 0) || (first_delta == 0 && second_delta == kCalls))
      << "pick_first sent " << first_delta << " and " << second_delta;
}

}  // namespace
}  // namespace ltserve::client
