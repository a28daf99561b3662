// How late the batcher's window closes. A lone request waits max_queue_delay for company, so
// its time in the queue should be the delay and no more; Linux ends a timed wait up to the
// thread's timer slack late (50 µs by default), which the scheduler's threads set to 1 ns
// (scheduler.cc). Two measurements, each over many sequential waits:
//   1. the mechanism: condition_variable::wait_until for `delay`, at the default slack and at
//      1 ns, on a thread of this program;
//   2. the scheduler: a lone request through the real batcher (the fake executor of the
//      scheduler tests answers at once): enqueue to answer, minus the delay.
// Prints a markdown table of the overshoot's median and 99th percentile. No GPU needed.
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
  return 0;
}
