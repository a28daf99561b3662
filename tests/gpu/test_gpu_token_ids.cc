// Token-id plans (a Hugging Face encoder: embedding gather + LayerNorm, encoder layer, pooling,
// heads) on the GPU executor against the double reference (reference.h): each pooling, a tanh
// pooler, a Linear head and L2 normalisation, odd widths and head dims, empty sequences, ids
// at the tables' edges and beyond them (clamped, never read out of bounds), graph replay, and
// the errors of staging and loading. Every test skips, saying why, where no GPU is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <numeric>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "gpu/gpu_executor.h"
#include "model/token_layout.h"
#include "reference.h"
#include "test_support.h"

namespace ltserve {
namespace {

using plan::Activation;
using plan::Pooling;
using testing::Builder;
using testing::Random;
using testing::RelativeDifference;
using testing::RelativeError;
using testing::RoundTo;
using testing::Rng;
using testing::TokenIdInputs;

// ‖out − ref‖ / ‖ref‖ bounds, as for the encoder layers (test_gpu_encoder.cc): fp32 sums of at
// most a few hundred products; bf16 stores the embedding sum's tables, every intermediate of
// the layer, the pooled row and the head's output with an 8-bit mantissa (~2e-3 relative per
// rounding, a dozen of them, partly cancelling), plus the tanh GELU epilogue's difference from
// erf. Pooling and L2 normalisation accumulate in fp32 and add no more than one rounding each.
constexpr double kTolFp32 = 1e-4;
constexpr double kTolBf16 = 2e-2;
constexpr std::int64_t kMaxTokens = 512;  // buckets 1, 2, 4, ..., 512
constexpr int kMaxBatch = 8;

struct IdsCase {
  std::string name;
  std::int64_t d;
  std::int64_t heads;
  std::int64_t ffn;
  std::int64_t vocab;
  std::int64_t max_positions;
  std::int64_t types;  // 0: no token-type table (DistilBERT)
  std::optional<Pooling> pooling;  // none: per-token output
  bool tanh_pooler = false;        // Linear(d, d) + tanh after the pooling (BERT's pooler)
  std::int64_t head = 0;           // > 0: a Linear head of that many outputs
  bool l2 = false;
  std::string precision = "fp32";
  friend void PrintTo(const IdsCase& c, std::ostream* out) { *out << c.name << " " << c.precision; }
};

double Tolerance(const std::string& precision) { return precision == "fp32" ? kTolFp32 : kTolBf16; }

// Embedding, one post-norm encoder layer (BertLayer's order), then pooling and heads.
std::shared_ptr<const plan::Plan> TokenIdPlan(const IdsCase& c, float empty_value = -2.5f) {
  Builder b;
  const auto x = b.Value(c.d);
  plan::EmbeddingOp embedding;
  embedding.output = x;
  embedding.vocab_size = c.vocab;
  embedding.max_positions = c.max_positions;
  embedding.type_vocab_size = c.types;
  embedding.word = Random(c.vocab * c.d, 1.0f);
  embedding.position = Random(c.max_positions * c.d, 0.5f);
  embedding.token_type = Random(c.types * c.d, 0.5f);
  embedding.gamma = Random(c.d, 1.0f);
  embedding.beta = Random(c.d, 0.5f);
  b.plan->Append(embedding);
  b.plan->SetInput(x, plan::InputKind::kTokenIds);
  const auto qkv = b.Linear(x, 3 * c.d, true, Activation::kNone);
  const auto projected = b.Linear(b.Attention(qkv, c.heads), c.d, true, Activation::kNone);
  const auto h = b.LayerNorm(projected, x);
  const auto hidden = b.Linear(h, c.ffn, true, Activation::kGeluErf);
  plan::ValueId y = b.LayerNorm(b.Linear(hidden, c.d, true, Activation::kNone, h));
  if (c.pooling) {
    plan::PoolOp pool;
    pool.input = y;
    pool.output = b.Value(c.d);
    pool.pooling = *c.pooling;
    pool.empty_value = empty_value;
    b.plan->Append(pool);
    y = pool.output;
  }
  if (c.tanh_pooler) y = b.Linear(y, c.d, true, Activation::kTanh);
  if (c.head > 0) y = b.Linear(y, c.head, true, Activation::kNone);
  if (c.l2) {
    plan::L2NormalizeOp normalize;
    normalize.input = y;
    normalize.output = b.Value(b.plan->values()[y].width);
    b.plan->Append(normalize);
    y = normalize.output;
  }
  b.plan->SetOutput(y);
  const Status valid = b.plan->Validate();
  EXPECT_TRUE(valid.ok()) << valid.ToString();
  return b.plan;
}

// input_ids, attention_mask, token_type_ids as a Hugging Face export names them.
ModelSpec IdsSpec(const plan::Plan& plan, const std::string& precision) {
  ModelSpec spec;
  spec.name = "hf_encoder";
  spec.max_batch_size = kMaxBatch;
  spec.inputs = {TensorSpec{"input_ids", DataType::kInt64, {-1}},
                 TensorSpec{"attention_mask", DataType::kInt64, {-1}},
                 TensorSpec{"token_type_ids", DataType::kInt64, {-1}}};
  const bool pooled = plan.output_per_sequence();
  spec.outputs = {TensorSpec{"embedding", DataType::kFp32,
                             pooled ? std::vector<std::int64_t>{plan.output_width()}
                                    : std::vector<std::int64_t>{-1, plan.output_width()}}};
  spec.options = testing::Options({{"precision", precision},
                                    {"max_tokens_per_batch", std::to_string(kMaxTokens)},
                                    {"algo_candidates", "2"}});  // load time: not under test
  return spec;
}

// The layout the loader gives such a model.
std::optional<TokenLayout> IdsLayout(const plan::Plan& plan, const ModelSpec& spec) {
  const plan::EmbeddingOp& embedding = *plan.embedding();
  TokenModelFacts facts;
  facts.mask_input = 1;
  facts.mask_kind = MaskKind::kAttention;
  TokenIds ids;
  ids.ids_input = 0;
  ids.type_input = 2;
  ids.vocab_size = embedding.vocab_size;
  ids.type_vocab_size = std::max<std::int64_t>(embedding.type_vocab_size, 1);
  facts.ids = ids;
  facts.pooled = plan.output_per_sequence();
  facts.max_positions = embedding.max_positions;
  Result<TokenLayout> layout = MakeTokenLayout(spec, facts);
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  if (!layout.ok()) return std::nullopt;
  return *layout;
}

std::unique_ptr<ExecutorInstance> Instance(const std::shared_ptr<const plan::Plan>& plan,
                                           ModelSpec spec) {
  auto factory = CreateGpuExecutorFactory(plan, spec, IdsLayout(*plan, spec));
  EXPECT_TRUE(factory.ok()) << factory.status().ToString();
  if (!factory.ok()) return nullptr;
  std::printf("%s\n", factory.value()->Describe().c_str());
  auto instance = factory.value()->CreateInstance(0);
  EXPECT_TRUE(instance.ok()) << instance.status().ToString();
  return instance.ok() ? std::move(instance).value() : nullptr;
}

struct Loaded {
  std::shared_ptr<const plan::Plan> plan;
  std::unique_ptr<ExecutorInstance> instance;  // null (and a failure reported) when it failed
};

Loaded Load(const IdsCase& c, float empty_value = -2.5f) {
  auto plan = TokenIdPlan(c, empty_value);
  auto instance = Instance(plan, IdsSpec(*plan, c.precision));
  return {plan, std::move(instance)};
}

std::int64_t Sum(const std::vector<std::int32_t>& lengths) {
  return std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
}

// Random ids and types, positions by column (kColumn); the first id of the batch is 0 and the
// last vocab - 1, the last type types - 1: both ends of every table are read.
TokenIdInputs RandomInputs(const plan::Plan& plan, const std::vector<std::int32_t>& lengths) {
  const plan::EmbeddingOp& embedding = *plan.embedding();
  TokenIdInputs in;
  std::uniform_int_distribution<std::int32_t> id(0, static_cast<std::int32_t>(embedding.vocab_size - 1));
  std::uniform_int_distribution<std::int32_t> type(
      0, static_cast<std::int32_t>(std::max<std::int64_t>(embedding.type_vocab_size, 1) - 1));
  for (std::int32_t length : lengths) {
    for (std::int32_t column = 0; column < length; ++column) {
      in.ids.push_back(id(Rng()));
      in.positions.push_back(column);
      in.types.push_back(embedding.type_vocab_size > 0 ? type(Rng()) : 0);
    }
  }
  if (!in.ids.empty()) {
    in.ids.front() = 0;
    in.ids.back() = static_cast<std::int32_t>(embedding.vocab_size - 1);
    if (embedding.type_vocab_size > 0) {
      in.types.back() = static_cast<std::int32_t>(embedding.type_vocab_size - 1);
    }
  }
  return in;
}

// Stages the three inputs as the batcher does (InputBuffer(i, tokens x 4) each) and executes.
Status Stage(ExecutorInstance& instance, const TokenIdInputs& in,
             const std::vector<std::int32_t>& lengths, ExecuteTimings* timings = nullptr) {
  const std::size_t bytes = in.ids.size() * sizeof(std::int32_t);
  const std::vector<std::int32_t>* arrays[] = {&in.ids, &in.positions, &in.types};
  for (std::size_t i = 0; i < kTokenIdInputs; ++i) {
    Result<std::span<std::byte>> buffer = instance.InputBuffer(i, bytes);
    if (!buffer.ok()) return buffer.status();
    if (bytes > 0) std::memcpy(buffer->data(), arrays[i]->data(), bytes);
  }
  BatchShape shape;
  shape.batch_size = std::ssize(lengths);
  shape.sequence_lengths = lengths;
  return instance.Execute(shape, timings);
}

std::vector<float> Floats(std::span<const std::byte> bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// Poisons the instance first (a batch of the same shape with ids far outside every table,
// then NaN bytes over the host output), then runs `in` and returns its output.
std::vector<float> RunPoisoned(ExecutorInstance& instance, const plan::Plan& plan,
                               const TokenIdInputs& in, const std::vector<std::int32_t>& lengths) {
  TokenIdInputs garbage = in;
  for (std::size_t t = 0; t < garbage.ids.size(); ++t) {
    garbage.ids[t] = t % 2 == 0 ? std::numeric_limits<std::int32_t>::max() : -12345;
    garbage.positions[t] = t % 2 == 0 ? -1 : 1 << 30;
    garbage.types[t] = 77;
  }
  const Status poisoned = Stage(instance, garbage, lengths);
  EXPECT_TRUE(poisoned.ok()) << poisoned.ToString();
  std::span<const std::byte> old = instance.Output(0);
  std::memset(const_cast<std::byte*>(old.data()), 0xff, old.size());  // NaN bits

  ExecuteTimings timings;
  const Status status = Stage(instance, in, lengths, &timings);
  EXPECT_TRUE(status.ok()) << status.ToString();
  if (!status.ok()) return {};
  EXPECT_GT(timings.infer_ns, 0u);
  const std::int64_t rows = plan.output_per_sequence() ? std::ssize(lengths) : Sum(lengths);
  EXPECT_EQ(instance.OutputShape(0), (std::vector<std::int64_t>{rows, plan.output_width()}));
  std::vector<float> out = Floats(instance.Output(0));
  EXPECT_EQ(std::ssize(out), rows * plan.output_width());
  return out;
}

double CheckAgainstReference(ExecutorInstance& instance, const plan::Plan& plan,
                             const std::string& precision, const TokenIdInputs& in,
                             const std::vector<std::int32_t>& lengths) {
  const std::vector<float> out = RunPoisoned(instance, plan, in, lengths);
  auto quantize = [&](float v) { return RoundTo(v, precision); };
  const double error = RelativeError(out, testing::ReferenceForward(plan, in, quantize, lengths));
  std::string shape;
  for (std::int32_t length : lengths) shape += std::to_string(length) + " ";
  std::printf("%s lengths [ %s] relative error %.3g\n", precision.c_str(), shape.c_str(), error);
  EXPECT_LE(error, Tolerance(precision)) << "lengths [ " << shape << "]";
  return error;
}

// The inputs of sequence `index` of `lengths` alone.
TokenIdInputs Slice(const TokenIdInputs& in, const std::vector<std::int32_t>& lengths,
                    std::size_t index) {
  const auto first = static_cast<std::ptrdiff_t>(
      std::accumulate(lengths.begin(), lengths.begin() + static_cast<std::ptrdiff_t>(index), 0));
  const std::ptrdiff_t end = first + lengths[index];
  return TokenIdInputs{{in.ids.begin() + first, in.ids.begin() + end},
                       {in.positions.begin() + first, in.positions.begin() + end},
                       {in.types.begin() + first, in.types.begin() + end}};
}

class TokenIdPlanTest : public ::testing::TestWithParam<IdsCase> {};

// A mixed batch against the reference, then each sequence alone against its rows of the batch
// (a sequence pooled over another's tokens would miss by O(1)).
TEST_P(TokenIdPlanTest, MatchesReferenceOnMixedLengthsAndEachAlone) {
  SKIP_WITHOUT_GPU();
  const IdsCase& c = GetParam();
  const auto [plan, instance] = Load(c);
  ASSERT_NE(instance, nullptr);
  const std::vector<std::int32_t> lengths{1, 7, 33, 100, 3, 64};
  const TokenIdInputs in = RandomInputs(*plan, lengths);
  CheckAgainstReference(*instance, *plan, c.precision, in, lengths);
  const std::vector<float> mixed = RunPoisoned(*instance, *plan, in, lengths);
  const std::int64_t width = plan->output_width();
  std::int64_t first_row = 0;
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    const std::vector<std::int32_t> one{lengths[s]};
    const std::vector<float> alone = RunPoisoned(*instance, *plan, Slice(in, lengths, s), one);
    const std::int64_t rows = plan->output_per_sequence() ? 1 : lengths[s];
    const std::vector<float> batch_rows(mixed.begin() + first_row * width,
                                        mixed.begin() + (first_row + rows) * width);
    EXPECT_LE(RelativeDifference(alone, batch_rows), Tolerance(c.precision))
        << "sequence " << s << " of " << lengths[s] << " tokens";
    first_row += rows;
  }
}

// Sequences with no real token among others: mean pools them to 0, max to the empty value,
// and the heads run on those rows like any other.
TEST_P(TokenIdPlanTest, MatchesReferenceWithEmptySequences) {
  SKIP_WITHOUT_GPU();
  const IdsCase& c = GetParam();
  const auto [plan, instance] = Load(c);
  ASSERT_NE(instance, nullptr);
  const std::vector<std::int32_t> lengths{0, 5, 0, 0, 17, 0};
  CheckAgainstReference(*instance, *plan, c.precision, RandomInputs(*plan, lengths), lengths);
}

std::vector<IdsCase> IdsCases() {
  std::vector<IdsCase> cases;
  for (const std::string precision : {"fp32", "bf16"}) {
    // BERT with its pooler: first token, Linear + tanh.
    cases.push_back({"cls_tanh_pooler", 64, 4, 128, 301, 160, 2, Pooling::kFirst, true, 0, false, precision});
    // DistilBERT-like sentence embedder at odd sizes: no token types, head_dim 15, mean + L2.
    cases.push_back({"mean_l2_d60", 60, 4, 72, 37, 130, 0, Pooling::kMean, false, 0, true, precision});
    // Max pooling, a Linear head of 7 (a classifier's logits), then L2; head_dim 32.
    cases.push_back({"max_head_l2", 96, 3, 200, 250, 128, 3, Pooling::kMax, false, 7, true, precision});
    // Token-level output ([tokens, d]) with an L2 over each token's row.
    cases.push_back({"tokens_l2", 64, 2, 96, 99, 128, 2, std::nullopt, false, 0, true, precision});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Gpu, TokenIdPlanTest, ::testing::ValuesIn(IdsCases()),
                         [](const auto& info) { return info.param.name + "_" + info.param.precision; });

IdsCase MeanCase(const std::string& precision) {
  return {"mean", 64, 4, 128, 53, 64, 2, Pooling::kMean, false, 0, false, precision};
}

// BERT-base's width (768, 12 heads of 64) with BERT's vocabulary size, one batch in bf16.
TEST(GpuTokenIds, Bf16Width768MeanPoolingMatchesReference) {
  SKIP_WITHOUT_GPU();
  IdsCase c{"bert_base", 768, 12, 3072, 30522, 512, 2, Pooling::kMean, false, 0, true, "bf16"};
  const auto [plan, instance] = Load(c);
  ASSERT_NE(instance, nullptr);
  const std::vector<std::int32_t> lengths{128, 16, 1, 40};
  CheckAgainstReference(*instance, *plan, c.precision, RandomInputs(*plan, lengths), lengths);
}

TEST(GpuTokenIds, AllEmptyBatchPoolsToTheEmptyValue) {
  SKIP_WITHOUT_GPU();
  IdsCase c{"max", 64, 4, 128, 53, 64, 2, Pooling::kMax, false, 0, false, "bf16"};
  const auto [plan, instance] = Load(c, /*empty_value=*/-3.5f);  // exact in bf16
  ASSERT_NE(instance, nullptr);
  const std::vector<std::int32_t> lengths{0, 0, 0};
  const std::vector<float> out = RunPoisoned(*instance, *plan, TokenIdInputs{}, lengths);
  ASSERT_EQ(std::ssize(out), 3 * plan->output_width());
  for (float v : out) ASSERT_EQ(v, -3.5f);
}

TEST(GpuTokenIds, PositionsAtTheTableEndMatchReference) {
  SKIP_WITHOUT_GPU();
  const IdsCase c = MeanCase("fp32");
  const auto [plan, instance] = Load(c);
  ASSERT_NE(instance, nullptr);
  const std::vector<std::int32_t> lengths{64, 9};  // the first sequence fills every position
  TokenIdInputs in = RandomInputs(*plan, lengths);
  for (std::int32_t& position : in.positions) position = static_cast<std::int32_t>(c.max_positions - 1) - position % 2;
  CheckAgainstReference(*instance, *plan, c.precision, in, lengths);
}

// The batcher validates ids; should a bad one still arrive, each index is clamped into its
// table: the same output as the clamped ids, bit for bit, and no out-of-bounds read.
TEST(GpuTokenIds, IndicesOutsideTheTablesAreClamped) {
  SKIP_WITHOUT_GPU();
  const IdsCase c = MeanCase("bf16");
  const auto [plan, instance] = Load(c);
  ASSERT_NE(instance, nullptr);
  const std::vector<std::int32_t> lengths{3, 2};
  const std::int32_t big = std::numeric_limits<std::int32_t>::max();
  const TokenIdInputs outside{{-7, static_cast<std::int32_t>(c.vocab) + 100, big, 5, -1},
                              {-1, static_cast<std::int32_t>(c.max_positions), big, 0, 1},
                              {-3, 2, big, 0, 99}};
  const std::int32_t last_id = static_cast<std::int32_t>(c.vocab - 1);
  const std::int32_t last_position = static_cast<std::int32_t>(c.max_positions - 1);
  const TokenIdInputs clamped{{0, last_id, last_id, 5, 0},
                              {0, last_position, last_position, 0, 1},
                              {0, 1, 1, 0, 1}};
  ASSERT_TRUE(Stage(*instance, outside, lengths).ok());
  const std::vector<float> from_outside = Floats(instance->Output(0));
  ASSERT_TRUE(Stage(*instance, clamped, lengths).ok());
  const std::vector<float> from_clamped = Floats(instance->Output(0));
  ASSERT_EQ(from_outside.size(), from_clamped.size());
  EXPECT_EQ(std::memcmp(from_outside.data(), from_clamped.data(), from_outside.size() * sizeof(float)), 0);
}

// A bucket's graph holds a fixed count of sequences; batches that differ only in their split,
// or that hold more sequences than tokens, replay to the same bits as eager runs.
TEST(GpuTokenIds, GraphReplayIsBitEqualToEagerRuns) {
  SKIP_WITHOUT_GPU();
  const IdsCase c{"max_head", 64, 4, 128, 53, 64, 2, Pooling::kMax, true, 5, true, "bf16"};
  auto plan = TokenIdPlan(c);
  const std::filesystem::path cache = std::filesystem::temp_directory_path() /
                                      ("ltserve_token_ids_cache_" + std::to_string(Rng()()));
  ModelSpec spec = IdsSpec(*plan, c.precision);
  spec.options.algo_cache_file = cache.string();
  auto graphed = Instance(plan, spec);
  spec.options.cuda_graphs = false;
  auto eager = Instance(plan, spec);  // the same algorithms, from the file
  ASSERT_TRUE(graphed != nullptr && eager != nullptr);
  const std::vector<std::vector<std::int32_t>> batches{
      {64}, {1, 63}, {8, 8, 8, 8, 8, 8, 8, 8}, {0, 0, 0, 0, 0, 0, 0, 3}, {1, 1, 1, 1, 1},
      {64, 64, 64, 64, 64, 64, 64, 64}, {5}};
  for (const auto& lengths : batches) {
    const TokenIdInputs in = RandomInputs(*plan, lengths);
    const auto x = RunPoisoned(*graphed, *plan, in, lengths);
    const auto y = RunPoisoned(*eager, *plan, in, lengths);
    ASSERT_EQ(x.size(), y.size());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0)
        << lengths.size() << " sequences of " << Sum(lengths) << " tokens";
    auto quantize = [&](float v) { return RoundTo(v, c.precision); };
    EXPECT_LE(RelativeError(x, testing::ReferenceForward(*plan, in, quantize, lengths)), kTolBf16);
  }
  std::filesystem::remove(cache);
}

TEST(GpuTokenIds, RejectsBadStaging) {
  SKIP_WITHOUT_GPU();
  const auto [plan, instance] = Load(MeanCase("bf16"));
  ASSERT_NE(instance, nullptr);
  EXPECT_EQ(instance->InputBuffer(kTokenIdInputs, 4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(instance->InputBuffer(0, 6).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(instance->InputBuffer(0, (kMaxTokens + 1) * 4).status().code(),
            StatusCode::kInvalidArgument);
  // Staged for 5 tokens, executed as 3.
  const std::vector<std::int32_t> five{5};
  const TokenIdInputs in = RandomInputs(*plan, five);
  for (std::size_t i = 0; i < kTokenIdInputs; ++i) ASSERT_TRUE(instance->InputBuffer(i, 5 * 4).ok());
  const std::vector<std::int32_t> three{3};
  BatchShape shape;
  shape.batch_size = 1;
  shape.sequence_lengths = three;
  EXPECT_EQ(instance->Execute(shape, nullptr).code(), StatusCode::kInvalidArgument);
  // More sequences than max_batch_size: more pooled rows than the instance holds.
  const std::vector<std::int32_t> too_many(kMaxBatch + 1, 1);
  EXPECT_EQ(Stage(*instance, RandomInputs(*plan, too_many), too_many).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(instance->Output(0).empty());
  // The instance still serves after the errors.
  CheckAgainstReference(*instance, *plan, "bf16", in, five);
}

TEST(GpuTokenIds, LayoutsThatDoNotFitThePlanAreLoadErrors) {
  SKIP_WITHOUT_GPU();
  auto plan = TokenIdPlan(MeanCase("bf16"));
  const ModelSpec spec = IdsSpec(*plan, "bf16");
  EXPECT_EQ(CreateGpuExecutorFactory(plan, spec, std::nullopt).status().code(),
            StatusCode::kInvalidArgument);
  std::optional<TokenLayout> layout = IdsLayout(*plan, spec);
  ASSERT_TRUE(layout.has_value());
  std::optional<TokenLayout> no_ids = layout;
  no_ids->ids.reset();
  EXPECT_EQ(CreateGpuExecutorFactory(plan, spec, no_ids).status().code(),
            StatusCode::kInvalidArgument);
  std::optional<TokenLayout> vocab = layout;
  vocab->ids->vocab_size = plan->embedding()->vocab_size + 1;  // ids the table lacks
  EXPECT_EQ(CreateGpuExecutorFactory(plan, spec, vocab).status().code(),
            StatusCode::kInvalidArgument);
  std::optional<TokenLayout> types = layout;
  types->ids->type_vocab_size = plan->embedding()->type_vocab_size + 1;
  EXPECT_EQ(CreateGpuExecutorFactory(plan, spec, types).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(CreateGpuExecutorFactory(plan, spec, layout).ok());
}

}  // namespace
}  // namespace ltserve
