// KServe v2 over HTTP/REST, as Triton's HTTP endpoint answers it: the HttpServer's `api`
// handler. Every endpoint answers through InferenceService's protocol-independent methods, and
// inference through the same PendingInference path as gRPC's ModelInfer, so both protocols
// batch together and share statistics, metrics and errors.
//
//   GET  /v2                                          server metadata
//   GET  /v2/models/{name}[/versions/{v}]             model metadata
//   GET  /v2/models/{name}[/versions/{v}]/config      model configuration
//   GET  /v2/models[/{name}[/versions/{v}]]/stats     statistics
//   POST /v2/models/{name}[/versions/{v}]/infer       inference (JSON and binary tensors)
//   POST /v2/repository/index                         repository index
//   GET  /v2/logging, POST /v2/logging                log settings
//   GET  /v2/{system,cuda}sharedmemory[/region/{name}]/status       shared-memory regions
//   POST /v2/{system,cuda}sharedmemory/region/{name}/register
//   POST /v2/{system,cuda}sharedmemory[/region/{name}]/unregister
//
// Errors are {"error": "..."} with Triton's status codes (400 invalid, 404 unknown, 503
// unavailable, ...). Health and model readiness are the HttpServer's own routes and so stay
// open when a bearer token is required here.
//
// Thread-safety: Handle is called from many HTTP worker threads at once; it blocks its thread
// until an inference completes.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grpc/inference_service.h"
#include "http/http_server.h"
#include "http/kserve_json.h"

namespace ltserve {

struct KServeHttpOptions {
  // Null: every request is open. Otherwise every request must carry "Authorization: Bearer
  // <token>" with one of its tokens, else 401. Shared: the server reloads its token file while
  // requests are checked.
  std::shared_ptr<const CallAuthorizer> authorizer;
};

class KServeHttp {
 public:
  // `service` must outlive this object.
  KServeHttp(InferenceService* service, KServeHttpOptions options)
      : service_(service), options_(std::move(options)) {}

  HttpReply Handle(const HttpRequest& request) const;

 private:
  HttpReply SharedMemory(const HttpRequest& request, const std::vector<std::string>& path) const;
  // POST /v2/repository/models/{name}/load and /unload: answered when the repository's control
  // thread is done, as RepositoryModelLoad/Unload are.
  HttpReply LoadModel(std::string_view body, const std::string& model) const;
  HttpReply UnloadModel(std::string_view body, const std::string& model) const;
  HttpReply Infer(const HttpRequest& request, const std::string& model,
                  const std::string& version) const;
  // The JSON header and binary data, or (header length 0) Triton's raw binary request.
  Result<HttpInferRequest> ReadInferRequest(const HttpRequest& request,
                                            std::optional<std::size_t> header_length,
                                            const std::string& model,
                                            const std::string& version) const;

  InferenceService* const service_;
  const KServeHttpOptions options_;
};

// The HTTP status Triton answers for an error of `code`.
int HttpStatusOf(StatusCode code);

}  // namespace ltserve
