// Test client for the batcher: builds requests with fresh random rows for the fake executor,
// records each completion (and how many times it came), and checks that a request got exactly
// its own outputs.
//
// Thread-safety: Harness::Send may be called from many threads; a Call is written once by the
// scheduler's completion and read through its future.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "fake_executor.h"
#include "scheduler/model_stats.h"
#include "scheduler/scheduler.h"

namespace ltserve::testing {

using Clock = std::chrono::steady_clock;

// Upper bound on waiting for something that must happen promptly; reached only on failure.
constexpr std::chrono::seconds kPatience{5};
// Input width of most requests (any value works; odd, so no row happens to be aligned).
constexpr std::int64_t kWidth = 7;

struct Outcome {
  Status status;
  std::vector<std::vector<float>> outputs;
  std::vector<std::vector<std::int64_t>> shapes;
  Clock::time_point answered;
};

struct Call {
  std::vector<float> input;
  std::vector<std::int64_t> shape;  // as sent
  std::int64_t rows = 0;            // rows of `width` values in `input`
  std::int64_t width = 0;
  // With a key-padding mask: one byte per token of [batch, seq], nonzero = padding.
  std::vector<std::uint8_t> mask;
  Clock::time_point sent;
  Result<std::uint64_t> id = Internal("not sent");
  std::atomic<int> completions{0};
  std::promise<Outcome> promise;
  std::shared_future<Outcome> result = promise.get_future().share();

  // The outcome, or a failure recorded in the test when none came within kPatience.
  Outcome Await() const;
  // Answered by now, without waiting.
  bool answered() const;
};

// Counts the pending gauge the way server/metrics would.
class PendingGauge : public StatsObserver {
 public:
  void OnRequestSuccess(std::uint64_t, std::uint64_t, std::int64_t) override {}
  void OnRequestFailure(FailureReason, std::uint64_t) override {}
  void OnBatchExecuted(std::int64_t, const ExecuteTimings&) override {}
  void OnPendingChanged(std::int64_t delta) override { value += delta; }
  std::atomic<std::int64_t> value{0};
};

// Options for a model with a batch dimension and two FP32 outputs.
SchedulerOptions BatchingOptions(int max_batch_size, std::chrono::microseconds max_queue_delay,
                                 std::vector<int> preferred = {});
SchedulerOptions NoBatchingOptions(int max_batch_size);

class Harness {
 public:
  explicit Harness(SchedulerOptions options, int instances = 1,
                   std::size_t capacity_floats = 4096);

  // Sends `rows` fresh random rows ([rows, width], or the full shape for a model without a
  // batch dimension); `adjust` may set priority, timeouts or break the request on purpose.
  std::shared_ptr<Call> Send(std::int64_t rows, std::int64_t width = kWidth,
                             const std::function<void(InferenceRequest&)>& adjust = {});
  // Send through Enqueue's caller-run form: `*claimed` says whether the scheduler handed the
  // request's instance to this caller; if so the test calls scheduler().RunClaimed itself.
  std::shared_ptr<Call> SendClaiming(std::int64_t rows, Scheduler::ClaimedRun* claimed,
                                     const std::function<void(InferenceRequest&)>& adjust = {});
  // For a token layout: `batch` sequences of `seq` tokens, shape [batch, seq, width].
  std::shared_ptr<Call> SendSequences(std::int64_t batch, std::int64_t seq,
                                      std::int64_t width = kWidth);
  // For a key-padding mask model (mask input 1): [batch, seq, width] tokens and `mask`
  // (batch x seq bytes, nonzero = padding) as input 1 of shape [batch, seq]; `adjust` may
  // break the request on purpose.
  std::shared_ptr<Call> SendMasked(std::int64_t batch, std::int64_t seq,
                                   std::vector<std::uint8_t> mask,
                                   const std::function<void(InferenceRequest&)>& adjust = {});

  // Holds the fake executor and sends a request that occupies an instance; returns once that
  // request is inside Execute, so what is sent next queues up behind it.
  std::shared_ptr<Call> SendAndHold(std::int64_t rows = 1, std::int64_t width = kWidth);

  Scheduler& scheduler() { return *scheduler_; }
  void DestroyScheduler() { scheduler_.reset(); }
  FakeBackend backend;
  PendingGauge gauge;
  ModelStats stats{&gauge};
  SchedulerOptions options;

 private:
  std::shared_ptr<Call> SendShape(std::vector<std::int64_t> shape,
                                  const std::function<void(InferenceRequest&)>& adjust,
                                  std::vector<std::uint8_t> mask = {},
                                  Scheduler::ClaimedRun* claimed = nullptr);

  std::unique_ptr<Scheduler> scheduler_;
  std::mutex rng_mutex_;
  std::mt19937 rng_;
};

// Expects `outcome` to be OK with y0 = 2x + 1 and y1 = row sums of the call's own rows (of a
// masked call: at its real tokens, zeros at its padded ones).
void ExpectOwnOutputs(const Call& call, const Outcome& outcome);

// Options for a token model with a key-padding mask as input 1, up to `max_tokens` tokens.
// A token layout as the loader gives a one-input token model: input 0 carries the tokens, no
// sequence limit, `max_tokens` per batch (0: none).
TokenLayout PackedLayout(std::int64_t max_tokens);
SchedulerOptions MaskedOptions(std::int64_t max_tokens, std::int64_t width = kWidth);

// The first value of each row of `calls`, in order: what the executor sees if they ran in order.
std::vector<float> FirstValues(const std::vector<std::shared_ptr<Call>>& calls);
// The first values the executor saw, batch after batch, from batch `from` on.
std::vector<float> ExecutedFirstValues(const FakeBackend& backend, std::size_t from = 0);
std::vector<std::int64_t> ExecutedBatchSizes(const FakeBackend& backend);
// The thread that ran the last batch (a default id before any).
std::thread::id LastExecutingThread(const FakeBackend& backend);

}  // namespace ltserve::testing
