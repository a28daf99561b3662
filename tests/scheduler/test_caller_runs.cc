// SchedulerOptions::run_on_caller_when_idle: a lone request that may start at once runs on the
// caller's thread when an instance is idle; in every other case it queues for a worker as
// before, and nothing queued while an instance is claimed waits for the claim to end.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "harness.h"

namespace ltserve::testing {
namespace {

using namespace std::chrono_literals;

// A batch window long enough that a request still in it on two loaded cores is unmistakable.
constexpr auto kBatchWindow = 200ms;

SchedulerOptions CallerRunOptions(std::chrono::microseconds max_queue_delay = 0us) {
  SchedulerOptions options = BatchingOptions(8, max_queue_delay);
  options.run_on_caller_when_idle = true;
  return options;
}

TEST(CallerRuns, LoneRequestRunsOnTheCallersThreadInsideRunClaimed) {
  Harness h(CallerRunOptions());
  Scheduler::ClaimedRun claimed;
  auto call = h.SendClaiming(3, &claimed);
  ASSERT_TRUE(call->id.ok()) << call->id.status().ToString();
  ASSERT_TRUE(claimed) << "an idle instance and a request that may start now: claimed";
  EXPECT_FALSE(call->answered()) << "Enqueue itself never executes";
  h.scheduler().RunClaimed(claimed);
  EXPECT_FALSE(claimed) << "a ClaimedRun is spent once run";
  ASSERT_TRUE(call->answered()) << "RunClaimed returns after on_complete";
  ExpectOwnOutputs(*call, call->Await());
  EXPECT_EQ(LastExecutingThread(h.backend), std::this_thread::get_id());
  EXPECT_EQ(h.scheduler().pending(), 0u);
  EXPECT_EQ(h.gauge.value.load(), 0);
}

TEST(CallerRuns, WithoutTheOptionTheWorkerRunsIt) {
  Harness h(BatchingOptions(8, 0us));
  Scheduler::ClaimedRun claimed;
  auto call = h.SendClaiming(2, &claimed);
  EXPECT_FALSE(claimed);
  ExpectOwnOutputs(*call, call->Await());
  EXPECT_NE(LastExecutingThread(h.backend), std::this_thread::get_id());
}

TEST(CallerRuns, RequestInsideABatchWindowIsNotClaimed) {
  Harness h(CallerRunOptions(std::chrono::duration_cast<std::chrono::microseconds>(kBatchWindow)));
  Scheduler::ClaimedRun claimed;
  auto call = h.SendClaiming(2, &claimed);
  EXPECT_FALSE(claimed) << "it waits for others to batch with, as Triton's batcher does";
  ExpectOwnOutputs(*call, call->Await());
  EXPECT_GE(call->Await().answered - call->sent, kBatchWindow);
}

TEST(CallerRuns, BusyInstanceIsNotClaimedAndTheRequestQueuesBehindIt) {
  Harness h(CallerRunOptions());
  auto held = h.SendAndHold(1);
  Scheduler::ClaimedRun claimed;
  auto call = h.SendClaiming(2, &claimed);
  EXPECT_FALSE(claimed);
  h.backend.Release();
  ExpectOwnOutputs(*held, held->Await());
  ExpectOwnOutputs(*call, call->Await());
}

TEST(CallerRuns, SecondRequestIsNotClaimedWhileTheFirstWaitsInTheQueue) {
  Harness h(CallerRunOptions());
  auto held = h.SendAndHold(1);
  auto queued = h.Send(1);
  Scheduler::ClaimedRun claimed;
  auto call = h.SendClaiming(1, &claimed);
  EXPECT_FALSE(claimed) << "claiming it would overtake the request queued before it";
  h.backend.Release();
  for (const auto& c : {held, queued, call}) ExpectOwnOutputs(*c, c->Await());
}

TEST(CallerRuns, RequestQueuedWhileTheOnlyInstanceIsClaimedRunsAfterTheClaim) {
  Harness h(CallerRunOptions());
  Scheduler::ClaimedRun claimed;
  auto first = h.SendClaiming(1, &claimed);
  ASSERT_TRUE(claimed);
  // Its wake-up reaches the claimed worker, which must not take it; RunClaimed must hand it on.
  auto second = h.Send(2);
  EXPECT_EQ(second->result.wait_for(50ms), std::future_status::timeout)
      << "ran while its only instance was claimed";
  h.scheduler().RunClaimed(claimed);
  ExpectOwnOutputs(*first, first->Await());
  ExpectOwnOutputs(*second, second->Await());
}

TEST(CallerRuns, WhileOneInstanceIsClaimedTheOtherServesTheQueue) {
  Harness h(CallerRunOptions(), /*instances=*/2);
  Scheduler::ClaimedRun claimed;
  auto first = h.SendClaiming(1, &claimed);
  ASSERT_TRUE(claimed);
  auto second = h.Send(2);
  // Answered with the claim still held: the notification reached the unclaimed worker.
  ExpectOwnOutputs(*second, second->Await());
  EXPECT_FALSE(first->answered());
  h.scheduler().RunClaimed(claimed);
  ExpectOwnOutputs(*first, first->Await());
}

TEST(CallerRuns, CancelLeavesAClaimedRequestAndDrainWaitsForIt) {
  Harness h(CallerRunOptions());
  Scheduler::ClaimedRun claimed;
  auto call = h.SendClaiming(1, &claimed);
  ASSERT_TRUE(claimed);
  h.scheduler().Cancel(*call->id);  // it counts as running: it finishes
  auto drained = std::async(std::launch::async,
                            [&] { return h.scheduler().Drain(Clock::now() + kPatience); });
  EXPECT_EQ(drained.wait_for(50ms), std::future_status::timeout)
      << "Drain returned with a claimed request unanswered";
  h.scheduler().RunClaimed(claimed);
  EXPECT_TRUE(drained.get());
  ExpectOwnOutputs(*call, call->Await());
}

TEST(CallerRuns, ClaimedRequestPastItsDeadlineTimesOutWithoutRunning) {
  Harness h(CallerRunOptions());
  Scheduler::ClaimedRun claimed;
  auto call = h.SendClaiming(1, &claimed, [](InferenceRequest& request) {
    request.deadline = Clock::now() + 1ms;
  });
  ASSERT_TRUE(claimed);
  std::this_thread::sleep_for(20ms);
  // Checked when the batch starts, as for a worker's batch.
  h.scheduler().RunClaimed(claimed);
  const Outcome outcome = call->Await();
  EXPECT_EQ(outcome.status.code(), StatusCode::kDeadlineExceeded) << outcome.status.ToString();
  EXPECT_TRUE(h.backend.batches().empty()) << "an expired request reached Execute";
}

}  // namespace
}  // namespace ltserve::testing
