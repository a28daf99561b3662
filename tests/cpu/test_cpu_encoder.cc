// The CPU executor on token plans (transformer encoders) against PyTorch's own module in
// float64, one sequence at a time, on fresh random packed batches of mixed lengths.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/cpu_executor.h"
#include "test_models.h"
#include "torch/torch_loader.h"

namespace ltserve {
namespace {

using testing::EncoderModel;

// fp32 against float64: the bound for encoders on the CPU. Softmax over 128 keys and
// LayerNorm over 768 values add a few dozen fp32 roundings per output, ~1e-6 relative.
constexpr double kEncoderTolerance = 1e-4;

struct Executor {
  std::unique_ptr<ExecutorFactory> factory;
  std::unique_ptr<ExecutorInstance> instance;
};

Executor MakeExecutor(const ModelSpec& spec) {
  Executor executor;
  Result<LoadedModel> loaded = LoadTorchScriptModel(spec);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  if (!loaded.ok()) return executor;
  EXPECT_NE(loaded->plan, nullptr) << loaded->lowering_report;
  Result<std::unique_ptr<ExecutorFactory>> cpu =
      CreateCpuExecutorFactory(loaded->plan, spec, loaded->token_layout);
  EXPECT_TRUE(cpu.ok()) << cpu.status().ToString();
  if (!cpu.ok()) return executor;
  executor.factory = std::move(cpu).value();
  Result<std::unique_ptr<ExecutorInstance>> instance = executor.factory->CreateInstance(0);
  EXPECT_TRUE(instance.ok()) << instance.status().ToString();
  if (instance.ok()) executor.instance = std::move(instance).value();
  return executor;
}

Status ExecuteSequences(ExecutorInstance& instance, const std::vector<std::int32_t>& lengths) {
  BatchShape shape;
  shape.batch_size = static_cast<std::int64_t>(lengths.size());
  shape.sequence_lengths = lengths;
  return instance.Execute(shape, nullptr);
}

std::int64_t TotalTokens(const std::vector<std::int32_t>& lengths) {
  return std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
}

// Runs `lengths` as one packed batch of fresh random tokens; returns input and output.
std::tuple<at::Tensor, at::Tensor> RunBatch(ExecutorInstance& instance, const EncoderModel& model,
                                            const std::vector<std::int32_t>& lengths,
                                            std::mt19937& rng) {
  const at::Tensor tokens =
      testing::RandomInput(rng, TotalTokens(lengths), {model.d_in}, at::kFloat);
  testing::Stage(instance, 0, tokens);
  Status status = ExecuteSequences(instance, lengths);
  EXPECT_TRUE(status.ok()) << status.ToString();
  if (!status.ok()) return {tokens, at::Tensor()};
  return {tokens, testing::OutputTensor(instance, 0, at::kFloat)};
}

// The module's own forward on one sequence [len, d_in], in float64, as [len, d_out].
at::Tensor Reference(const ModelSpec& spec, const EncoderModel& model, const at::Tensor& sequence) {
  const at::Tensor batched = model.batch_first ? sequence.unsqueeze(0) : sequence.unsqueeze(1);
  return testing::ReferenceForward(spec.model_file, {batched}).at(0).reshape({-1, model.d_out});
}

void ExpectEachSequenceMatches(const ModelSpec& spec, const EncoderModel& model,
                               ExecutorInstance& instance, const std::vector<std::int32_t>& lengths,
                               std::mt19937& rng) {
  // A first run over the whole capacity, poisoned, so any row the checked run skips is NaN.
  const std::int64_t capacity = MakeTokenLayout(spec, std::nullopt).value().max_batch_tokens;
  const std::vector<std::int32_t> full(
      1, static_cast<std::int32_t>(std::min<std::int64_t>(capacity, 64)));
  RunBatch(instance, model, full, rng);
  testing::PoisonOutput(instance, 0, at::kFloat);

  const auto [tokens, output] = RunBatch(instance, model, lengths, rng);
  ASSERT_TRUE(output.defined());
  ASSERT_EQ(output.sizes(), (at::IntArrayRef{TotalTokens(lengths), model.d_out}));
  std::int64_t offset = 0;
  for (std::int32_t length : lengths) {
    if (length == 0) continue;  // a row that was all padding: no tokens, nothing to compare
    SCOPED_TRACE("sequence of " + std::to_string(length) + " at token " + std::to_string(offset));
    const at::Tensor reference = Reference(spec, model, tokens.narrow(0, offset, length));
    EXPECT_LE(testing::MaxRelativeError(output.narrow(0, offset, length), reference),
              kEncoderTolerance);
    offset += length;
  }
}

class EncoderCpuTest : public ::testing::TestWithParam<std::tuple<EncoderModel, std::string>> {};

TEST_P(EncoderCpuTest, MixedLengthBatchMatchesFloat64ForwardPerSequence) {
  const auto& [model, mode] = GetParam();
  const ModelSpec spec = testing::MakeEncoderSpec(model, mode);
  Executor executor = MakeExecutor(spec);
  ASSERT_NE(executor.instance, nullptr);
  const std::uint32_t seed = testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  ExpectEachSequenceMatches(spec, model, *executor.instance, {7, 1, 128}, rng);
  ExpectEachSequenceMatches(spec, model, *executor.instance, {1}, rng);
}

INSTANTIATE_TEST_SUITE_P(AllEncoders, EncoderCpuTest,
                         ::testing::ValuesIn(testing::EncoderModelModes()), [](const auto& info) {
                           return std::get<0>(info.param).name + "_" + std::get<1>(info.param);
                         });

TEST(EncoderCpuBatchTest, LongestDefaultSequenceMatches) {
  const EncoderModel& model = testing::FindEncoderModel("enc_pre_gelu");
  const ModelSpec spec = testing::MakeEncoderSpec(model, "trace");
  Executor executor = MakeExecutor(spec);
  ASSERT_NE(executor.instance, nullptr);
  std::mt19937 rng(testing::FreshSeed());
  ExpectEachSequenceMatches(spec, model, *executor.instance,
                            {static_cast<std::int32_t>(kDefaultMaxSequenceLength)}, rng);
}

// Attention never looks across sequences and every other op is per token, so a request's
// output must not depend on what it is batched with, beyond rounding: ATen's fp32 GEMM picks
// its blocking and vector kernels by row count, so a row's sums can round differently in a
// batch of 61 rows than alone (seen: up to ~1e-6 relative; never bit-equal on this machine).
constexpr double kBatchingTolerance = 1e-5;
TEST(EncoderCpuBatchTest, EachSequenceInAMixedBatchGetsWhatItGetsAlone) {
  for (const char* name : {"enc_post_relu", "seq_wrapped"}) {
    SCOPED_TRACE(name);
    const EncoderModel& model = testing::FindEncoderModel(name);
    Executor executor = MakeExecutor(testing::MakeEncoderSpec(model, "script"));
    ASSERT_NE(executor.instance, nullptr);
    std::mt19937 rng(testing::FreshSeed());
    const std::vector<std::int32_t> lengths = {5, 1, 13, 2, 40};
    const auto [tokens, batched] = RunBatch(*executor.instance, model, lengths, rng);
    ASSERT_TRUE(batched.defined());
    std::int64_t offset = 0;
    for (std::int32_t length : lengths) {
      testing::Stage(*executor.instance, 0, tokens.narrow(0, offset, length).contiguous());
      ASSERT_TRUE(ExecuteSequences(*executor.instance, {length}).ok());
      const at::Tensor alone = testing::OutputTensor(*executor.instance, 0, at::kFloat);
      EXPECT_LE(testing::MaxRelativeError(batched.narrow(0, offset, length), alone),
                kBatchingTolerance)
          << "sequence of " << length;
      offset += length;
    }
  }
}

ModelSpec SmallEncoderSpec() {
  return testing::MakeEncoderSpec(testing::FindEncoderModel("enc_post_relu"), "script");
}

TEST(EncoderCpuCapacityTest, InstancesHoldTheLayoutsTokenBudget) {
  ModelSpec spec = SmallEncoderSpec();
  Result<LoadedModel> loaded = LoadTorchScriptModel(spec);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_TRUE(loaded->token_layout.has_value()) << loaded->lowering_report;
  EXPECT_EQ(loaded->token_layout->max_batch_tokens,
            testing::kEncoderMaxBatch * kDefaultMaxSequenceLength);
  // Without its layout a token plan has no budget to size instances by.
  Result<std::unique_ptr<ExecutorFactory>> factory =
      CreateCpuExecutorFactory(loaded->plan, spec, std::nullopt);
  ASSERT_FALSE(factory.ok());
  EXPECT_EQ(factory.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(factory.status().message().find("token budget"), std::string::npos);
}

TEST(EncoderCpuCapacityTest, BatchesOverTheTokenBudgetAreRejected) {
  ModelSpec spec = SmallEncoderSpec();
  constexpr std::int64_t kBudget = 16;
  spec.options.max_tokens_per_batch = kBudget;
  Executor executor = MakeExecutor(spec);
  ASSERT_NE(executor.instance, nullptr);
  const std::size_t token_bytes = 64 * sizeof(float);
  EXPECT_TRUE(executor.instance->InputBuffer(0, kBudget * token_bytes).ok());
  Result<std::span<std::byte>> over =
      executor.instance->InputBuffer(0, (kBudget + 1) * token_bytes);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  Status status = ExecuteSequences(*executor.instance, {10, 7});
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_TRUE(executor.instance->OutputShape(0).empty());
  EXPECT_TRUE(ExecuteSequences(*executor.instance, {10, 6}).ok());
}

TEST(EncoderCpuShapeTest, BadSequenceLengthsAreInvalidArgument) {
  Executor executor = MakeExecutor(SmallEncoderSpec());
  ASSERT_NE(executor.instance, nullptr);
  const std::vector<std::int32_t> two = {3, 4};
  BatchShape shape;
  shape.batch_size = 3;  // three samples, two lengths
  shape.sequence_lengths = two;
  EXPECT_EQ(executor.instance->Execute(shape, nullptr).code(), StatusCode::kInvalidArgument);
  shape.batch_size = 2;
  shape.sequence_lengths = {};
  EXPECT_EQ(executor.instance->Execute(shape, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ExecuteSequences(*executor.instance, {-2}).code(), StatusCode::kInvalidArgument);
}

// A request row that is all padding reaches the executor as a sequence of 0 tokens.
TEST(EncoderCpuShapeTest, EmptySequencesAmongOthersTakeNoTokens) {
  const EncoderModel& model = testing::FindEncoderModel("enc_post_relu");
  const ModelSpec spec = testing::MakeEncoderSpec(model, "script");
  Executor executor = MakeExecutor(spec);
  ASSERT_NE(executor.instance, nullptr);
  const std::uint32_t seed = testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  ExpectEachSequenceMatches(spec, model, *executor.instance, {0, 5, 0, 0, 3, 0}, rng);
}

TEST(EncoderCpuShapeTest, BatchOfOnlyEmptySequencesGivesAnEmptyOutput) {
  Executor executor = MakeExecutor(SmallEncoderSpec());
  ASSERT_NE(executor.instance, nullptr);
  ASSERT_TRUE(executor.instance->InputBuffer(0, 0).ok());
  Status status = ExecuteSequences(*executor.instance, {0, 0, 0});
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(executor.instance->OutputShape(0), (std::vector<std::int64_t>{0, 64}));
  EXPECT_TRUE(executor.instance->Output(0).empty());
}

}  // namespace
}  // namespace ltserve
