// The HTTP side port (default 8002): Prometheus' /metrics and KServe v2's HTTP health checks.
//
//   GET /metrics                    200, text format 0.0.4
//   GET /v2/health/live             200 live, 503 not
//   GET /v2/health/ready            200 ready, 503 not
//   GET /v2/models/{name}/ready     200 ready, 503 loaded but not ready, 404 unknown model
//
// Served by cpp-httplib, whose workers are ordinary std::threads: prometheus-cpp's civetweb
// Exposer gives its threads a fixed ~100 KiB stack, which the static TLS of cuBLASLt alone nearly
// fills, so it cannot start in a process that links the CUDA libraries.
//
// Thread-safety: handlers are called from several worker threads at once and must be
// thread-safe. Start and the destructor are called from one thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"

namespace ltserve {

struct HttpHandlers {
  std::function<bool()> live;
  std::function<bool()> ready;
  // nullopt: no such model (404).
  std::function<std::optional<bool>(const std::string& model)> model_ready;
  std::function<std::string()> metrics;
};

class HttpServer {
 public:
  // Binds host:port (port 0 picks a free one) and serves until destroyed. Fails with
  // INVALID_ARGUMENT on a missing handler or a port outside [0, 65535], UNAVAILABLE when the
  // address cannot be bound (in use, or no such interface).
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& host, int port,
                                                   HttpHandlers handlers);
  ~HttpServer();  // stops accepting, finishes requests in progress, joins every thread
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

 private:
  struct State;
  HttpServer(std::unique_ptr<State> state, int port);

  std::unique_ptr<State> state_;
  int port_;
};

}  // namespace ltserve
