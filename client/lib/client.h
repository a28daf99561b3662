// C++ client for ltserve and any KServe v2 gRPC server (Triton included): health, metadata,
// statistics, and synchronous or asynchronous inference.
//
// Every call returns a Status or Result; nothing throws. gRPC status codes map one to one onto
// ltserve::StatusCode (codes ltserve has no name for arrive as INTERNAL/UNAVAILABLE with the
// original code named in the message).
//
// Thread-safety: a Client is safe to use from any number of threads at once; calls are spread
// over its channels. Async callbacks run on gRPC's threads: keep them short, and never destroy
// the Client from inside one. The destructor waits for every async call still in flight.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "channel.h"
#include "common/status.h"
#include "grpc_service.pb.h"
#include "infer_data.h"

namespace grpc {
class ClientContext;
}

namespace ltserve::client {

struct CallOptions {
  // Deadline of this call, measured from its start; zero takes ClientOptions::default_timeout.
  std::chrono::microseconds timeout{0};
  // Wait for the connection to come up instead of failing at once with UNAVAILABLE.
  bool wait_for_ready = false;
  // Extra request metadata (lower-case keys), e.g. authorisation headers for a gateway.
  std::vector<std::pair<std::string, std::string>> headers;
};

struct ClientOptions {
  ChannelOptions channel;
  std::chrono::microseconds default_timeout{0};  // zero: no deadline
};

// grpc.health.v1 serving status.
enum class HealthStatus { kUnknown, kServing, kNotServing, kServiceUnknown };
const char* HealthStatusName(HealthStatus status);

class Client {
 public:
  using InferCallback = std::function<void(Result<InferResult>)>;

  static Result<std::unique_ptr<Client>> Create(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Dials every channel and waits until all are connected, or timeout.
  Status WaitForConnected(std::chrono::milliseconds timeout);

  Result<bool> ServerLive(const CallOptions& call = {});
  Result<bool> ServerReady(const CallOptions& call = {});
  Result<bool> ModelReady(const std::string& model, const std::string& version = "",
                          const CallOptions& call = {});
  Result<inference::ServerMetadataResponse> ServerMetadata(const CallOptions& call = {});
  Result<inference::ModelMetadataResponse> ModelMetadata(const std::string& model,
                                                         const std::string& version = "",
                                                         const CallOptions& call = {});
  Result<inference::ModelConfigResponse> ModelConfig(const std::string& model,
                                                     const std::string& version = "",
                                                     const CallOptions& call = {});
  // Empty model: every model.
  Result<inference::ModelStatisticsResponse> ModelStatistics(const std::string& model = "",
                                                             const std::string& version = "",
                                                             const CallOptions& call = {});
  // Empty service: the server as a whole.
  Result<HealthStatus> HealthCheck(const std::string& service = "", const CallOptions& call = {});

  Result<InferResult> Infer(const InferRequest& request, const CallOptions& call = {});
  // done runs exactly once, on a gRPC thread (on the caller's for a null request). The
  // request is shared, not copied, so one request may feed many concurrent calls.
  void AsyncInfer(std::shared_ptr<const InferRequest> request, InferCallback done,
                  const CallOptions& call = {});
  std::future<Result<InferResult>> InferFuture(InferRequest request, const CallOptions& call = {});

  int num_channels() const;
  std::size_t in_flight() const;
  // Waits until no async call is in flight (their callbacks have returned); false on timeout.
  bool WaitForIdle(std::chrono::milliseconds timeout);

 private:
  struct Lane;   // one channel and its stubs
  struct Lanes;  // all of them, and the round-robin cursor
  Client(ClientOptions options, std::unique_ptr<Lanes> lanes);
  Lane& Next();
  void Prepare(const CallOptions& call, grpc::ClientContext& context) const;
  // One blocking call of `method` on the next lane's stub; defined and used in client.cc.
  template <typename Response, typename Request, typename Stub, typename GrpcStatus>
  Result<Response> Unary(std::unique_ptr<Stub> Lane::*stub,
                         GrpcStatus (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                         const Request& request, const CallOptions& call);
  void CallStarted();
  void CallFinished();

  ClientOptions options_;
  std::unique_ptr<Lanes> lanes_;
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  std::size_t in_flight_ = 0;
};

}  // namespace ltserve::client
