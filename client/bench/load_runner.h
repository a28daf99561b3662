// Drives one load level against a model with the asynchronous client API and measures it:
// a closed loop holding N requests in flight (concurrency) or an open loop sending at a fixed
// rate, a warm-up, then measurement windows until throughput is stable, as perf_analyzer does.
//
// Thread-safety: one LoadRunner runs one level at a time; call it from a single thread. Its
// completions run on gRPC's threads and share state under a mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "client.h"
#include "load_stats.h"
#include "sequence_lengths.h"

namespace ltserve::client {

struct LoadOptions {
  std::chrono::milliseconds warmup{1000};
  std::chrono::milliseconds window{2000};
  int stable_windows = 3;    // how many consecutive windows must agree
  double stability = 0.05;   // within 5% of their mean
  int max_windows = 10;      // give up on stability after this many and report the last ones
  int batch = 1;             // samples per request, for infer/s
  CallOptions call;
  std::function<void(const std::string&)> progress;  // one line per window; may be empty
};

struct LevelResult {
  std::string mode;        // "concurrency" or "rate"
  double level = 0;        // requests in flight, or requests/s asked for
  double throughput = 0;   // inferences (samples) per second
  double tokens_per_s = 0; // real tokens (sequence length x batch) per second; 0 unless counted
  double request_rate = 0; // requests per second
  LatencySummary latency;  // client-side, send to completion
  ServerBreakdown server;  // from ModelStatistics over the same windows
  std::uint64_t errors = 0;
  std::string first_error;
  std::uint64_t delayed = 0;  // rate mode: sends skipped because too many were in flight
  int windows = 0;
  bool stable = false;
};

class LoadRunner {
 public:
  LoadRunner(Client& client, std::shared_ptr<const InferRequest> request, std::string model,
             LoadOptions options);
  // Sends the pool's requests in turn, each level starting from the first; a pooled request's
  // tokens count toward tokens_per_s when it completes. The pool must not be empty.
  LoadRunner(Client& client, std::vector<PooledRequest> pool, std::string model, LoadOptions options);

  Result<LevelResult> RunConcurrency(int concurrency);
  Result<LevelResult> RunRate(double requests_per_second);

 private:
  struct Session;
  using Starter = std::function<void(const std::shared_ptr<Session>&)>;
  std::shared_ptr<Session> NewSession() const;
  Result<LevelResult> Measure(const std::shared_ptr<Session>& session, const Starter& start);
  static void Send(const std::shared_ptr<Session>& session, bool closed_loop);

  Client& client_;
  std::vector<PooledRequest> pool_;
  std::string model_;
  LoadOptions options_;
};

}  // namespace ltserve::client
