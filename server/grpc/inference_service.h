// inference.GRPCInferenceService (KServe v2 + Triton's ModelConfig, ModelStatistics,
// RepositoryIndex and LogSettings) on gRPC's callback API: no thread per request. ModelInfer
// decodes and validates on the gRPC thread, hands the request to the model's scheduler (which
// never blocks), and the scheduler's completion callback writes the response and finishes the
// call from a scheduler thread.
//
// Thread-safety: all methods are called concurrently by gRPC; shared state is the immutable
// repository, the atomic lifecycle flags in ServerLifecycle, and spdlog's process-wide level,
// which LogSettings reads and changes under one mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "grpc/call_auth.h"
#include "grpc_service.grpc.pb.h"
#include "repository/model_repository.h"
#include "repository/server_lifecycle.h"

namespace ltserve {

struct InferenceServiceOptions {
  // An inference whose outputs add up to more than this is answered RESOURCE_EXHAUSTED instead
  // of being copied into a response gRPC would refuse to send.
  std::size_t max_response_bytes = SIZE_MAX;
  // Null: every call is open. Otherwise each method's protocol is checked by it and a refused
  // call is answered UNAUTHENTICATED. grpc.health.v1 is a separate service and stays open to
  // probes. Shared: the server's signal handling reloads it while calls are checked.
  std::shared_ptr<const CallAuthorizer> authorizer;
};

// Every method takes its raw message and parses it itself: gRPC answers a message it cannot
// parse with UNIMPLEMENTED and no message, where a client needs INVALID_ARGUMENT and the reason.
using RawInferenceService = inference::GRPCInferenceService::WithRawCallbackMethod_RepositoryIndex<
    inference::GRPCInferenceService::WithRawCallbackMethod_LogSettings<
    inference::GRPCInferenceService::WithRawCallbackMethod_ServerLive<
    inference::GRPCInferenceService::WithRawCallbackMethod_ServerReady<
        inference::GRPCInferenceService::WithRawCallbackMethod_ModelReady<
            inference::GRPCInferenceService::WithRawCallbackMethod_ServerMetadata<
                inference::GRPCInferenceService::WithRawCallbackMethod_ModelMetadata<
                    inference::GRPCInferenceService::WithRawCallbackMethod_ModelConfig<
                        inference::GRPCInferenceService::WithRawCallbackMethod_ModelStatistics<
                            inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
                                inference::GRPCInferenceService::Service>>>>>>>>>>;

class InferenceService final : public RawInferenceService {
 public:
  InferenceService(ServerLifecycle* lifecycle, std::string version,
                   InferenceServiceOptions options = {})
      : lifecycle_(lifecycle), version_(std::move(version)), options_(std::move(options)) {}

  // Each `request` is the serialized request message of its method; `response` receives the
  // serialized response.
  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* LogSettings(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;

  // When the last call reached the service (the epoch when none has): shutdown waits for
  // clients to stop sending before it closes their connections.
  std::chrono::steady_clock::time_point LastCallArrival() const {
    return std::chrono::steady_clock::time_point(
        std::chrono::steady_clock::duration(last_call_arrival_.load()));
  }

 private:
  // OK, or UNAUTHENTICATED saying what the protocol's calls must carry.
  Status Authorize(Protocol protocol, const grpc::CallbackServerContext& context) const;

  // The methods answered at once: parse, serve, serialize.
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request, grpc::ByteBuffer* response,
                                  Protocol protocol,
                                  Status (InferenceService::*serve)(const Request&, Response*));
  Status ServeServerLive(const inference::ServerLiveRequest& request,
                         inference::ServerLiveResponse* response);
  Status ServeServerReady(const inference::ServerReadyRequest& request,
                          inference::ServerReadyResponse* response);
  Status ServeModelReady(const inference::ModelReadyRequest& request,
                         inference::ModelReadyResponse* response);
  Status ServeServerMetadata(const inference::ServerMetadataRequest& request,
                             inference::ServerMetadataResponse* response);
  Status ServeModelMetadata(const inference::ModelMetadataRequest& request,
                            inference::ModelMetadataResponse* response);
  Status ServeModelConfig(const inference::ModelConfigRequest& request,
                          inference::ModelConfigResponse* response);
  Status ServeModelStatistics(const inference::ModelStatisticsRequest& request,
                              inference::ModelStatisticsResponse* response);
  Status ServeRepositoryIndex(const inference::RepositoryIndexRequest& request,
                              inference::RepositoryIndexResponse* response);
  Status ServeLogSettings(const inference::LogSettingsRequest& request,
                          inference::LogSettingsResponse* response);
  // The loaded repository, or UNAVAILABLE while models are still loading.
  Result<ModelRepository*> Repository() const;

  ServerLifecycle* const lifecycle_;
  const std::string version_;
  const InferenceServiceOptions options_;
  std::atomic<std::chrono::steady_clock::rep> last_call_arrival_{0};
};

// Maps ltserve's status to gRPC's (same numbering).
grpc::Status ToGrpcStatus(const Status& status);

}  // namespace ltserve
