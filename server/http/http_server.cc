#include "http/http_server.h"

#include <sys/socket.h>

#include <atomic>
#include <exception>
#include <future>
#include <thread>

#include <httplib.h>

namespace ltserve {

namespace {

// Scrapes and probes are few and cheap, but a connection holds its worker while it is kept
// alive, so there are more workers than concurrent clients are expected.
constexpr std::size_t kWorkerThreads = 8;
// How long an idle kept-alive connection holds a worker, and so the longest the destructor
// waits for one; Prometheus scrapes every 15 s or so and gains nothing from reuse.
constexpr time_t kKeepAliveTimeoutS = 1;
// A client that stalls mid-request is dropped after this long.
constexpr time_t kReadTimeoutS = 5;
constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

constexpr int kOk = 200;
constexpr int kNotFound = 404;
constexpr int kInternalError = 500;
constexpr int kServiceUnavailable = 503;

// httplib's default adds SO_REUSEPORT, which lets a second server bind the same port and
// silently take half the scrapes. SO_REUSEADDR alone still allows a restart while old
// connections sit in TIME_WAIT.
void ExclusivePortOptions(socket_t sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

}  // namespace

struct HttpServer::State {
  HttpHandlers handlers;
  httplib::Server server;
  // Set once: OK when the accept loop runs, or the error that ended it before.
  std::promise<Status> started;
  std::atomic<bool> start_reported{false};
  std::thread thread;

  void ReportStart(Status status) {
    if (!start_reported.exchange(true)) started.set_value(std::move(status));
  }
};

namespace {

int StatusFor(bool up) { return up ? kOk : kServiceUnavailable; }

void AddRoutes(httplib::Server& server, const HttpHandlers& h) {
  server.Get("/metrics", [&h](const httplib::Request&, httplib::Response& res) {
    res.set_content(h.metrics(), kMetricsContentType);
  });
  server.Get("/v2/health/live", [&h](const httplib::Request&, httplib::Response& res) {
    res.status = StatusFor(h.live());
  });
  server.Get("/v2/health/ready", [&h](const httplib::Request&, httplib::Response& res) {
    res.status = StatusFor(h.ready());
  });
  server.Get(R"(/v2/models/([^/]+)/ready)",
             [&h](const httplib::Request& req, httplib::Response& res) {
               const std::optional<bool> ready = h.model_ready(req.matches[1].str());
               res.status = ready.has_value() ? StatusFor(*ready) : kNotFound;
             });
  // Handlers are not meant to throw; if one does, the client gets a 500 and the server lives on.
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = kInternalError;
        res.set_content("internal error\n", "text/plain");
      });
}

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& host, int port,
                                                      HttpHandlers handlers) {
  if (!handlers.live || !handlers.ready || !handlers.model_ready || !handlers.metrics) {
    return InvalidArgument("HTTP server: every handler (live, ready, model_ready, metrics) is required");
  }
  if (port < 0 || port > 65535) {
    return InvalidArgument("HTTP port must be in [0, 65535], got " + std::to_string(port));
  }
  auto state = std::make_unique<State>();
  state->handlers = std::move(handlers);
  httplib::Server& server = state->server;
  AddRoutes(server, state->handlers);
  server.set_socket_options(ExclusivePortOptions);
  server.set_keep_alive_timeout(kKeepAliveTimeoutS);
  server.set_read_timeout(kReadTimeoutS, 0);
  // httplib creates its worker pool inside the accept loop, after marking itself running: the
  // one moment from which stop() takes effect, so it is where Start learns the server is up.
  State* raw = state.get();
  server.new_task_queue = [raw] {
    auto* pool = new httplib::ThreadPool(kWorkerThreads);
    raw->ReportStart(Status::Ok());
    return pool;
  };

  const int bound = port == 0 ? server.bind_to_any_port(host)
                              : (server.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    return Unavailable("HTTP server cannot bind " + host + ":" + std::to_string(port) +
                       " (address in use, or no such interface)");
  }
  std::future<Status> started = state->started.get_future();
  state->thread = std::thread([raw] {
    try {
      raw->server.listen_after_bind();
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

HttpServer::~HttpServer() {
  // Start has seen the accept loop running (or ended), so one stop() is enough.
  state_->server.stop();
  if (state_->thread.joinable()) state_->thread.join();
}

}  // namespace ltserve
