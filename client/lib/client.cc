#include "client.h"

#include <grpcpp/grpcpp.h>

#include <atomic>

#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "status_convert.h"

namespace ltserve::client {

Status FromGrpcStatus(const grpc::Status& status) {
  const int code = static_cast<int>(status.error_code());
  switch (status.error_code()) {
    case grpc::StatusCode::OK: return Status::Ok();
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNAVAILABLE:
      return Status(static_cast<StatusCode>(code), status.error_message());
    case grpc::StatusCode::ABORTED:
      return Unavailable("ABORTED: " + status.error_message());
    case grpc::StatusCode::PERMISSION_DENIED:
      return FailedPrecondition("PERMISSION_DENIED: " + status.error_message());
    case grpc::StatusCode::UNAUTHENTICATED:
      return FailedPrecondition("UNAUTHENTICATED: " + status.error_message());
    case grpc::StatusCode::OUT_OF_RANGE:
      return InvalidArgument("OUT_OF_RANGE: " + status.error_message());
    default:
      return Internal("gRPC code " + std::to_string(code) + ": " + status.error_message());
  }
}

const char* HealthStatusName(HealthStatus status) {
  switch (status) {
    case HealthStatus::kServing: return "SERVING";
    case HealthStatus::kNotServing: return "NOT_SERVING";
    case HealthStatus::kServiceUnknown: return "SERVICE_UNKNOWN";
    case HealthStatus::kUnknown: break;
  }
  return "UNKNOWN";
}

struct Client::Lane {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<inference::GRPCInferenceService::Stub> inference;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;
};

struct Client::Lanes {
  std::vector<Lane> lanes;
  std::atomic<std::size_t> cursor{0};
};

namespace {

// Owns everything an async call needs until its reaction runs.
struct AsyncCall {
  grpc::ClientContext context;
  std::shared_ptr<const InferRequest> request;
  inference::ModelInferResponse response;
  Client::InferCallback done;
};

}  // namespace

Result<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if (options.default_timeout.count() < 0) return InvalidArgument("default_timeout is negative");
  LTSERVE_ASSIGN_OR_RETURN(auto channels, MakeChannels(options.channel));
  auto lanes = std::make_unique<Lanes>();
  for (auto& channel : channels) {
    Lane lane;
    lane.inference = inference::GRPCInferenceService::NewStub(channel);
    lane.health = grpc::health::v1::Health::NewStub(channel);
    lane.channel = std::move(channel);
    lanes->lanes.push_back(std::move(lane));
  }
  return std::unique_ptr<Client>(new Client(std::move(options), std::move(lanes)));
}

Client::Client(ClientOptions options, std::unique_ptr<Lanes> lanes)
    : options_(std::move(options)), lanes_(std::move(lanes)) {}

Client::~Client() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return in_flight_ == 0; });
}

Client::Lane& Client::Next() {
  const std::size_t index = lanes_->cursor.fetch_add(1, std::memory_order_relaxed);
  return lanes_->lanes[index % lanes_->lanes.size()];
}

int Client::num_channels() const { return static_cast<int>(lanes_->lanes.size()); }

std::size_t Client::in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

void Client::Prepare(const CallOptions& call, grpc::ClientContext& context) const {
  const auto timeout = call.timeout.count() > 0 ? call.timeout : options_.default_timeout;
  if (timeout.count() > 0) context.set_deadline(std::chrono::system_clock::now() + timeout);
  context.set_wait_for_ready(call.wait_for_ready);
  for (const auto& [key, value] : call.headers) context.AddMetadata(key, value);
}

bool Client::WaitForIdle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return idle_.wait_for(lock, timeout, [this] { return in_flight_ == 0; });
}

void Client::CallStarted() {
  std::lock_guard lock(mutex_);
  ++in_flight_;
}

void Client::CallFinished() {
  std::lock_guard lock(mutex_);
  if (--in_flight_ == 0) idle_.notify_all();
}

Status Client::WaitForConnected(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::system_clock::now() + timeout;
  for (std::size_t i = 0; i < lanes_->lanes.size(); ++i) {
    if (!lanes_->lanes[i].channel->WaitForConnected(deadline)) {
      return Unavailable("channel " + std::to_string(i) + " to '" + options_.channel.target +
                         "' did not connect within " + std::to_string(timeout.count()) + " ms");
    }
  }
  return Status::Ok();
}

template <typename Response, typename Request, typename Stub, typename GrpcStatus>
Result<Response> Client::Unary(std::unique_ptr<Stub> Lane::*stub,
                               GrpcStatus (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                               const Request& request, const CallOptions& call) {
  grpc::ClientContext context;
  Prepare(call, context);
  Response response;
  LTSERVE_RETURN_IF_ERROR(FromGrpcStatus(((*(Next().*stub)).*method)(&context, request, &response)));
  return response;
}

namespace {

using Inference = inference::GRPCInferenceService::Stub;

// The {name, version} request shared by the model-level RPCs.
template <typename Request>
Request Named(const std::string& model, const std::string& version) {
  Request request;
  request.set_name(model);
  request.set_version(version);
  return request;
}

}  // namespace

Result<bool> Client::ServerLive(const CallOptions& call) {
  LTSERVE_ASSIGN_OR_RETURN(const auto response, Unary(&Lane::inference, &Inference::ServerLive,
                                                      inference::ServerLiveRequest(), call));
  return response.live();
}

Result<bool> Client::ServerReady(const CallOptions& call) {
  LTSERVE_ASSIGN_OR_RETURN(const auto response, Unary(&Lane::inference, &Inference::ServerReady,
                                                      inference::ServerReadyRequest(), call));
  return response.ready();
}

Result<bool> Client::ModelReady(const std::string& model, const std::string& version,
                                const CallOptions& call) {
  LTSERVE_ASSIGN_OR_RETURN(
      const auto response,
      Unary(&Lane::inference, &Inference::ModelReady, Named<inference::ModelReadyRequest>(model, version), call));
  return response.ready();
}

Result<inference::ServerMetadataResponse> Client::ServerMetadata(const CallOptions& call) {
  return Unary(&Lane::inference, &Inference::ServerMetadata, inference::ServerMetadataRequest(), call);
}

Result<inference::ModelMetadataResponse> Client::ModelMetadata(const std::string& model,
                                                               const std::string& version,
                                                               const CallOptions& call) {
  return Unary(&Lane::inference, &Inference::ModelMetadata,
               Named<inference::ModelMetadataRequest>(model, version), call);
}

Result<inference::ModelConfigResponse> Client::ModelConfig(const std::string& model,
                                                           const std::string& version,
                                                           const CallOptions& call) {
  return Unary(&Lane::inference, &Inference::ModelConfig,
               Named<inference::ModelConfigRequest>(model, version), call);
}

Result<inference::ModelStatisticsResponse> Client::ModelStatistics(const std::string& model,
                                                                   const std::string& version,
                                                                   const CallOptions& call) {
  return Unary(&Lane::inference, &Inference::ModelStatistics,
               Named<inference::ModelStatisticsRequest>(model, version), call);
}

Result<HealthStatus> Client::HealthCheck(const std::string& service, const CallOptions& call) {
  using Health = grpc::health::v1::HealthCheckResponse;
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  LTSERVE_ASSIGN_OR_RETURN(const auto response,
                           Unary(&Lane::health, &grpc::health::v1::Health::Stub::Check, request, call));
  switch (response.status()) {
    case Health::SERVING: return HealthStatus::kServing;
    case Health::NOT_SERVING: return HealthStatus::kNotServing;
    case Health::SERVICE_UNKNOWN: return HealthStatus::kServiceUnknown;
    default: return HealthStatus::kUnknown;
  }
}

Result<InferResult> Client::Infer(const InferRequest& request, const CallOptions& call) {
  LTSERVE_ASSIGN_OR_RETURN(auto response,
                           Unary(&Lane::inference, &Inference::ModelInfer, request.proto(), call));
  return InferResult::FromResponse(std::move(response));
}

void Client::AsyncInfer(std::shared_ptr<const InferRequest> request, InferCallback done,
                        const CallOptions& call) {
  if (!done) return;  // nobody would hear the outcome
  if (!request) {
    done(InvalidArgument("AsyncInfer needs a request"));
    return;
  }
  auto owned = std::make_unique<AsyncCall>();
  Prepare(call, owned->context);
  owned->request = std::move(request);
  owned->done = std::move(done);
  CallStarted();
  AsyncCall* raw = owned.release();
  Next().inference->async()->ModelInfer(
      &raw->context, &raw->request->proto(), &raw->response, [this, raw](grpc::Status status) {
        std::unique_ptr<AsyncCall> finished(raw);
        Result<InferResult> result =
            status.ok() ? InferResult::FromResponse(std::move(finished->response))
                        : Result<InferResult>(FromGrpcStatus(status));
        finished->done(std::move(result));
        finished.reset();
        CallFinished();
      });
}

std::future<Result<InferResult>> Client::InferFuture(InferRequest request, const CallOptions& call) {
  auto promise = std::make_shared<std::promise<Result<InferResult>>>();
  auto future = promise->get_future();
  AsyncInfer(std::make_shared<const InferRequest>(std::move(request)),
             [promise](Result<InferResult> result) { promise->set_value(std::move(result)); }, call);
  return future;
}

}  // namespace ltserve::client
