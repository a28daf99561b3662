// How batches form: size limits, the queue delay, preferred sizes, shapes, order, priorities,
// instances, and many concurrent clients each getting exactly their own rows back.
#include <gtest/gtest.h>

#include <thread>

#include "harness.h"

namespace ltserve::testing {
namespace {

using namespace std::chrono_literals;

// A queue delay no test waits out: batches that go must go for another reason.
constexpr auto kNeverDelay = 60s;

TEST(Batching, QueuedRequestsFormBatchesUpToMaxBatchSize) {
  Harness h(BatchingOptions(/*max_batch_size=*/8, /*max_queue_delay=*/0us));
  auto first = h.SendAndHold(1);
  // While the only instance is busy: 3 + 3 fit in 8, the next 3 does not, so it starts the
  // following batch with the 1 behind it.
  std::vector<std::shared_ptr<Call>> queued = {h.Send(3), h.Send(3), h.Send(3), h.Send(1)};
  h.backend.Release();
  ExpectOwnOutputs(*first, first->Await());
  for (const auto& call : queued) ExpectOwnOutputs(*call, call->Await());
  EXPECT_EQ(ExecutedBatchSizes(h.backend), (std::vector<std::int64_t>{1, 6, 4}));
  EXPECT_EQ(ExecutedFirstValues(h.backend, 1), FirstValues(queued));
}

TEST(Batching, FullBatchGoesWithoutWaitingForTheDelay) {
  Harness h(BatchingOptions(4, kNeverDelay));
  std::vector<std::shared_ptr<Call>> calls = {h.Send(1), h.Send(2), h.Send(1)};
  for (const auto& call : calls) ExpectOwnOutputs(*call, call->Await());
  EXPECT_EQ(ExecutedBatchSizes(h.backend), (std::vector<std::int64_t>{4}));
}

TEST(Batching, DelayIsCountedFromTheOldestRequest) {
  // Long enough that the second send lands inside the window on two loaded cores.
  constexpr auto kDelay = 400ms;
  // How late a worker may wake on two loaded cores.
  constexpr auto kLateness = 300ms;
  Harness h(BatchingOptions(8, kDelay));
  auto oldest = h.Send(1);
  // The batch stays open for the delay: nothing may run before it.
  EXPECT_EQ(oldest->result.wait_for(kDelay / 4), std::future_status::timeout);
  auto newer = h.Send(2);
  Outcome a = oldest->Await();
  Outcome b = newer->Await();
  ExpectOwnOutputs(*oldest, a);
  ExpectOwnOutputs(*newer, b);
  EXPECT_EQ(ExecutedBatchSizes(h.backend), (std::vector<std::int64_t>{3}));
  EXPECT_GE(a.answered - oldest->sent, kDelay);
  EXPECT_LE(a.answered - oldest->sent, kDelay + kLateness);
  // The newer request did not get a full delay of its own.
  EXPECT_LT(b.answered - newer->sent, kDelay);
}

TEST(Batching, PreferredSizesGoAtOnce) {
  Harness h(BatchingOptions(16, kNeverDelay, /*preferred=*/{4}));
  auto first = h.Send(4);  // a preferred size by itself: runs without waiting
  ExpectOwnOutputs(*first, first->Await());
  auto running = h.SendAndHold(4);
  // Queued behind it: 1 + 2 + 1 reaches the preferred 4; 3 + 2 would pass the largest
  // preferred size, so 3 goes alone; the 2 left waits for more requests or the delay.
  std::vector<std::shared_ptr<Call>> queued = {h.Send(1), h.Send(2), h.Send(1), h.Send(3),
                                               h.Send(2)};
  h.backend.Release();
  for (std::size_t i = 0; i < 4; ++i) ExpectOwnOutputs(*queued[i], queued[i]->Await());
  // Short: only to see that the last request is still waiting for its batch to fill.
  constexpr auto kStillWaiting = 100ms;
  EXPECT_EQ(queued[4]->result.wait_for(kStillWaiting), std::future_status::timeout);
  EXPECT_TRUE(h.scheduler().Drain(Clock::now() + kPatience));  // a drain sends it at once
  ExpectOwnOutputs(*queued[4], queued[4]->Await());
  ExpectOwnOutputs(*running, running->Await());
  EXPECT_EQ(ExecutedBatchSizes(h.backend), (std::vector<std::int64_t>{4, 4, 4, 3, 2}));
}

TEST(Batching, OnlyRequestsWithTheSameSampleShapeBatchTogether) {
  Harness h(BatchingOptions(8, 0us));
  auto first = h.SendAndHold(1, 8);
  std::vector<std::shared_ptr<Call>> queued = {h.Send(1, 8), h.Send(2, 12), h.Send(1, 8),
                                               h.Send(2, 8)};
  h.backend.Release();
  for (const auto& call : queued) ExpectOwnOutputs(*call, call->Await());
  ExpectOwnOutputs(*first, first->Await());
  // FIFO is kept: the width-12 request ends the batch before it instead of being skipped.
  EXPECT_EQ(ExecutedBatchSizes(h.backend), (std::vector<std::int64_t>{1, 1, 2, 3}));
  std::vector<ExecutedBatch> batches = h.backend.batches();
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(batches[2].input_dims, (std::vector<std::vector<std::int64_t>>{{12}}));
  EXPECT_EQ(batches[3].input_dims, (std::vector<std::vector<std::int64_t>>{{8}}));
}

TEST(Batching, OrderIsKeptWithinAPriorityLevel) {
  for (bool dynamic : {false, true}) {
    SCOPED_TRACE(dynamic ? "dynamic batching" : "one request at a time");
    Harness h(dynamic ? BatchingOptions(5, 0us) : NoBatchingOptions(5));
    auto first = h.SendAndHold(1);
    std::vector<std::shared_ptr<Call>> queued;
    for (std::int64_t rows : {2, 1, 3, 1, 1, 4, 2, 5, 1}) queued.push_back(h.Send(rows));
    h.backend.Release();
    for (const auto& call : queued) ExpectOwnOutputs(*call, call->Await());
    EXPECT_EQ(ExecutedFirstValues(h.backend, 1), FirstValues(queued));
    // Batched, a batch ends where the next request would pass max_batch_size 5.
    const std::vector<std::int64_t> expected_sizes =
        dynamic ? std::vector<std::int64_t>{1, 3, 5, 4, 2, 5, 1}
                : std::vector<std::int64_t>{1, 2, 1, 3, 1, 1, 4, 2, 5, 1};
    EXPECT_EQ(ExecutedBatchSizes(h.backend), expected_sizes);
  }
}

TEST(Batching, HigherPriorityLevelsGoFirst) {
  SchedulerOptions options = BatchingOptions(4, 0us);
  options.priority_levels = 3;
  options.default_priority_level = 2;
  Harness h(options);
  auto with_priority = [](std::uint32_t p) { return [p](InferenceRequest& r) { r.priority = p; }; };
  auto first = h.SendAndHold(4);
  // Each request fills a batch, so the execution order is the queue order.
  auto low_a = h.Send(4, kWidth, with_priority(3));
  auto default_b = h.Send(4, kWidth, with_priority(0));
  auto high_c = h.Send(4, kWidth, with_priority(1));
  auto low_d = h.Send(4, kWidth, with_priority(3));
  auto high_e = h.Send(4, kWidth, with_priority(1));
  auto out_of_range_f = h.Send(4, kWidth, with_priority(7));  // Triton: the default level
  h.backend.Release();
  std::vector<std::shared_ptr<Call>> expected = {high_c, high_e, default_b, out_of_range_f,
                                                 low_a, low_d};
  for (const auto& call : expected) ExpectOwnOutputs(*call, call->Await());
  EXPECT_EQ(ExecutedFirstValues(h.backend, 1), FirstValues(expected));
}

TEST(Batching, InstancesExecuteConcurrently) {
  Harness h(NoBatchingOptions(4), /*instances=*/3);
  h.backend.Hold();
  std::vector<std::shared_ptr<Call>> calls = {h.Send(1), h.Send(2), h.Send(3)};
  // All three are inside Execute at once: one worker per instance.
  EXPECT_TRUE(h.backend.WaitForHeld(3, kPatience));
  h.backend.Release();
  for (const auto& call : calls) ExpectOwnOutputs(*call, call->Await());
}

TEST(Batching, ModelWithoutBatchDimensionRunsFullShapesOneAtATime) {
  SchedulerOptions options = BatchingOptions(0, 0us);  // dynamic_batching has no effect
  Harness h(options);
  auto first = h.SendAndHold(3, 5);
  auto second = h.Send(2, 9);
  auto third = h.Send(2, 9);
  h.backend.Release();
  for (const auto& call : {first, second, third}) ExpectOwnOutputs(*call, call->Await());
  std::vector<ExecutedBatch> batches = h.backend.batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].batch_size, 1);
  EXPECT_EQ(batches[0].input_dims, (std::vector<std::vector<std::int64_t>>{{3, 5}}));
  EXPECT_EQ(batches[1].input_dims, (std::vector<std::vector<std::int64_t>>{{2, 9}}));
  EXPECT_EQ(h.stats.Snapshot().by_batch_size.at(1).compute_infer.count, 3u);
}

TEST(Batching, ManyClientsEachGetTheirOwnRowsExactlyOnce) {
  constexpr int kThreads = 8;
  constexpr int kRequestsPerThread = 150;
  // A short window and a compute time comparable to it, so batches form and also overlap.
  Harness h(BatchingOptions(16, 500us), /*instances=*/2);
  h.backend.SetLatency(200us);
  std::vector<std::vector<std::shared_ptr<Call>>> sent(kThreads);
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng(std::random_device{}());
      for (int i = 0; i < kRequestsPerThread; ++i) {
        const std::int64_t rows = 1 + static_cast<std::int64_t>(rng() % 4);
        const std::int64_t width = rng() % 3 == 0 ? 12 : kWidth;  // two sample shapes mixed
        sent[t].push_back(h.Send(rows, width));
      }
    });
  }
  for (std::thread& client : clients) client.join();
  std::uint64_t samples = 0;
  for (const auto& per_thread : sent) {
    for (const auto& call : per_thread) {
      ASSERT_TRUE(call->id.ok()) << call->id.status().ToString();
      ExpectOwnOutputs(*call, call->Await());
      samples += static_cast<std::uint64_t>(call->rows);
    }
  }
  EXPECT_TRUE(h.scheduler().Drain(Clock::now() + kPatience));
  for (const auto& per_thread : sent) {
    for (const auto& call : per_thread) EXPECT_EQ(call->completions.load(), 1);
  }
  std::vector<std::int64_t> sizes = ExecutedBatchSizes(h.backend);
  std::int64_t largest = 0;
  for (std::int64_t size : sizes) largest = std::max(largest, size);
  EXPECT_GT(largest, 4) << "no batch larger than one request formed";
  EXPECT_LE(largest, 16);

  const ModelStatsSnapshot stats = h.stats.Snapshot();
  const std::uint64_t requests = kThreads * kRequestsPerThread;
  EXPECT_EQ(stats.success.count, requests);
  EXPECT_EQ(stats.queue.count, requests);
  EXPECT_EQ(stats.compute_infer.count, requests);
  EXPECT_EQ(stats.fail.count, 0u);
  EXPECT_EQ(stats.inference_count, samples);
  EXPECT_EQ(stats.execution_count, sizes.size());
  std::uint64_t by_size = 0;
  for (const auto& [size, batch] : stats.by_batch_size) {
    by_size += batch.compute_infer.count;
    EXPECT_EQ(std::count(sizes.begin(), sizes.end(), size),
              static_cast<std::ptrdiff_t>(batch.compute_infer.count))
        << "batch size " << size;
  }
  EXPECT_EQ(by_size, sizes.size());
  EXPECT_EQ(h.gauge.value.load(), 0);
  EXPECT_EQ(h.scheduler().pending(), 0u);
}

}  // namespace
}  // namespace ltserve::testing
