// What happens to requests besides running: rejection, queue limits, timeouts, cancellation,
// draining, destruction and executor failures. Each is answered exactly once, or (when
// rejected by Enqueue) never, and counted in the statistics with its reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "harness.h"

namespace ltserve::testing {
namespace {

using namespace std::chrono_literals;

// A queue timeout short enough to wait out, long enough to be measured on two loaded cores.
constexpr auto kTimeout = 100ms;
// How late the expiry thread may answer on two loaded cores; far below the time the held
// instance would take to free up (kPatience), which is what "promptly" is measured against.
constexpr auto kExpiryLateness = 1s;

std::uint64_t Failures(const Harness& h, FailureReason reason) {
  const auto snapshot = h.stats.Snapshot();
  auto it = snapshot.failures_by_reason.find(reason);
  return it == snapshot.failures_by_reason.end() ? 0 : it->second;
}

bool WasExecuted(const Harness& h, const Call& call) {
  const std::vector<float> executed = ExecutedFirstValues(h.backend);
  return std::find(executed.begin(), executed.end(), call.input[0]) != executed.end();
}

TEST(Lifecycle, InvalidRequestsAreRejectedWithoutCompletion) {
  Harness h(BatchingOptions(4, 0us));
  std::vector<std::shared_ptr<Call>> rejected = {
      h.Send(5),  // larger than max_batch_size
      h.Send(0),  // empty batch
      h.Send(2, kWidth, [](InferenceRequest& r) { r.batch_size = 3; }),  // dim 0 disagrees
      h.Send(1, kWidth, [](InferenceRequest& r) { r.inputs.clear(); }),
      h.Send(1, kWidth, [](InferenceRequest& r) { r.on_complete = nullptr; }),
  };
  for (const auto& call : rejected) {
    ASSERT_FALSE(call->id.ok());
    EXPECT_EQ(call->id.status().code(), StatusCode::kInvalidArgument) << call->id.status().ToString();
  }
  EXPECT_EQ(h.scheduler().Enqueue(nullptr).status().code(), StatusCode::kInvalidArgument);
  auto good = h.Send(4);
  ExpectOwnOutputs(*good, good->Await());
  EXPECT_TRUE(h.scheduler().Drain(Clock::now() + kPatience));
  for (const auto& call : rejected) EXPECT_EQ(call->completions.load(), 0);
  EXPECT_EQ(Failures(h, FailureReason::kInvalidInput), 6u);
  EXPECT_EQ(h.gauge.value.load(), 0);
}

TEST(Lifecycle, FullQueueRejectsAtOncePerPriorityLevel) {
  SchedulerOptions options = NoBatchingOptions(4);
  options.priority_levels = 2;
  options.default_priority_level = 2;
  options.default_policy.max_queue_size = 2;
  options.priority_policies[1].max_queue_size = 1;
  Harness h(options);
  auto high = [](InferenceRequest& r) { r.priority = 1; };
  auto running = h.SendAndHold(1);  // executing requests do not count against the queue
  auto b = h.Send(1);
  auto c = h.Send(1);
  auto over_default = h.Send(1);
  auto e = h.Send(1, kWidth, high);
  auto over_high = h.Send(1, kWidth, high);
  for (const auto& call : {over_default, over_high}) {
    ASSERT_FALSE(call->id.ok());
    EXPECT_EQ(call->id.status().code(), StatusCode::kResourceExhausted);
  }
  h.backend.Release();
  for (const auto& call : {running, b, c, e}) ExpectOwnOutputs(*call, call->Await());
  EXPECT_EQ(over_default->completions.load() + over_high->completions.load(), 0);
  EXPECT_EQ(Failures(h, FailureReason::kQueueFull), 2u);
  // With room again, the level accepts.
  auto later = h.Send(1);
  ExpectOwnOutputs(*later, later->Await());
}

TEST(Lifecycle, ExpiredRequestsLeaveTheQueuePromptlyAndNeverRun) {
  SchedulerOptions options = BatchingOptions(8, 0us);
  options.priority_levels = 3;
  options.default_priority_level = 3;
  // Level 1: a default the request cannot lengthen. Level 2: a long default a request may
  // override. Level 3 (default policy): no default, so the request's own timeout applies.
  options.priority_policies[1] = {static_cast<std::uint64_t>(kTimeout / 1us), false, 0};
  options.priority_policies[2] = {static_cast<std::uint64_t>(kPatience * 10 / 1us), true, 0};
  Harness h(options);
  auto at = [](std::uint32_t priority, std::chrono::microseconds timeout) {
    return [=](InferenceRequest& r) {
      r.priority = priority;
      r.timeout_us = static_cast<std::uint64_t>(timeout.count());
    };
  };
  auto running = h.SendAndHold(1);
  std::vector<std::shared_ptr<Call>> expiring = {
      h.Send(1, kWidth, at(1, 0us)),          // the level's default
      h.Send(1, kWidth, at(1, kPatience * 10)),  // asks for longer: not allowed
      h.Send(1, kWidth, at(1, kTimeout / 4)),     // asks for shorter: not allowed either
      h.Send(1, kWidth, at(2, kTimeout)),     // overrides the long default
      h.Send(1, kWidth, at(3, kTimeout)),     // no default: its own timeout
      h.Send(1, kWidth, [](InferenceRequest& r) { r.deadline = r.arrival + kTimeout; }),  // gRPC
  };
  auto patient = h.Send(2, kWidth, at(3, 0us));
  // All expire while the only instance is still busy: expiry does not wait for a batch to form.
  for (const auto& call : expiring) {
    ASSERT_TRUE(call->id.ok());
    Outcome outcome = call->Await();
    EXPECT_EQ(outcome.status.code(), StatusCode::kDeadlineExceeded) << outcome.status.ToString();
    EXPECT_GE(outcome.answered - call->sent, kTimeout);
    EXPECT_LE(outcome.answered - call->sent, kTimeout + kExpiryLateness);
  }
  EXPECT_FALSE(running->answered());
  h.backend.Release();
  ExpectOwnOutputs(*running, running->Await());
  ExpectOwnOutputs(*patient, patient->Await());
  for (const auto& call : expiring) {
    EXPECT_FALSE(WasExecuted(h, *call));
    EXPECT_EQ(call->completions.load(), 1);
  }
  EXPECT_EQ(Failures(h, FailureReason::kTimeout), expiring.size());
}

TEST(Lifecycle, RequestWaitingForABatchTimesOutWithoutRunning) {
  SchedulerOptions options = BatchingOptions(8, 60s);  // the batch would wait a minute
  options.default_policy.default_timeout_us = static_cast<std::uint64_t>(kTimeout / 1us);
  Harness h(options);
  auto call = h.Send(1);
  Outcome outcome = call->Await();
  EXPECT_EQ(outcome.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(h.backend.batches().empty());
}

TEST(Lifecycle, CancelRemovesAQueuedRequestOnly) {
  Harness h(NoBatchingOptions(4));
  auto running = h.SendAndHold(1);
  auto cancelled = h.Send(2);
  auto kept = h.Send(3);
  h.scheduler().Cancel(cancelled->id.value());
  ASSERT_TRUE(cancelled->answered());  // answered inside Cancel
  EXPECT_EQ(cancelled->result.get().status.code(), StatusCode::kCancelled);
  h.scheduler().Cancel(cancelled->id.value());  // again: already answered
  h.scheduler().Cancel(running->id.value());    // running: finishes normally
  h.scheduler().Cancel(kept->id.value() + 1000);  // unknown
  h.backend.Release();
  ExpectOwnOutputs(*running, running->Await());
  ExpectOwnOutputs(*kept, kept->Await());
  EXPECT_EQ(cancelled->completions.load(), 1);
  EXPECT_FALSE(WasExecuted(h, *cancelled));
  EXPECT_EQ(Failures(h, FailureReason::kCancelled), 1u);
}

// gRPC cancels a call when its deadline passes, possibly before the scheduler's expiry fires:
// either way the request counts as timed out, not as cancelled by the client.
TEST(Lifecycle, CancelAfterTheDeadlineIsATimeout) {
  Harness h(BatchingOptions(8, 60s));  // the batch would wait a minute
  auto call = h.Send(1, kWidth, [](InferenceRequest& r) { r.deadline = r.arrival + kTimeout; });
  std::this_thread::sleep_until(call->sent + kTimeout);
  h.scheduler().Cancel(call->id.value());
  Outcome outcome = call->Await();
  EXPECT_EQ(outcome.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Failures(h, FailureReason::kTimeout), 1u);
  EXPECT_EQ(Failures(h, FailureReason::kCancelled), 0u);
  EXPECT_FALSE(WasExecuted(h, *call));
}

// The client's deadline passes before the server's by the time its request took to arrive; its
// cancellation, sent then, is the deadline too.
TEST(Lifecycle, CancelJustBeforeTheDeadlineIsATimeout) {
  Harness h(BatchingOptions(8, 60s));
  auto call = h.Send(1, kWidth, [](InferenceRequest& r) { r.deadline = r.arrival + kTimeout; });
  std::this_thread::sleep_until(call->sent + kTimeout - Scheduler::kDeadlineCancelLead / 2);
  h.scheduler().Cancel(call->id.value());
  EXPECT_EQ(call->Await().status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Failures(h, FailureReason::kTimeout), 1u);
  EXPECT_EQ(Failures(h, FailureReason::kCancelled), 0u);
}

TEST(Lifecycle, CancelWellBeforeTheDeadlineIsACancellation) {
  Harness h(BatchingOptions(8, 60s));
  auto call = h.Send(1, kWidth, [](InferenceRequest& r) { r.deadline = r.arrival + 60s; });
  h.scheduler().Cancel(call->id.value());
  EXPECT_EQ(call->Await().status.code(), StatusCode::kCancelled);
  EXPECT_EQ(Failures(h, FailureReason::kCancelled), 1u);
  EXPECT_EQ(Failures(h, FailureReason::kTimeout), 0u);
}

TEST(Lifecycle, DrainFinishesAcceptedWorkThenRefusesNew) {
  Harness h(NoBatchingOptions(4));
  // Each batch takes a while, so the drain has work to wait for.
  h.backend.SetLatency(20ms);
  std::vector<std::shared_ptr<Call>> accepted;
  for (int i = 0; i < 5; ++i) accepted.push_back(h.Send(1 + i % 4));
  EXPECT_TRUE(h.scheduler().Drain(Clock::now() + kPatience));
  for (const auto& call : accepted) {
    ASSERT_TRUE(call->answered());
    ExpectOwnOutputs(*call, call->result.get());
  }
  EXPECT_EQ(h.scheduler().pending(), 0u);
  auto refused = h.Send(1);
  ASSERT_FALSE(refused->id.ok());
  EXPECT_EQ(refused->id.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(refused->completions.load(), 0);
  EXPECT_EQ(Failures(h, FailureReason::kUnavailable), 1u);
}

TEST(Lifecycle, DrainPastItsDeadlineFailsWhatIsStillQueued) {
  Harness h(NoBatchingOptions(4));
  auto running = h.SendAndHold(1);
  auto queued_a = h.Send(2);
  auto queued_b = h.Send(1);
  // The running batch is held, so this grace period always runs out.
  constexpr auto kGrace = 50ms;
  EXPECT_FALSE(h.scheduler().Drain(Clock::now() + kGrace));
  for (const auto& call : {queued_a, queued_b}) {
    ASSERT_TRUE(call->answered());
    EXPECT_EQ(call->result.get().status.code(), StatusCode::kUnavailable);
  }
  EXPECT_FALSE(running->answered());
  EXPECT_EQ(h.scheduler().pending(), 1u);
  h.backend.Release();
  ExpectOwnOutputs(*running, running->Await());
  EXPECT_TRUE(h.scheduler().Drain(Clock::now() + kPatience));
  EXPECT_FALSE(WasExecuted(h, *queued_a));
  EXPECT_EQ(h.gauge.value.load(), 0);
}

TEST(Lifecycle, DestructionAnswersQueuedRequestsAndFinishesRunningOnes) {
  Harness h(NoBatchingOptions(4));
  auto running = h.SendAndHold(1);
  auto queued = h.Send(1);
  std::thread destroyer([&] { h.DestroyScheduler(); });
  // Answered before the destructor waits for the held batch.
  EXPECT_EQ(queued->Await().status.code(), StatusCode::kUnavailable);
  EXPECT_FALSE(running->answered());
  h.backend.Release();
  destroyer.join();
  ExpectOwnOutputs(*running, running->Await());
  EXPECT_EQ(h.gauge.value.load(), 0);
}

TEST(Lifecycle, ExecutorFailureFailsTheWholeBatchWithInternal) {
  Harness h(BatchingOptions(8, 0us));
  auto running = h.SendAndHold(1);
  h.backend.FailNext(Unavailable("device lost"));
  std::vector<std::shared_ptr<Call>> batch = {h.Send(1), h.Send(2), h.Send(1)};
  h.backend.Release();
  ExpectOwnOutputs(*running, running->Await());
  for (const auto& call : batch) {
    Outcome outcome = call->Await();
    EXPECT_EQ(outcome.status.code(), StatusCode::kInternal);
    EXPECT_NE(outcome.status.message().find("device lost"), std::string::npos);
    EXPECT_TRUE(outcome.outputs.empty());
  }
  EXPECT_EQ(Failures(h, FailureReason::kInternal), batch.size());
  EXPECT_EQ(h.stats.Snapshot().execution_count, 1u);  // the failed batch is not counted
  auto after = h.Send(3);  // the instance keeps serving
  ExpectOwnOutputs(*after, after->Await());
}

TEST(Lifecycle, BadOutputShapeAndOversizedBatchFailCleanly) {
  // Room for 2 rows of kWidth: a 3-row request passes max_batch_size but not the buffer.
  Harness h(BatchingOptions(4, 0us), 1, /*capacity_floats=*/2 * kWidth);
  auto too_big = h.Send(3);
  EXPECT_EQ(too_big->Await().status.code(), StatusCode::kInvalidArgument);
  auto fits = h.Send(2);
  ExpectOwnOutputs(*fits, fits->Await());
  h.backend.ReportWrongOutputRows();
  auto mismatched = h.Send(1);
  Outcome outcome = mismatched->Await();
  EXPECT_EQ(outcome.status.code(), StatusCode::kInternal) << outcome.status.ToString();
  EXPECT_EQ(Failures(h, FailureReason::kInvalidInput), 1u);
  EXPECT_EQ(Failures(h, FailureReason::kInternal), 1u);
}

TEST(Lifecycle, CreateRejectsInconsistentOptions) {
  ModelStats stats;
  auto create = [&](SchedulerOptions options, int instances, ModelStats* s) {
    FakeBackend backend;
    std::vector<std::unique_ptr<ExecutorInstance>> fakes;
    for (int i = 0; i < instances; ++i) {
      fakes.push_back(std::make_unique<FakeInstance>(&backend, 16, BatchLayout::kRows));
    }
    return Scheduler::Create(std::move(options), std::move(fakes), s).status().code();
  };
  const SchedulerOptions good = BatchingOptions(4, 0us, {2, 4});
  EXPECT_EQ(create(good, 1, &stats), StatusCode::kOk);
  EXPECT_EQ(create(good, 0, &stats), StatusCode::kInvalidArgument);
  EXPECT_EQ(create(good, 1, nullptr), StatusCode::kInvalidArgument);
  SchedulerOptions preferred_too_large = BatchingOptions(4, 0us, {8});
  EXPECT_EQ(create(preferred_too_large, 1, &stats), StatusCode::kInvalidArgument);
  SchedulerOptions no_outputs = good;
  no_outputs.output_types.clear();
  EXPECT_EQ(create(no_outputs, 1, &stats), StatusCode::kInvalidArgument);
  SchedulerOptions bad_default = good;
  bad_default.priority_levels = 2;
  bad_default.default_priority_level = 3;
  EXPECT_EQ(create(bad_default, 1, &stats), StatusCode::kInvalidArgument);
  SchedulerOptions packed_without_batch = BatchingOptions(0, 0us);
  packed_without_batch.tokens = PackedLayout(0);
  EXPECT_EQ(create(packed_without_batch, 1, &stats), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ltserve::testing
