#include "http/http_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
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
// A client that stalls mid-request, or does not read its response, is dropped after this long.
constexpr time_t kReadTimeoutS = 5;
constexpr time_t kWriteTimeoutS = 5;
// httplib listens with a backlog of 5: a burst of connections overflowed it, and the kernel
// dropped the SYNs of the rest, probes included, for a retransmission (1 s, then 3 s, ...).
constexpr int kListenBacklog = 1024;
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
  httplib::Server server;
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
  State* raw = state.get();
  server.set_socket_options([raw](socket_t sock) {
    ExclusivePortOptions(sock);
    raw->listen_socket = sock;
  });
  server.set_keep_alive_timeout(kKeepAliveTimeoutS);
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
