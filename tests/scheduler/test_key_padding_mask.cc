// Token models with a key-padding mask (input 1, BOOL [batch, seq], true = padding): staging
// copies only each sample's real tokens, wherever they are, as one sequence; every output comes
// back as [batch, seq, ...] with the executor's values at the real tokens and zeros at the
// padded ones; malformed masks are refused at Enqueue.
#include <gtest/gtest.h>

#include "harness.h"

namespace ltserve::testing {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t kMaxTokens = 48;

// Column 0 of the call's real tokens, in order: what the executor must have been given.
std::vector<float> RealFirstValues(const Call& call) {
  std::vector<float> values;
  for (std::int64_t r = 0; r < call.rows; ++r) {
    if (call.mask[r] == 0) values.push_back(call.input[r * call.width]);
  }
  return values;
}

Status EnqueueError(const Call& call) {
  EXPECT_FALSE(call.id.ok());
  return call.id.ok() ? Status::Ok() : call.id.status();
}

void ExpectInvalid(const Call& call, const std::string& fragment) {
  const Status status = EnqueueError(call);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

TEST(KeyPaddingMask, TrailingPaddingIsDroppedBeforeTheExecutor) {
  Harness h(MaskedOptions(kMaxTokens));
  auto call = h.SendMasked(2, 6, {0, 0, 0, 0, 1, 1,  //
                                  0, 0, 0, 0, 0, 0});
  ExpectOwnOutputs(*call, call->Await());
  std::vector<ExecutedBatch> batches = h.backend.batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].batch_size, 2);
  EXPECT_EQ(batches[0].sequence_lengths, (std::vector<std::int32_t>{4, 6}));
  EXPECT_EQ(batches[0].first_values, RealFirstValues(*call));
}

TEST(KeyPaddingMask, PaddingInTheMiddleLeavesTheRealTokensAsOneSequence) {
  Harness h(MaskedOptions(kMaxTokens));
  auto call = h.SendMasked(1, 7, {1, 0, 0, 1, 1, 0, 1});
  ExpectOwnOutputs(*call, call->Await());
  std::vector<ExecutedBatch> batches = h.backend.batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].sequence_lengths, (std::vector<std::int32_t>{3}));
  EXPECT_EQ(batches[0].first_values, RealFirstValues(*call));
}

TEST(KeyPaddingMask, FullyPaddedRowIsAnEmptySequenceWithZeroOutputs) {
  Harness h(MaskedOptions(kMaxTokens));
  auto call = h.SendMasked(3, 5, {0, 0, 1, 0, 0,  //
                                  1, 1, 1, 1, 1,  //
                                  0, 1, 1, 1, 1});
  ExpectOwnOutputs(*call, call->Await());
  std::vector<ExecutedBatch> batches = h.backend.batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].sequence_lengths, (std::vector<std::int32_t>{4, 0, 1}));
  EXPECT_EQ(batches[0].first_values, RealFirstValues(*call));
}

TEST(KeyPaddingMask, BatchOfOnlyPaddingRunsNoTokensAndAnswersZeros) {
  Harness h(MaskedOptions(kMaxTokens));
  auto call = h.SendMasked(2, 3, {1, 1, 1, 1, 1, 1});
  ExpectOwnOutputs(*call, call->Await());
  std::vector<ExecutedBatch> batches = h.backend.batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].sequence_lengths, (std::vector<std::int32_t>{0, 0}));
  EXPECT_TRUE(batches[0].first_values.empty());
}

TEST(KeyPaddingMask, MaskedAndUnmaskedRequestsOfDifferentLengthsBatchTogether) {
  Harness h(MaskedOptions(kMaxTokens));
  h.backend.Hold();
  auto first = h.SendMasked(1, 2, {0, 1});
  ASSERT_TRUE(h.backend.WaitForHeld(1, kPatience));
  // 2x5 + 9 + 3x4 = 31 padded tokens fit in 48; 14 real tokens reach the executor.
  std::vector<std::shared_ptr<Call>> queued = {
      h.SendMasked(2, 5, {0, 0, 0, 1, 1, 0, 0, 0, 0, 0}),
      h.SendMasked(1, 9, std::vector<std::uint8_t>(9, 0)),
      h.SendMasked(3, 4, {1, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1})};
  h.backend.Release();
  ExpectOwnOutputs(*first, first->Await());
  for (const auto& call : queued) ExpectOwnOutputs(*call, call->Await());
  std::vector<ExecutedBatch> batches = h.backend.batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[1].sequence_lengths, (std::vector<std::int32_t>{3, 5, 9, 2, 0, 3}));
  std::vector<float> expected;
  for (const auto& call : queued) {
    std::vector<float> real = RealFirstValues(*call);
    expected.insert(expected.end(), real.begin(), real.end());
  }
  EXPECT_EQ(batches[1].first_values, expected);
}

TEST(KeyPaddingMask, ATokenBudgetCountsPaddedTokensToo) {
  Harness h(MaskedOptions(kMaxTokens));
  // 7 x 7 = 49 tokens, 1 of them real: the budget is for the request's full [batch, seq].
  std::vector<std::uint8_t> mask(49, 1);
  mask[0] = 0;
  ExpectInvalid(*h.SendMasked(7, 7, mask), "49 tokens exceed");
}

TEST(KeyPaddingMask, MissingMaskIsInvalidArgument) {
  Harness h(MaskedOptions(kMaxTokens));
  ExpectInvalid(*h.SendSequences(1, 4), "takes a key-padding mask (input 1");
}

TEST(KeyPaddingMask, MaskLongerThanTheSequenceIsInvalidArgument) {
  Harness h(MaskedOptions(kMaxTokens));
  auto call = h.SendMasked(2, 3, std::vector<std::uint8_t>(6, 0), [](InferenceRequest& r) {
    r.inputs[1].shape = {2, 4};
  });
  ExpectInvalid(*call, "must be [2, 3], [batch, seq] of input 0; got [2, 4]");
}

TEST(KeyPaddingMask, MaskWithATokenDimIsInvalidArgument) {
  Harness h(MaskedOptions(kMaxTokens));
  auto call = h.SendMasked(2, 3, std::vector<std::uint8_t>(6, 0), [](InferenceRequest& r) {
    r.inputs[1].shape = {2, 3, 1};
  });
  ExpectInvalid(*call, "got [2, 3, 1]");
}

TEST(KeyPaddingMask, MaskOfWiderElementsThanBoolIsInvalidArgument) {
  Harness h(MaskedOptions(kMaxTokens));
  // An INT32 mask of the right shape: four bytes per token.
  static const std::vector<std::int32_t> wide(6, 0);
  auto call = h.SendMasked(2, 3, std::vector<std::uint8_t>(6, 0), [](InferenceRequest& r) {
    r.inputs[1].bytes = std::as_bytes(std::span<const std::int32_t>(wide));
  });
  ExpectInvalid(*call, "BOOL [batch, seq], true = padding) holds 24 bytes for 6 tokens");
}

// Why Scheduler::Create refuses `options`, or OK.
Status CreateStatus(const SchedulerOptions& options) {
  std::vector<std::unique_ptr<ExecutorInstance>> instances;
  instances.push_back(std::make_unique<FakeInstance>(nullptr, 16, BatchLayout::kPackedSequences));
  PendingGauge gauge;
  ModelStats stats(&gauge);
  auto created = Scheduler::Create(options, std::move(instances), &stats);
  return created.ok() ? Status::Ok() : created.status();
}

TEST(KeyPaddingMask, OptionsWithoutATokenBudgetAreRefused) {
  SchedulerOptions options = MaskedOptions(kMaxTokens);
  options.tokens->max_batch_tokens = 0;
  const Status status = CreateStatus(options);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("token budget"), std::string::npos) << status.ToString();
}

TEST(KeyPaddingMask, OptionsWithoutOutputTokenBytesAreRefused) {
  SchedulerOptions options = MaskedOptions(kMaxTokens);
  options.tokens->output_token_bytes.pop_back();
  const Status status = CreateStatus(options);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("bytes of one token"), std::string::npos) << status.ToString();
}

}  // namespace
}  // namespace ltserve::testing
