// How late the batcher's window closes. A lone request waits max_queue_delay for company, so
// its time in the queue should be the delay and no more; Linux ends a timed wait up to the
// thread's timer slack late (50 µs by default), which the scheduler's threads set to 1 ns
// (scheduler.cc). Two measurements, each over many sequential waits:
//   1. the mechanism: condition_variable::wait_until for `delay`, at the default slack and at
//      1 ns, on a thread of this program;
//   2. the scheduler: a lone request through the real batcher (the fake executor of the
//      scheduler tests answers at once): enqueue to answer, minus the delay.
// Prints a markdown table of the overshoot's median and 99th percentile. Then, with no window,
// what the hand-off to a sleeping worker costs: a lone request every `gap` (the worker asleep
// again by then, as between a client's sequential calls), enqueue to answer, handed to the
// worker against run on the enqueuing thread (SchedulerOptions::run_on_caller_when_idle),
// alternating rounds. No GPU needed.
//
// Usage: ltserve_wakeup_bench [iterations]
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace {

using Clock = std::chrono::steady_clock;
using Micros = std::chrono::duration<double, std::micro>;

struct Spread {
  double p50 = 0;
  double p99 = 0;
};

Spread Percentiles(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const auto at = [&](double q) {
    return values[std::min(values.size() - 1, static_cast<std::size_t>(q * values.size()))];
  };
  return {at(0.5), at(0.99)};
}

// Overshoot of a timed wait nobody notifies, on a thread with the given timer slack.
Spread TimedWaitOvershoot(unsigned long slack_ns, std::chrono::microseconds delay, int iterations) {
  std::vector<double> late;
  std::thread waiter([&] {
    if (slack_ns > 0) prctl(PR_SET_TIMERSLACK, slack_ns, 0UL, 0UL, 0UL);
    std::mutex mutex;
    std::condition_variable cv;
    std::unique_lock lock(mutex);
    for (int i = 0; i < iterations; ++i) {
      const auto wake = Clock::now() + delay;
      while (Clock::now() < wake) cv.wait_until(lock, wake);
      late.push_back(Micros(Clock::now() - wake).count());
    }
  });
  waiter.join();
  return Percentiles(late);
}

// Enqueue-to-answer of a lone request through the batcher, minus the window.
Spread SchedulerOvershoot(std::chrono::microseconds delay, int iterations) {
  using namespace ltserve::testing;
  Harness harness(BatchingOptions(8, delay));
  std::vector<double> late;
  for (int i = 0; i < iterations; ++i) {
    auto call = harness.Send(1);
    const Outcome outcome = call->Await();
    if (!outcome.status.ok()) {
      std::fprintf(stderr, "request failed: %s\n", outcome.status.ToString().c_str());
      return {};
    }
    late.push_back(Micros(outcome.answered - call->sent).count() - Micros(delay).count());
  }
  return Percentiles(late);
}

// Enqueue-to-answer of lone requests `gap` apart, no window, the worker or the caller running them.
std::vector<double> LoneRequestLatency(bool on_caller, std::chrono::microseconds gap,
                                       int iterations) {
  using namespace ltserve::testing;
  ltserve::SchedulerOptions options = BatchingOptions(8, std::chrono::microseconds(0));
  options.run_on_caller_when_idle = on_caller;
  Harness harness(options);
  std::vector<double> latency;
  for (int i = 0; i < iterations; ++i) {
    std::this_thread::sleep_for(gap);
    ltserve::Scheduler::ClaimedRun claimed;
    auto call = harness.SendClaiming(1, &claimed);
    if (on_caller != static_cast<bool>(claimed)) {
      std::fprintf(stderr, "request %d: claimed %d, expected %d\n", i, static_cast<bool>(claimed),
                   on_caller);
      return {};
    }
    harness.scheduler().RunClaimed(claimed);
    const Outcome outcome = call->Await();
    if (!outcome.status.ok()) {
      std::fprintf(stderr, "request failed: %s\n", outcome.status.ToString().c_str());
      return {};
    }
    latency.push_back(Micros(outcome.answered - call->sent).count());
  }
  return latency;
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::stoi(argv[1]) : 500;
  const unsigned long default_slack = static_cast<unsigned long>(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0));
  std::printf("this thread's timer slack: %lu ns; %d waits each\n\n", default_slack, iterations);
  std::printf("| what | window µs | overshoot p50 µs | overshoot p99 µs |\n|---|---:|---:|---:|\n");
  for (auto delay : {std::chrono::microseconds(100), std::chrono::microseconds(500)}) {
    const Spread slack = TimedWaitOvershoot(0, delay, iterations);
    const Spread tight = TimedWaitOvershoot(1, delay, iterations);
    const Spread batcher = SchedulerOvershoot(delay, iterations);
    std::printf("| wait_until, default slack | %ld | %.1f | %.1f |\n", static_cast<long>(delay.count()),
                slack.p50, slack.p99);
    std::printf("| wait_until, 1 ns slack | %ld | %.1f | %.1f |\n", static_cast<long>(delay.count()),
                tight.p50, tight.p99);
    std::printf("| lone request through the batcher (enqueue to answer) | %ld | %.1f | %.1f |\n",
                static_cast<long>(delay.count()), batcher.p50, batcher.p99);
  }

  constexpr auto kGap = std::chrono::microseconds(200);  // about a loopback client's round trip
  constexpr int kRounds = 5;
  std::vector<double> handed, on_caller;
  for (int round = 0; round < kRounds; ++round) {
    for (bool caller : {false, true}) {
      std::vector<double> run = LoneRequestLatency(caller, kGap, iterations / kRounds + 1);
      if (run.empty()) return 1;
      (caller ? on_caller : handed).insert((caller ? on_caller : handed).end(), run.begin(),
                                           run.end());
    }
  }
  const Spread worker = Percentiles(handed);
  const Spread caller = Percentiles(on_caller);
  std::printf("\nLone requests %ld µs apart, no window, %zu each in %d alternating rounds:\n\n",
              static_cast<long>(kGap.count()), handed.size(), kRounds);
  std::printf("| who runs it | enqueue to answer p50 µs | p99 µs |\n|---|---:|---:|\n");
  std::printf("| the instance's worker (woken) | %.1f | %.1f |\n", worker.p50, worker.p99);
  std::printf("| the enqueuing thread (run_on_caller_when_idle) | %.1f | %.1f |\n", caller.p50,
              caller.p99);
  return 0;
}
