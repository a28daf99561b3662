// The HTTP port (default 8002): Prometheus' /metrics, KServe v2's HTTP health checks, and the rest
// of KServe v2 over HTTP/REST through the `api` handler (server/http/kserve_http.h).
//
//   GET /metrics                                     200, text format 0.0.4
//   GET /v2/health/live                              200 live, 503 not
//   GET /v2/health/ready                             200 ready, 503 not
//   GET /v2/models/{name}[/versions/{v}]/ready       200 ready, 503 loaded but not ready, 404 unknown
//   anything else under /v2                          the `api` handler, else 404
//
// Served by cpp-httplib, whose workers are ordinary std::threads: prometheus-cpp's civetweb
// Exposer gives its threads a fixed ~100 KiB stack, which the static TLS of cuBLASLt alone nearly
// fills, so it cannot start in a process that links the CUDA libraries. Errors the server
// answers itself (an unknown path, a body that cannot be read or is too large) carry a JSON body
// {"error": "..."} as Triton's do.
//
// Thread-safety: handlers are called from several worker threads at once and must be
// thread-safe. Start and the destructor are called from one thread.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace ltserve {

// A request for the `api` handler: path already percent-decoded, body already decompressed
// (Content-Encoding gzip, deflate or br) and within the server's limit.
struct HttpRequest {
  std::string method;
  std::string path;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // The first value of header `name` (case-insensitive), or nullopt.
  std::optional<std::string_view> Header(std::string_view name) const;
  // Every value of header `name`, in the order received.
  std::vector<std::string_view> HeaderValues(std::string_view name) const;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  // Sent as is: the server never compresses it again (the handler chooses Content-Encoding).
  std::string body;
};

struct HttpHandlers {
  std::function<bool()> live;
  std::function<bool()> ready;
  // `version` empty: the served version. nullopt: no such model or version (404).
  std::function<std::optional<bool>(const std::string& model, const std::string& version)>
      model_ready;
  std::function<std::string()> metrics;
  // Optional: answers every other request under /v2; without it they are 404.
  std::function<HttpReply(const HttpRequest&)> api;
};

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 8002;  // 0 picks a free one
  // TLS when both are set (PEM files); mutual TLS when client_ca is set too: a client without a
  // certificate that client_ca signed fails its handshake.
  std::string server_cert;
  std::string server_key;
  std::string client_ca;
  // Largest request body, after decompression; a larger one is answered 413.
  std::size_t max_body_bytes = 64 << 20;
};

class HttpServer {
 public:
  // Binds host:port and serves until destroyed. Fails with INVALID_ARGUMENT on a missing
  // handler, a port outside [0, 65535], half a TLS configuration or certificate files OpenSSL
  // cannot use; UNAVAILABLE when the address cannot be bound (in use, or no such interface).
  static Result<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                   HttpHandlers handlers);
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& host, int port,
                                                   HttpHandlers handlers);
  ~HttpServer();  // stops accepting, finishes requests in progress, joins every thread
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

  // With TLS: reads the certificate, key and client CA files again; new handshakes get them,
  // open connections keep theirs. On an error (INVALID_ARGUMENT naming the file) the previous
  // ones stay in force. FAILED_PRECONDITION without TLS. Thread-safe.
  Status ReloadCertificates();
  // The files ReloadCertificates reads (none without TLS), for a watcher.
  std::vector<std::filesystem::path> CertificateFiles() const;

 private:
  struct State;
  HttpServer(std::unique_ptr<State> state, int port);

  std::unique_ptr<State> state_;
  int port_;
};

}  // namespace ltserve
