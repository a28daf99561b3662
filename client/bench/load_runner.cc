#include "load_runner.h"

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace ltserve::client {
namespace {

using Clock = std::chrono::steady_clock;

// Open-loop sends beyond this many in flight are counted as delayed instead of piling up
// without bound when the server cannot keep up.
constexpr std::uint64_t kMaxOutstanding = 16384;
// How long stopping a level waits for its last requests when calls have no deadline.
constexpr auto kDrainBound = std::chrono::seconds(30);

struct Window {
  std::vector<std::int64_t> latencies_ns;
  std::int64_t tokens = 0;
  std::uint64_t errors = 0;
  double seconds = 0;
  inference::ModelStatisticsResponse stats_before, stats_after;
};

}  // namespace

// Everything in-flight completions touch, so that none of them reaches back into the
// LoadRunner (a completion may outlive a level that stopped waiting for it).
struct LoadRunner::Session {
  Client* client = nullptr;
  std::vector<PooledRequest> pool;
  std::size_t next = 0;  // the pool's request sent next
  CallOptions call;
  std::mutex mutex;
  std::condition_variable changed;
  bool running = true;
  std::uint64_t outstanding = 0;
  std::uint64_t delayed = 0;
  std::vector<std::int64_t> latencies_ns;  // current window
  std::int64_t tokens = 0;                 // current window
  std::uint64_t errors = 0;                // current window
  std::string first_error;
};

LoadRunner::LoadRunner(Client& client, std::shared_ptr<const InferRequest> request, std::string model,
                       LoadOptions options)
    : LoadRunner(client, std::vector<PooledRequest>{{std::move(request), 0}}, std::move(model),
                 std::move(options)) {}

LoadRunner::LoadRunner(Client& client, std::vector<PooledRequest> pool, std::string model, LoadOptions options)
    : client_(client), pool_(std::move(pool)), model_(std::move(model)), options_(std::move(options)) {}

std::shared_ptr<LoadRunner::Session> LoadRunner::NewSession() const {
  auto session = std::make_shared<Session>();
  session->client = &client_;
  session->pool = pool_;
  session->call = options_.call;
  return session;
}

void LoadRunner::Send(const std::shared_ptr<Session>& session, bool closed_loop) {
  const PooledRequest* pooled = nullptr;
  {
    std::lock_guard lock(session->mutex);
    if (!session->running) return;
    if (!closed_loop && session->outstanding >= kMaxOutstanding) {
      ++session->delayed;
      return;
    }
    ++session->outstanding;
    pooled = &session->pool[session->next];
    session->next = (session->next + 1) % session->pool.size();
  }
  const auto sent = Clock::now();
  const std::int64_t tokens = pooled->tokens;
  session->client->AsyncInfer(
      pooled->request,
      [session, sent, closed_loop, tokens](Result<InferResult> result) {
        const auto latency = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - sent);
        bool again = false;
        {
          std::lock_guard lock(session->mutex);
          --session->outstanding;
          if (result.ok()) {
            session->latencies_ns.push_back(latency.count());
            session->tokens += tokens;
          } else {
            ++session->errors;
            if (session->first_error.empty()) session->first_error = result.status().ToString();
          }
          again = closed_loop && session->running;
          session->changed.notify_all();
        }
        if (again) Send(session, true);
      },
      session->call);
}

Result<LevelResult> LoadRunner::RunConcurrency(int concurrency) {
  if (concurrency < 1) return InvalidArgument("concurrency must be at least 1");
  if (pool_.empty()) return InvalidArgument("no request to send: the request pool is empty");
  auto session = NewSession();
  auto result = Measure(session, [concurrency](const std::shared_ptr<Session>& s) {
    for (int i = 0; i < concurrency; ++i) Send(s, true);
  });
  if (result.ok()) {
    result->mode = "concurrency";
    result->level = concurrency;
  }
  return result;
}

Result<LevelResult> LoadRunner::RunRate(double requests_per_second) {
  if (!(requests_per_second > 0)) return InvalidArgument("request rate must be positive");
  if (pool_.empty()) return InvalidArgument("no request to send: the request pool is empty");
  auto session = NewSession();
  std::thread pacer;
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(1.0 / requests_per_second));
  auto result = Measure(session, [&](const std::shared_ptr<Session>& s) {
    pacer = std::thread([s, interval] {
      auto next = Clock::now();
      while (true) {
        {
          std::unique_lock lock(s->mutex);
          // Pacing: sleep to the next send slot, woken early only by the end of the level.
          if (s->changed.wait_until(lock, next, [&] { return !s->running; })) return;
        }
        Send(s, false);
        next += interval;
      }
    });
  });
  {
    std::lock_guard lock(session->mutex);
    session->running = false;
    session->changed.notify_all();
  }
  if (pacer.joinable()) pacer.join();
  if (result.ok()) {
    result->mode = "rate";
    result->level = requests_per_second;
    std::lock_guard lock(session->mutex);
    result->delayed = session->delayed;
  }
  return result;
}

Result<LevelResult> LoadRunner::Measure(const std::shared_ptr<Session>& session, const Starter& start) {
  auto stop = [&] {
    std::unique_lock lock(session->mutex);
    session->running = false;
    session->changed.notify_all();
    const auto bound = options_.call.timeout.count() > 0
                           ? std::chrono::duration_cast<Clock::duration>(options_.call.timeout) * 2
                           : std::chrono::duration_cast<Clock::duration>(kDrainBound);
    session->changed.wait_for(lock, bound, [&] { return session->outstanding == 0; });
  };
  // Collects what completed since `began` and returns the instant the next window starts.
  auto take = [&](Window& w, Clock::time_point began) {
    std::lock_guard lock(session->mutex);
    const auto now = Clock::now();
    w.latencies_ns.swap(session->latencies_ns);
    session->latencies_ns.clear();
    w.tokens = std::exchange(session->tokens, 0);
    w.errors = std::exchange(session->errors, 0);
    w.seconds = std::chrono::duration<double>(now - began).count();
    return now;
  };

  // Servers without the statistics extension still get measured, without the breakdown.
  auto fetch_stats = [&]() -> Result<inference::ModelStatisticsResponse> {
    auto stats = client_.ModelStatistics(model_);
    if (!stats.ok() && stats.status().code() == StatusCode::kUnimplemented) {
      return inference::ModelStatisticsResponse();
    }
    return stats;
  };

  start(session);
  // Warm-up and windows are fixed spans of time by definition: sleeping through them is the
  // measurement, the completions arrive on gRPC's threads meanwhile.
  std::this_thread::sleep_for(options_.warmup);
  Window discard;
  auto began = take(discard, Clock::now());
  auto first_stats = fetch_stats();
  if (!first_stats.ok()) {
    stop();
    return first_stats.status();
  }
  auto stats = std::move(first_stats).value();

  std::deque<Window> recent;
  std::vector<double> throughputs;
  bool stable = false;
  int windows = 0;
  while (windows < options_.max_windows && !stable) {
    std::this_thread::sleep_for(options_.window);
    Window w;
    began = take(w, began);
    w.stats_before = std::move(stats);
    auto after = fetch_stats();
    if (!after.ok()) {
      stop();
      return after.status();
    }
    stats = *after;
    w.stats_after = *after;
    ++windows;
    if (w.latencies_ns.empty() && w.errors > 0) {
      stop();
      std::lock_guard lock(session->mutex);
      return Status(Unavailable("every request of a window failed; first error: " + session->first_error));
    }
    const double tput = static_cast<double>(w.latencies_ns.size()) * options_.batch / w.seconds;
    throughputs.push_back(tput);
    stable = IsStable(throughputs, options_.stable_windows, options_.stability);
    if (options_.progress) {
      char line[192];
      std::snprintf(line, sizeof(line), "  window %d/%d: %.1f infer/s, %.0f tokens/s, %zu ok, %llu errors%s",
                    windows, options_.max_windows, tput, static_cast<double>(w.tokens) / w.seconds,
                    w.latencies_ns.size(), static_cast<unsigned long long>(w.errors),
                    stable ? " (stable)" : "");
      options_.progress(line);
    }
    recent.push_back(std::move(w));
    if (static_cast<int>(recent.size()) > options_.stable_windows) recent.pop_front();
  }
  stop();

  LevelResult result;
  result.windows = windows;
  result.stable = stable;
  std::vector<std::int64_t> latencies;
  double seconds = 0;
  std::int64_t tokens = 0;
  for (const Window& w : recent) {
    latencies.insert(latencies.end(), w.latencies_ns.begin(), w.latencies_ns.end());
    tokens += w.tokens;
    seconds += w.seconds;
    result.errors += w.errors;
  }
  result.request_rate = static_cast<double>(latencies.size()) / seconds;
  result.throughput = result.request_rate * options_.batch;
  result.tokens_per_s = static_cast<double>(tokens) / seconds;
  result.latency = Summarize(latencies);
  result.server = Breakdown(recent.front().stats_before, recent.back().stats_after, model_);
  std::lock_guard lock(session->mutex);
  result.first_error = session->first_error;
  return result;
}

}  // namespace ltserve::client
