// SchedulerOptions::worker_poll_us: a worker with nothing to run polls for requests before it
// sleeps. Requests that come while it polls, and after it has gone to sleep, are all answered
// once with their own outputs; draining and destruction do not wait out the poll window.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "harness.h"

namespace ltserve::testing {
namespace {

using namespace std::chrono_literals;

// Long enough that a test that waited it out by mistake is unmistakable against kPromptly.
constexpr std::uint64_t kLongPollUs = 900'000;
// What a stop or drain that does not wait for the poll window takes at most on two loaded cores.
constexpr auto kPromptly = 300ms;

SchedulerOptions PollingOptions(std::uint64_t poll_us,
                                std::chrono::microseconds max_queue_delay = 0us) {
  SchedulerOptions options = BatchingOptions(8, max_queue_delay);
  options.worker_poll_us = poll_us;
  return options;
}

TEST(WorkerPoll, RequestDuringThePollRunsOnTheWorker) {
  Harness h(PollingOptions(kLongPollUs));
  // The first request wakes the worker; after it the worker polls with nothing queued.
  auto first = h.Send(2);
  ExpectOwnOutputs(*first, first->Await());
  const std::thread::id worker = LastExecutingThread(h.backend);
  auto call = h.Send(3);
  ExpectOwnOutputs(*call, call->Await());
  EXPECT_EQ(LastExecutingThread(h.backend), worker);
  EXPECT_NE(worker, std::this_thread::get_id());
}

TEST(WorkerPoll, RequestAfterThePollEndedWakesTheSleepingWorker) {
  constexpr std::uint64_t kShortPollUs = 1'000;
  Harness h(PollingOptions(kShortPollUs));
  auto first = h.Send(1);
  ExpectOwnOutputs(*first, first->Await());
  std::this_thread::sleep_for(std::chrono::microseconds(kShortPollUs) * 20);
  auto second = h.Send(4);
  ExpectOwnOutputs(*second, second->Await());
}

TEST(WorkerPoll, ManySendersEachGetTheirOwnAnswerOnce) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 150;
  Harness h(PollingOptions(200), /*instances=*/2);
  std::vector<std::shared_ptr<Call>> calls(kThreads * kPerThread);
  std::vector<std::thread> senders;
  for (int t = 0; t < kThreads; ++t) {
    senders.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        calls[t * kPerThread + i] = h.Send(1 + (t + i) % 3);
        if (i % 16 == 0) std::this_thread::sleep_for(300us);  // let workers poll, and sleep
      }
    });
  }
  for (std::thread& sender : senders) sender.join();
  for (const auto& call : calls) {
    ExpectOwnOutputs(*call, call->Await());
    EXPECT_EQ(call->completions.load(), 1);
  }
  // Answers come before the count drops: Drain waits for it.
  EXPECT_TRUE(h.scheduler().Drain(Clock::now() + kPatience));
  EXPECT_EQ(h.scheduler().pending(), 0u);
  EXPECT_EQ(h.gauge.value.load(), 0);
}

TEST(WorkerPoll, BatchWindowStillCollectsConcurrentRequests) {
  Harness h(PollingOptions(kLongPollUs, 100ms));
  auto a = h.Send(1);
  auto b = h.Send(2);
  ExpectOwnOutputs(*a, a->Await());
  ExpectOwnOutputs(*b, b->Await());
  EXPECT_EQ(ExecutedBatchSizes(h.backend), (std::vector<std::int64_t>{3}))
      << "polling replaces the sleep while nothing is queued, not the batch window";
}

TEST(WorkerPoll, DestructionDoesNotWaitOutThePoll) {
  Harness h(PollingOptions(kLongPollUs));
  auto call = h.Send(1);
  ExpectOwnOutputs(*call, call->Await());
  const auto start = Clock::now();
  h.DestroyScheduler();
  EXPECT_LT(Clock::now() - start, kPromptly);
}

TEST(WorkerPoll, DrainDoesNotWaitOutThePoll) {
  Harness h(PollingOptions(kLongPollUs));
  auto call = h.Send(1);
  ExpectOwnOutputs(*call, call->Await());
  const auto start = Clock::now();
  EXPECT_TRUE(h.scheduler().Drain(Clock::now() + kPatience));
  EXPECT_LT(Clock::now() - start, kPromptly);
}

TEST(WorkerPoll, OverTheCeilingIsRefused) {
  SchedulerOptions options = PollingOptions(kMaxWorkerPollUs + 1);
  std::vector<std::unique_ptr<ExecutorInstance>> instances;
  FakeBackend backend;
  instances.push_back(std::make_unique<FakeInstance>(&backend, 16, BatchLayout::kRows));
  PendingGauge gauge;
  ModelStats stats{&gauge};
  auto scheduler = Scheduler::Create(options, std::move(instances), &stats);
  ASSERT_FALSE(scheduler.ok());
  EXPECT_EQ(scheduler.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(scheduler.status().message().find("worker_poll_microseconds"), std::string::npos)
      << scheduler.status().message();
}

}  // namespace
}  // namespace ltserve::testing
