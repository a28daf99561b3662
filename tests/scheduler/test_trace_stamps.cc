// What the scheduler stamps on a sampled request (--trace-config): queue and compute times, in
// order, inside the request's own life; requests in one batch share their compute times.
#include <gtest/gtest.h>

#include "harness.h"
#include "trace/request_trace.h"

namespace ltserve::testing {
namespace {

using namespace std::chrono_literals;

std::int64_t Ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

constexpr TraceActivity kSchedulerActivities[] = {
    TraceActivity::kQueueStart, TraceActivity::kComputeStart, TraceActivity::kComputeInputEnd,
    TraceActivity::kComputeOutputStart, TraceActivity::kComputeEnd};

void ExpectStampedInOrder(const RequestTrace& trace, const Call& call, const Outcome& outcome) {
  std::int64_t previous = Ns(call.sent);
  for (TraceActivity activity : kSchedulerActivities) {
    const auto at = trace.At(activity);
    ASSERT_TRUE(at.has_value()) << TraceActivityName(activity);
    EXPECT_GE(*at, previous) << TraceActivityName(activity);
    previous = *at;
  }
  EXPECT_LE(previous, Ns(outcome.answered));
  // The front ends' activities are theirs to stamp.
  EXPECT_FALSE(trace.At(TraceActivity::kRequestStart).has_value());
  EXPECT_FALSE(trace.At(TraceActivity::kRequestEnd).has_value());
}

TEST(TraceStamps, WorkerRunRequestIsStampedInOrder) {
  Harness h(BatchingOptions(8, 0us));
  RequestTrace trace(1, "m", "1", "");
  auto call = h.Send(3, kWidth, [&](InferenceRequest& r) { r.trace = &trace; });
  const Outcome outcome = call->Await();
  ExpectOwnOutputs(*call, outcome);
  ExpectStampedInOrder(trace, *call, outcome);
}

TEST(TraceStamps, CallerRunRequestIsStampedInOrder) {
  SchedulerOptions options = BatchingOptions(8, 0us);
  options.run_on_caller_when_idle = true;
  Harness h(options);
  RequestTrace trace(1, "m", "1", "");
  Scheduler::ClaimedRun claimed;
  auto call = h.SendClaiming(2, &claimed, [&](InferenceRequest& r) { r.trace = &trace; });
  ASSERT_TRUE(claimed);
  h.scheduler().RunClaimed(claimed);
  const Outcome outcome = call->Await();
  ExpectOwnOutputs(*call, outcome);
  ExpectStampedInOrder(trace, *call, outcome);
}

TEST(TraceStamps, OneBatchSharesComputeTimesAndUntracedRequestsRunAlongside) {
  Harness h(BatchingOptions(8, 0us));
  auto held = h.SendAndHold();
  RequestTrace first(1, "m", "1", "");
  RequestTrace second(2, "m", "1", "");
  auto a = h.Send(1, kWidth, [&](InferenceRequest& r) { r.trace = &first; });
  auto untraced = h.Send(2);
  auto b = h.Send(1, kWidth, [&](InferenceRequest& r) { r.trace = &second; });
  h.backend.Release();
  ExpectOwnOutputs(*held, held->Await());
  ExpectOwnOutputs(*untraced, untraced->Await());
  const Outcome outcome_a = a->Await();
  const Outcome outcome_b = b->Await();
  ExpectOwnOutputs(*a, outcome_a);
  ExpectOwnOutputs(*b, outcome_b);
  ExpectStampedInOrder(first, *a, outcome_a);
  ExpectStampedInOrder(second, *b, outcome_b);
  ASSERT_EQ(ExecutedBatchSizes(h.backend), (std::vector<std::int64_t>{1, 4}))
      << "the three queued behind the held one ran as one batch";
  EXPECT_EQ(first.At(TraceActivity::kComputeStart), second.At(TraceActivity::kComputeStart));
  EXPECT_EQ(first.At(TraceActivity::kComputeEnd), second.At(TraceActivity::kComputeEnd));
  EXPECT_LT(*first.At(TraceActivity::kQueueStart), *second.At(TraceActivity::kQueueStart));
}

}  // namespace
}  // namespace ltserve::testing
