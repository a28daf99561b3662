// inference.GRPCInferenceService (KServe v2 + Triton's ModelConfig, ModelStatistics, model
// repository control, streaming and LogSettings) on gRPC's callback API: no thread per request.
// ModelInfer decodes and validates on the gRPC thread, hands the request to the model's
// scheduler (which never blocks), and the scheduler's completion callback writes the response
// and finishes the call from a scheduler thread. ModelStreamInfer does the same per message of
// its stream (stream_reactor.h); RepositoryModelLoad/Unload run on the repository's control
// thread, so a long load holds no gRPC thread.
//
// The Serve* methods, PrepareInfer and the repository control methods know nothing of gRPC:
// they take and give the protocol's messages and a Status. The HTTP/REST endpoints
// (server/http/kserve_http.h) and the stream's reactor answer through them too, so that every
// protocol shares one request path.
//
// Thread-safety: all methods are called concurrently by gRPC; shared state is the repository
// (thread-safe), the atomic lifecycle flags in ServerLifecycle, spdlog's process-wide level,
// which LogSettings reads and changes under one mutex, and the thread-safe shared-memory
// registry.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "grpc/call_auth.h"
#include "grpc/pending_inference.h"
#include "grpc_service.grpc.pb.h"
#include "repository/model_repository.h"
#include "repository/server_lifecycle.h"
#include "shm/shared_memory_registry.h"

namespace ltserve {

struct InferenceServiceOptions {
  // An inference whose outputs add up to more than this is answered RESOURCE_EXHAUSTED instead
  // of being copied into a response gRPC would refuse to send.
  std::size_t max_response_bytes = SIZE_MAX;
  // Null: every call is open. Otherwise each method's protocol is checked by it and a refused
  // call is answered UNAUTHENTICATED. grpc.health.v1 is a separate service and stays open to
  // probes. Shared: the server's signal handling reloads it while calls are checked.
  std::shared_ptr<const CallAuthorizer> authorizer;
  // Samples requests for --trace-config; null traces nothing. Outlives the service.
  Tracer* tracer = nullptr;
};

// Every method takes its raw message and parses it itself: gRPC answers a message it cannot
// parse with UNIMPLEMENTED and no message, where a client needs INVALID_ARGUMENT and the reason.
using RawInferenceService =
    inference::GRPCInferenceService::WithRawCallbackMethod_ModelStreamInfer<
    inference::GRPCInferenceService::WithRawCallbackMethod_RepositoryModelLoad<
    inference::GRPCInferenceService::WithRawCallbackMethod_RepositoryModelUnload<
    inference::GRPCInferenceService::WithRawCallbackMethod_SystemSharedMemoryStatus<
    inference::GRPCInferenceService::WithRawCallbackMethod_SystemSharedMemoryRegister<
    inference::GRPCInferenceService::WithRawCallbackMethod_SystemSharedMemoryUnregister<
    inference::GRPCInferenceService::WithRawCallbackMethod_CudaSharedMemoryStatus<
    inference::GRPCInferenceService::WithRawCallbackMethod_CudaSharedMemoryRegister<
    inference::GRPCInferenceService::WithRawCallbackMethod_CudaSharedMemoryUnregister<
    inference::GRPCInferenceService::WithRawCallbackMethod_RepositoryIndex<
    inference::GRPCInferenceService::WithRawCallbackMethod_LogSettings<
    inference::GRPCInferenceService::WithRawCallbackMethod_ServerLive<
    inference::GRPCInferenceService::WithRawCallbackMethod_ServerReady<
        inference::GRPCInferenceService::WithRawCallbackMethod_ModelReady<
            inference::GRPCInferenceService::WithRawCallbackMethod_ServerMetadata<
                inference::GRPCInferenceService::WithRawCallbackMethod_ModelMetadata<
                    inference::GRPCInferenceService::WithRawCallbackMethod_ModelConfig<
                        inference::GRPCInferenceService::WithRawCallbackMethod_ModelStatistics<
                            inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
                                inference::GRPCInferenceService::Service>>>>>>>>>>>>>>>>>>>;

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
  // Answered from the repository's control thread once the load or unload is done.
  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* context,
                                                const grpc::ByteBuffer* request,
                                                grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RepositoryModelUnload(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ModelStreamInfer(
      grpc::CallbackServerContext* context) override;
  // The shared-memory extensions; their Serve* methods are in shared_memory_service.cc.
  grpc::ServerUnaryReactor* SystemSharedMemoryStatus(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryRegister(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CudaSharedMemoryStatus(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CudaSharedMemoryRegister(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CudaSharedMemoryUnregister(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) override;

  // Protocol-independent answers, shared by gRPC and HTTP: NOT_FOUND for an unknown model or
  // version, UNAVAILABLE while the models are loading.
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
  Status ServeSystemSharedMemoryStatus(const inference::SystemSharedMemoryStatusRequest& request,
                                       inference::SystemSharedMemoryStatusResponse* response);
  Status ServeSystemSharedMemoryRegister(const inference::SystemSharedMemoryRegisterRequest& request,
                                         inference::SystemSharedMemoryRegisterResponse* response);
  Status ServeSystemSharedMemoryUnregister(
      const inference::SystemSharedMemoryUnregisterRequest& request,
      inference::SystemSharedMemoryUnregisterResponse* response);
  Status ServeCudaSharedMemoryStatus(const inference::CudaSharedMemoryStatusRequest& request,
                                     inference::CudaSharedMemoryStatusResponse* response);
  Status ServeCudaSharedMemoryRegister(const inference::CudaSharedMemoryRegisterRequest& request,
                                       inference::CudaSharedMemoryRegisterResponse* response);
  Status ServeCudaSharedMemoryUnregister(const inference::CudaSharedMemoryUnregisterRequest& request,
                                         inference::CudaSharedMemoryUnregisterResponse* response);

  // Repository control, shared by gRPC and HTTP, with Triton's semantics: `done` is called
  // exactly once, at once on this thread for a request refused before it starts (bad
  // parameters, a server still loading), else from the repository's control thread when the
  // load or unload is over, so that a long load holds no protocol thread.
  using ControlDone = std::function<void(const Status& status)>;
  void ServeRepositoryModelLoad(const inference::RepositoryModelLoadRequest& request,
                                ControlDone done);
  void ServeRepositoryModelUnload(const inference::RepositoryModelUnloadRequest& request,
                                  ControlDone done);

  // Looks the model up and decodes and checks the request against it (a refusal is counted in
  // the model's statistics, as one by the scheduler is); the caller then Starts it. A sampled
  // request's trace gets `received` (the front end's own activity) at `arrival`.
  Result<std::shared_ptr<PendingInference>> PrepareInfer(
      std::unique_ptr<inference::ModelInferRequest> message,
      std::chrono::steady_clock::time_point arrival,
      TraceActivity received = TraceActivity::kGrpcWaitReadEnd);

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
  // The loaded repository, or UNAVAILABLE while models are still loading.
  Result<ModelRepository*> Repository() const;
  // RepositoryModelLoad/Unload: authorised, parsed and served; finished when `serve` is done.
  template <typename Request>
  grpc::ServerUnaryReactor* Control(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request, grpc::ByteBuffer* response,
                                    void (InferenceService::*serve)(const Request&, ControlDone));

  ServerLifecycle* const lifecycle_;
  const std::string version_;
  const InferenceServiceOptions options_;
  std::atomic<std::chrono::steady_clock::rep> last_call_arrival_{0};
  // Regions registered through the shared-memory RPCs (and HTTP's endpoints); thread-safe.
  SharedMemoryRegistry shared_memory_;
};

// Maps ltserve's status to gRPC's (same numbering).
grpc::Status ToGrpcStatus(const Status& status);

}  // namespace ltserve
