// Token models: requests of different sequence lengths share a batch, packed without padding,
// up to the tokens an instance was sized for; each gets its own tokens back as [batch, seq, ...].
#include <gtest/gtest.h>

#include "harness.h"

namespace ltserve::testing {
namespace {

using namespace std::chrono_literals;

// Tokens one batch may hold in these tests: small, so the limit is reached before max_batch_size.
constexpr std::int64_t kMaxTokens = 40;

SchedulerOptions PackedOptions() {
  SchedulerOptions options = BatchingOptions(/*max_batch_size=*/8, /*max_queue_delay=*/0us);
  options.tokens = PackedLayout(kMaxTokens);
  return options;
}

TEST(PackedSequences, DifferentLengthsBatchUpToTheTokenLimit) {
  Harness h(PackedOptions());
  h.backend.Hold();
  auto first = h.SendSequences(1, 3);
  ASSERT_TRUE(h.backend.WaitForHeld(1, kPatience));
  // 10 + 7 + 6 tokens fit in 40; the next 18 would pass it and starts the following batch.
  std::vector<std::shared_ptr<Call>> queued = {h.SendSequences(2, 5), h.SendSequences(1, 7),
                                               h.SendSequences(3, 2), h.SendSequences(2, 9)};
  h.backend.Release();
  ExpectOwnOutputs(*first, first->Await());
  for (const auto& call : queued) ExpectOwnOutputs(*call, call->Await());
  std::vector<ExecutedBatch> batches = h.backend.batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[1].batch_size, 6);
  EXPECT_EQ(batches[1].sequence_lengths, (std::vector<std::int32_t>{5, 5, 7, 2, 2, 2}));
  EXPECT_EQ(batches[2].sequence_lengths, (std::vector<std::int32_t>{9, 9}));
  EXPECT_EQ(ExecutedFirstValues(h.backend, 1), FirstValues(queued));
  EXPECT_EQ(h.stats.Snapshot().inference_count, 9u);  // samples, not tokens
}

TEST(PackedSequences, DifferentTokenWidthsDoNotBatch) {
  Harness h(PackedOptions());
  h.backend.Hold();
  auto first = h.SendSequences(1, 2);
  ASSERT_TRUE(h.backend.WaitForHeld(1, kPatience));
  auto narrow = h.SendSequences(1, 4, kWidth);
  auto wide = h.SendSequences(1, 4, kWidth + 2);
  h.backend.Release();
  ExpectOwnOutputs(*first, first->Await());
  ExpectOwnOutputs(*narrow, narrow->Await());
  ExpectOwnOutputs(*wide, wide->Await());
  EXPECT_EQ(ExecutedBatchSizes(h.backend), (std::vector<std::int64_t>{1, 1, 1}));
}

TEST(PackedSequences, RequestsThatCannotBePackedAreRejected) {
  Harness h(PackedOptions());
  auto too_many_tokens = h.SendSequences(3, 14);  // 42 tokens
  auto no_sequence_dim = h.Send(2, kWidth, [](InferenceRequest& r) { r.inputs[0].shape = {2}; });
  auto empty_sequence = h.SendSequences(1, 0);
  for (const auto& call : {too_many_tokens, no_sequence_dim, empty_sequence}) {
    ASSERT_FALSE(call->id.ok());
    EXPECT_EQ(call->id.status().code(), StatusCode::kInvalidArgument) << call->id.status().ToString();
  }
  auto at_limit = h.SendSequences(4, 10);
  ExpectOwnOutputs(*at_limit, at_limit->Await());
}

TEST(PackedSequences, SequenceOverMaxSequenceLengthIsInvalidArgumentNamingBoth) {
  SchedulerOptions options = PackedOptions();
  options.tokens->max_sequence_length = 6;
  Harness h(options);
  auto too_long = h.SendSequences(1, 7);
  ASSERT_FALSE(too_long->id.ok());
  EXPECT_EQ(too_long->id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long->id.status().message().find(
                "sequence length 7 exceeds the model's max_sequence_length 6"),
            std::string::npos)
      << too_long->id.status().message();
  auto at_limit = h.SendSequences(2, 6);
  ExpectOwnOutputs(*at_limit, at_limit->Await());
}

TEST(PackedSequences, EmptySequenceIsInvalidArgumentSayingSo) {
  Harness h(PackedOptions());
  auto empty = h.SendSequences(2, 0);
  ASSERT_FALSE(empty->id.ok());
  EXPECT_EQ(empty->id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty->id.status().message().find("sequence length 0"), std::string::npos)
      << empty->id.status().message();
}

}  // namespace
}  // namespace ltserve::testing
