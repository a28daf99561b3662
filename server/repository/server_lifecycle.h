// The server's lifecycle as the endpoints see it, owned by the app: the repository once its
// models have loaded, and whether shutdown has begun. The readiness rules live here, once, for
// gRPC (ServerReady, ModelReady, grpc.health.v1) and HTTP (/v2/health/ready,
// /v2/models/{name}/ready) alike.
//
// Thread-safety: every member may be read from any thread; the app stores `repository` once
// loaded and sets `shutting_down` once.
#pragma once

#include <atomic>
#include <string>

#include "common/status.h"
#include "repository/model_repository.h"

namespace ltserve {

struct ServerLifecycle {
  // Null until the models have loaded: the endpoints start first, so liveness answers during a
  // long load, and inference answers UNAVAILABLE until then.
  std::atomic<ModelRepository*> repository{nullptr};
  std::atomic<bool> shutting_down{false};  // refuse new inference with UNAVAILABLE
  bool strict_readiness = true;            // ready = every model loaded (false: at least one)

  // The server is ready: loaded, not shutting down, and every model (strict) or at least one
  // serving.
  bool Ready() const {
    const ModelRepository* repo = repository.load();
    if (repo == nullptr || shutting_down.load()) return false;
    return strict_readiness ? repo->AllReady() : repo->AnyReady();
  }

  // Whether model `name` (`version` empty: the served one) serves: false while loading, when it
  // failed to load, or once shutdown began; NOT_FOUND naming the known models for a model or
  // version the repository does not have.
  Result<bool> ModelReady(const std::string& name, const std::string& version) const {
    const ModelRepository* repo = repository.load();
    if (repo == nullptr) return false;
    auto model = repo->Find(name, version);
    if (!model.ok() && model.status().code() == StatusCode::kNotFound) return model.status();
    return model.ok() && !shutting_down.load();
  }
};

}  // namespace ltserve
