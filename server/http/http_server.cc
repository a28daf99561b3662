#include "http/http_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include <httplib.h>
#include <openssl/err.h>

#include "http/http_tls.h"

namespace ltserve {

namespace {

// httplib gives each connection a worker for as long as it is open, idle or not. With a fixed
// pool of 8, 200 connections that send nothing kept every probe and scrape waiting for ~25 s;
// a thread per connection, up to this many, keeps them answered. Past it, connections wait
// their turn.
constexpr std::size_t kMaxConnectionThreads = 512;
// How long a connection that sends nothing (or nothing more, after a request) holds its
// thread, and so the longest the destructor waits for one; Prometheus scrapes every 15 s or
// so and gains nothing from reuse.
constexpr time_t kKeepAliveTimeoutS = 1;
// httplib's default of 5 requests per connection made a busy inference client reconnect
// every fifth request.
constexpr std::size_t kKeepAliveMaxRequests = 10000;
// A client that stalls mid-request, or does not read its response, is dropped after this long.
constexpr time_t kReadTimeoutS = 5;
constexpr time_t kWriteTimeoutS = 5;
// httplib listens with a backlog of 5: a burst of connections overflowed it, and the kernel
// dropped the SYNs of the rest, probes included, for a retransmission (1 s, then 3 s, ...).
constexpr int kListenBacklog = 1024;
constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

constexpr char kJsonContentType[] = "application/json";

constexpr int kOk = 200;
constexpr int kBadRequest = 400;
constexpr int kNotFound = 404;
constexpr int kPayloadTooLarge = 413;
constexpr int kUnsupportedMediaType = 415;
constexpr int kInternalError = 500;
constexpr int kServiceUnavailable = 503;

// httplib's default adds SO_REUSEPORT, which lets a second server bind the same port and
// silently take half the scrapes. SO_REUSEADDR alone still allows a restart while old
// connections sit in TIME_WAIT.
void ExclusivePortOptions(socket_t sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

// httplib's task queue: a thread per queued connection while fewer than `max_threads` run.
// A thread that finds the queue empty exits; the next enqueue joins it.
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(std::size_t max_threads) : max_threads_(max_threads) {}
  ~ConnectionThreads() override { shutdown(); }

  void enqueue(std::function<void()> job) override {
    std::unique_lock lock(mutex_);
    JoinFinishedLocked();
    jobs_.push_back(std::move(job));
    if (running_ >= max_threads_) return;
    try {
      threads_.emplace_back([this] { Work(); });
      ++running_;
    } catch (const std::system_error&) {
      // No thread to be had: a running one will take the job; with none running, the accept
      // loop serves it itself rather than leave it queued forever.
      if (running_ > 0) return;
      std::function<void()> inline_job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      inline_job();
    }
  }

  void shutdown() override {
    std::unique_lock lock(mutex_);
    all_done_.wait(lock, [this] { return running_ == 0; });
    JoinFinishedLocked();
  }

 private:
  void Work() {
    std::unique_lock lock(mutex_);
    while (!jobs_.empty()) {
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
    finished_.push_back(std::this_thread::get_id());
    --running_;
    if (running_ == 0) all_done_.notify_all();
  }

  // Joins threads that have left Work: they no longer take the mutex, so this cannot block on
  // them for more than their return.
  void JoinFinishedLocked() {
    for (std::thread::id id : finished_) {
      auto it = std::find_if(threads_.begin(), threads_.end(),
                             [id](const std::thread& t) { return t.get_id() == id; });
      if (it == threads_.end()) continue;
      it->join();
      threads_.erase(it);
    }
    finished_.clear();
  }

  const std::size_t max_threads_;
  std::mutex mutex_;
  std::condition_variable all_done_;
  std::deque<std::function<void()>> jobs_;
  std::list<std::thread> threads_;
  std::vector<std::thread::id> finished_;
  std::size_t running_ = 0;
};

}  // namespace

struct HttpServer::State {
  HttpHandlers handlers;
  std::size_t max_body_bytes = 0;
  std::unique_ptr<HttpTlsCredentials> tls;  // with TLS; outlives `server`, whose handshakes use it
  std::unique_ptr<httplib::Server> server;  // an httplib::SSLServer with TLS
  // Set once: OK when the accept loop runs, or the error that ended it before.
  std::promise<Status> started;
  std::atomic<bool> start_reported{false};
  std::thread thread;
  socket_t listen_socket = INVALID_SOCKET;  // the last socket httplib made to bind

  void ReportStart(Status status) {
    if (!start_reported.exchange(true)) started.set_value(std::move(status));
  }
};

namespace {

int StatusFor(bool up) { return up ? kOk : kServiceUnavailable; }

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// The body goes out through a fixed-length content provider: httplib compresses only bodies it
// holds itself, so a reply whose handler chose its own Content-Encoding (or none, as Triton's
// infer responses without Accept-Encoding) is never compressed a second time.
void Send(HttpReply reply, httplib::Response& res) {
  res.status = reply.status;
  for (auto& [name, value] : reply.headers) res.set_header(name, value);
  if (reply.body.empty()) {
    res.set_header("Content-Type", reply.content_type);
    return;
  }
  auto body = std::make_shared<std::string>(std::move(reply.body));
  res.set_content_provider(body->size(), reply.content_type,
                           [body](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
                             return sink.write(body->data() + offset, length);
                           });
}

HttpReply ErrorReply(int status, const std::string& message) {
  HttpReply reply;
  reply.status = status;
  // The one JSON text this target writes; the message is escaped by hand to keep JSON out of
  // the health and metrics server.
  std::string escaped;
  for (unsigned char c : message) {
    if (c == '"' || c == '\\') {
      escaped += '\\';
      escaped += static_cast<char>(c);
    } else if (c < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      escaped += "\\u00";
      escaped += kHex[c >> 4];
      escaped += kHex[c & 0xf];
    } else {
      escaped += static_cast<char>(c);
    }
  }
  reply.body = "{\"error\":\"" + escaped + "\"}";
  return reply;
}

HttpRequest ToRequest(const httplib::Request& req) {
  HttpRequest request;
  request.method = req.method;
  request.path = req.path;
  for (const auto& [name, value] : req.headers) {
    // httplib adds the peer's and its own address as headers; they are no part of the request.
    if (name == "REMOTE_ADDR" || name == "REMOTE_PORT" || name == "LOCAL_ADDR" ||
        name == "LOCAL_PORT") {
      continue;
    }
    request.headers.emplace_back(name, value);
  }
  return request;
}

bool KnownContentEncoding(const std::string& encoding) {
  return encoding.empty() || encoding == "identity" || encoding == "gzip" ||
         encoding == "deflate" || encoding == "br";
}

void AddRoutes(httplib::Server& server, const HttpHandlers& h,
               std::size_t max_body_bytes) {
  server.Get("/metrics", [&h](const httplib::Request&, httplib::Response& res) {
    res.set_content(h.metrics(), kMetricsContentType);
  });
  // Health answers carry a Content-Type, which tells the error handler that they are answers.
  server.Get("/v2/health/live", [&h](const httplib::Request&, httplib::Response& res) {
    res.status = StatusFor(h.live());
    res.set_header("Content-Type", "text/plain");
  });
  server.Get("/v2/health/ready", [&h](const httplib::Request&, httplib::Response& res) {
    res.status = StatusFor(h.ready());
    res.set_header("Content-Type", "text/plain");
  });
  server.Get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/ready)",
             [&h](const httplib::Request& req, httplib::Response& res) {
               const std::optional<bool> ready =
                   h.model_ready(req.matches[1].str(), req.matches[2].str());
               res.status = ready.has_value() ? StatusFor(*ready) : kNotFound;
               res.set_header("Content-Type", "text/plain");
             });
  if (h.api) {
    server.Get(R"(/v2(/.*)?)", [&h](const httplib::Request& req, httplib::Response& res) {
      Send(h.api(ToRequest(req)), res);
    });
    server.Post(R"(/v2(/.*)?)", [&h, max_body_bytes](const httplib::Request& req,
                                                    httplib::Response& res,
                                                    const httplib::ContentReader& read_body) {
      const std::string encoding = req.get_header_value("Content-Encoding");
      if (!KnownContentEncoding(encoding)) {
        HttpReply reply = ErrorReply(kUnsupportedMediaType,
                                     "unsupported Content-Encoding '" + encoding +
                                         "'; expected gzip, deflate or identity");
        reply.headers.emplace_back("Accept-Encoding", "gzip, deflate");
        reply.headers.emplace_back("Connection", "close");
        Send(std::move(reply), res);
        return;
      }
      HttpRequest request = ToRequest(req);
      // Without a length or chunks there is no body (httplib would wait for the connection to
      // close).
      const bool has_body = req.has_header("Content-Length") ||
                            req.get_header_value("Transfer-Encoding") == "chunked";
      if (!has_body) {
        Send(h.api(request), res);
        return;
      }
      // Counted after decompression, and for chunked bodies too, which httplib does not bound.
      bool too_large = false;
      const bool read = read_body([&](const char* data, std::size_t length) {
        if (request.body.size() + length > max_body_bytes) {
          too_large = true;
          return false;
        }
        request.body.append(data, length);
        return true;
      });
      if (!read) {
        // What is left of the body cannot be told from the next request: close.
        HttpReply reply =
            too_large || res.status == kPayloadTooLarge
                ? ErrorReply(kPayloadTooLarge,
                             "the request body is larger than the server's limit of " +
                                 std::to_string(max_body_bytes) +
                                 " bytes (--http-max-input-size), decompressed")
                : ErrorReply(kBadRequest,
                             "the request body could not be read: it ended early, or is not "
                             "what its Content-Encoding '" + encoding + "' says");
        reply.headers.emplace_back("Connection", "close");
        Send(std::move(reply), res);
        return;
      }
      Send(h.api(request), res);
    });
  }
  // Answers httplib gives itself (no route, a request line or body it cannot read) get
  // Triton's JSON error body; answers a handler made keep theirs.
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.content_provider_ || res.has_header("Content-Type")) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    std::string message;
    switch (res.status) {
      case kNotFound: message = "Not Found: no endpoint " + req.method + " " + req.path; break;
      case kPayloadTooLarge: message = "the request is larger than the server accepts"; break;
      default: message = "the request could not be read (HTTP status " + std::to_string(res.status) + ")";
    }
    Send(ErrorReply(res.status, message), res);
    return httplib::Server::HandlerResponse::Handled;
  }));
  // Handlers are not meant to throw; if one does, the client gets a 500 and the server lives on.
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        Send(ErrorReply(kInternalError, "internal error"), res);
      });
}

// Plaintext, or TLS whose credentials come from `tls` at every handshake (so that they can be
// reloaded), not from files httplib reads once.
Result<std::unique_ptr<httplib::Server>> MakeServer(const HttpServerOptions& options,
                                                    std::unique_ptr<HttpTlsCredentials>* tls) {
  const bool use_tls = !options.server_cert.empty() || !options.server_key.empty();
  if (!use_tls) {
    if (!options.client_ca.empty()) {
      return InvalidArgument("HTTP mutual TLS needs the server's certificate and key as well");
    }
    return std::make_unique<httplib::Server>();
  }
  if (options.server_cert.empty() || options.server_key.empty()) {
    return InvalidArgument("HTTP TLS needs both the server's certificate and its key");
  }
  LTSERVE_ASSIGN_OR_RETURN(*tls, HttpTlsCredentials::Create(options.server_cert,
                                                            options.server_key, options.client_ca));
  HttpTlsCredentials* credentials = tls->get();
  auto server = std::make_unique<httplib::SSLServer>(
      [credentials](SSL_CTX& ctx) { return credentials->ConfigureContext(ctx); });
  if (!server->is_valid()) {
    const char* reason = ERR_reason_error_string(ERR_get_error());
    return Internal(std::string("HTTP TLS: OpenSSL could not set up a server context: ") +
                    (reason != nullptr ? reason : "no reason given"));
  }
  return std::unique_ptr<httplib::Server>(std::move(server));
}

}  // namespace

std::optional<std::string_view> HttpRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (EqualsIgnoringCase(key, name)) return std::string_view(value);
  }
  return std::nullopt;
}

std::vector<std::string_view> HttpRequest::HeaderValues(std::string_view name) const {
  std::vector<std::string_view> values;
  for (const auto& [key, value] : headers) {
    if (EqualsIgnoringCase(key, name)) values.emplace_back(value);
  }
  return values;
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& host, int port,
                                                      HttpHandlers handlers) {
  HttpServerOptions options;
  options.host = host;
  options.port = port;
  return Start(options, std::move(handlers));
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                      HttpHandlers handlers) {
  const std::string& host = options.host;
  const int port = options.port;
  if (!handlers.live || !handlers.ready || !handlers.model_ready || !handlers.metrics) {
    return InvalidArgument("HTTP server: every handler (live, ready, model_ready, metrics) is required");
  }
  if (port < 0 || port > 65535) {
    return InvalidArgument("HTTP port must be in [0, 65535], got " + std::to_string(port));
  }
  auto state = std::make_unique<State>();
  state->handlers = std::move(handlers);
  state->max_body_bytes = options.max_body_bytes;
  LTSERVE_ASSIGN_OR_RETURN(state->server, MakeServer(options, &state->tls));
  httplib::Server& server = *state->server;
  AddRoutes(server, state->handlers, state->max_body_bytes);
  // A declared Content-Length over the limit is refused before the body is read into memory.
  server.set_payload_max_length(options.max_body_bytes);
  State* raw = state.get();
  server.set_socket_options([raw](socket_t sock) {
    ExclusivePortOptions(sock);
    raw->listen_socket = sock;
  });
  // httplib writes a response's headers and body separately: with Nagle's algorithm the body
  // waited for the client's delayed ACK, 40 ms per inference.
  server.set_tcp_nodelay(true);
  server.set_keep_alive_timeout(kKeepAliveTimeoutS);
  server.set_keep_alive_max_count(kKeepAliveMaxRequests);
  server.set_read_timeout(kReadTimeoutS, 0);
  server.set_write_timeout(kWriteTimeoutS, 0);
  // httplib creates its worker pool inside the accept loop, after marking itself running: the
  // one moment from which stop() takes effect, so it is where Start learns the server is up.
  server.new_task_queue = [raw] {
    auto* pool = new ConnectionThreads(kMaxConnectionThreads);
    raw->ReportStart(Status::Ok());
    return pool;
  };

  const int bound = port == 0 ? server.bind_to_any_port(host)
                              : (server.bind_to_port(host, port) ? port : -1);
  // Listening again on a listening socket only changes its backlog.
  if (bound >= 0) listen(raw->listen_socket, kListenBacklog);
  if (bound < 0) {
    return Unavailable("HTTP server cannot bind " + host + ":" + std::to_string(port) +
                       " (address in use, or no such interface)");
  }
  std::future<Status> started = state->started.get_future();
  state->thread = std::thread([raw] {
    try {
      raw->server->listen_after_bind();
      raw->ReportStart(Unavailable("HTTP server: the accept loop ended before it started"));
    } catch (const std::exception& e) {
      // Typically pthread_create failing for the worker pool.
      raw->ReportStart(Unavailable(std::string("HTTP server could not start: ") + e.what()));
    }
  });
  // Resolves without a timeout: the thread either reaches the pool creation or exits, and
  // both report.
  Status status = started.get();
  auto result = std::unique_ptr<HttpServer>(new HttpServer(std::move(state), bound));
  if (!status.ok()) return status;  // the destructor joins the thread
  return result;
}

HttpServer::HttpServer(std::unique_ptr<State> state, int port)
    : state_(std::move(state)), port_(port) {}

Status HttpServer::ReloadCertificates() {
  if (!state_->tls) return FailedPrecondition("the HTTP port serves without TLS");
  return state_->tls->Reload();
}

std::vector<std::filesystem::path> HttpServer::CertificateFiles() const {
  return state_->tls ? state_->tls->Files() : std::vector<std::filesystem::path>();
}

HttpServer::~HttpServer() {
  // Start has seen the accept loop running (or ended), so one stop() is enough.
  state_->server->stop();
  if (state_->thread.joinable()) state_->thread.join();
}

}  // namespace ltserve
