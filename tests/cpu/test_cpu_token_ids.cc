// The CPU executor on token-id plans (Hugging Face encoders): the embedding gather and its
// LayerNorm, each pooling over packed sequences (empty ones included) and L2 normalisation,
// against the same math in float64 on fresh random tables and ids, with odd widths.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "cpu/cpu_executor.h"

namespace ltserve {
namespace {

constexpr std::int64_t kWidth = 13;  // odd on purpose
constexpr std::int64_t kVocab = 29;
constexpr std::int64_t kPositions = 11;
constexpr std::int64_t kTypes = 2;
constexpr int kMaxBatch = 5;
constexpr std::int64_t kMaxTokens = 40;
// fp32 against float64 over one LayerNorm and a sum or a norm of 13 values.
constexpr double kTolerance = 1e-5;
constexpr float kEmptyMax = -7.5f;

std::vector<float> RandomValues(std::mt19937& rng, std::size_t count) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) value = normal(rng);
  return values;
}

struct Built {
  std::shared_ptr<const plan::Plan> plan;
  ModelSpec spec;
  TokenLayout layout;
};

// embedding -> pool -> [l2]; pooled or not as the pooling is set.
Built Build(std::mt19937& rng, std::optional<plan::Pooling> pooling, bool l2) {
  auto p = std::make_shared<plan::Plan>();
  const plan::ValueId embedded = p->AddValue("e", kWidth);
  plan::EmbeddingOp embedding;
  embedding.output = embedded;
  embedding.vocab_size = kVocab;
  embedding.max_positions = kPositions;
  embedding.type_vocab_size = kTypes;
  embedding.word = RandomValues(rng, kVocab * kWidth);
  embedding.position = RandomValues(rng, kPositions * kWidth);
  embedding.token_type = RandomValues(rng, kTypes * kWidth);
  embedding.gamma = RandomValues(rng, kWidth);
  embedding.beta = RandomValues(rng, kWidth);
  embedding.eps = 1e-12f;
  p->Append(embedding);
  plan::ValueId current = embedded;
  if (pooling) {
    const plan::ValueId pooled = p->AddValue("pooled", kWidth);
    p->Append(plan::PoolOp{current, pooled, *pooling, kEmptyMax});
    current = pooled;
  }
  if (l2) {
    const plan::ValueId normalized = p->AddValue("l2", kWidth);
    p->Append(plan::L2NormalizeOp{current, normalized, 1e-12f});
    current = normalized;
  }
  p->SetInput(embedded, plan::InputKind::kTokenIds);
  p->SetOutput(current);
  Built built;
  built.plan = p;
  built.spec.name = "ids";
  built.spec.max_batch_size = kMaxBatch;
  built.spec.inputs = {TensorSpec{"input_ids", DataType::kInt64, {-1}}};
  built.spec.outputs = {TensorSpec{"out", DataType::kFp32,
                                   pooling ? std::vector<std::int64_t>{kWidth}
                                           : std::vector<std::int64_t>{-1, kWidth}}};
  built.layout.token_inputs = {0};
  built.layout.max_batch_tokens = kMaxTokens;
  built.layout.pooled = pooling.has_value();
  built.layout.ids = TokenIds{0, std::nullopt, kVocab, kTypes};
  return built;
}

at::Tensor Table(const std::vector<float>& values, std::int64_t rows) {
  return at::from_blob(const_cast<float*>(values.data()), {rows, kWidth}, at::kFloat)
      .to(at::kDouble);
}

// The plan's math in float64, per token then per sequence.
at::Tensor Reference(const plan::Plan& p, const std::vector<std::int32_t>& ids,
                     const std::vector<std::int32_t>& positions,
                     const std::vector<std::int32_t>& types,
                     const std::vector<std::int32_t>& lengths) {
  const plan::EmbeddingOp& e = *p.embedding();
  const auto index = [](const std::vector<std::int32_t>& v) {
    return at::tensor(std::vector<std::int64_t>(v.begin(), v.end()), at::kLong);
  };
  at::Tensor sum = Table(e.word, kVocab).index_select(0, index(ids)) +
                   Table(e.position, kPositions).index_select(0, index(positions)) +
                   Table(e.token_type, kTypes).index_select(0, index(types));
  const at::Tensor gamma = at::from_blob(const_cast<float*>(e.gamma.data()), {kWidth}).to(at::kDouble);
  const at::Tensor beta = at::from_blob(const_cast<float*>(e.beta.data()), {kWidth}).to(at::kDouble);
  at::Tensor rows = at::layer_norm(sum, {kWidth}, gamma, beta, e.eps);
  for (std::size_t i = 1; i < p.ops().size(); ++i) {
    if (const auto* pool = std::get_if<plan::PoolOp>(&p.ops()[i])) {
      std::vector<at::Tensor> pooled;
      std::int64_t offset = 0;
      for (std::int32_t length : lengths) {
        const at::Tensor tokens = rows.narrow(0, offset, length);
        offset += length;
        if (length == 0) {
          const double empty = pool->pooling == plan::Pooling::kMax ? pool->empty_value : 0.0;
          pooled.push_back(at::full({kWidth}, empty, at::kDouble));
        } else if (pool->pooling == plan::Pooling::kFirst) {
          pooled.push_back(tokens[0]);
        } else if (pool->pooling == plan::Pooling::kMean) {
          pooled.push_back(tokens.mean(0));
        } else {
          pooled.push_back(std::get<0>(tokens.max(0)));
        }
      }
      rows = at::stack(pooled);
    } else if (std::holds_alternative<plan::L2NormalizeOp>(p.ops()[i])) {
      rows = rows / rows.norm(2, {1}, true).clamp_min(1e-12);
    }
  }
  return rows;
}

void StageInt32(ExecutorInstance& instance, std::size_t index, const std::vector<std::int32_t>& v) {
  Result<std::span<std::byte>> buffer = instance.InputBuffer(index, v.size() * sizeof(std::int32_t));
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  std::memcpy(buffer->data(), v.data(), v.size() * sizeof(std::int32_t));
}

class CpuTokenIds : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(CpuTokenIds, MatchesFloat64OnMixedLengthsWithAnEmptySequence) {
  std::mt19937 rng(20261201 + std::get<0>(GetParam()));
  const int pooling_code = std::get<0>(GetParam());
  const std::optional<plan::Pooling> pooling =
      pooling_code < 0 ? std::nullopt : std::optional(static_cast<plan::Pooling>(pooling_code));
  const bool l2 = std::get<1>(GetParam());
  Built built = Build(rng, pooling, l2);
  Result<std::unique_ptr<ExecutorFactory>> factory =
      CreateCpuExecutorFactory(built.plan, built.spec, built.layout);
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  Result<std::unique_ptr<ExecutorInstance>> instance = (*factory)->CreateInstance(0);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  // The first token of a first-token pooling is always real; others may have none.
  const std::vector<std::int32_t> lengths =
      pooling == plan::Pooling::kFirst ? std::vector<std::int32_t>{3, 1, 7, 2}
                                       : std::vector<std::int32_t>{3, 0, 7, 1, 5};
  std::vector<std::int32_t> ids, positions, types;
  std::uniform_int_distribution<std::int32_t> id(0, kVocab - 1), type(0, kTypes - 1);
  for (std::int32_t length : lengths) {
    for (std::int32_t t = 0; t < length; ++t) {
      ids.push_back(t == 0 ? kVocab - 1 : id(rng));  // the table's last row too
      positions.push_back(kPositions - 1 - t);
      types.push_back(type(rng));
    }
  }
  StageInt32(**instance, kIdsInput, ids);
  StageInt32(**instance, kPositionInput, positions);
  StageInt32(**instance, kTypeInput, types);
  BatchShape shape;
  shape.batch_size = static_cast<std::int64_t>(lengths.size());
  shape.sequence_lengths = lengths;
  const Status status = (*instance)->Execute(shape, nullptr);
  ASSERT_TRUE(status.ok()) << status.ToString();
  const at::Tensor want = Reference(*built.plan, ids, positions, types, lengths);
  const std::vector<std::int64_t> got_shape = (*instance)->OutputShape(0);
  ASSERT_EQ(got_shape, (std::vector<std::int64_t>{want.size(0), kWidth}));
  std::span<const std::byte> bytes = (*instance)->Output(0);
  ASSERT_EQ(bytes.size(), static_cast<std::size_t>(want.numel()) * sizeof(float));
  const at::Tensor got = at::from_blob(const_cast<std::byte*>(bytes.data()), {want.size(0), kWidth},
                                       at::kFloat).to(at::kDouble);
  const double error = (got - want).abs().max().item<double>() /
                       std::max(want.abs().max().item<double>(), 1e-30);
  EXPECT_LT(error, kTolerance);
}

// Pooling code -1: none (per-token output); 0 first, 1 mean, 2 max; with and without L2.
INSTANTIATE_TEST_SUITE_P(Poolings, CpuTokenIds,
                         ::testing::Combine(::testing::Values(-1, 0, 1, 2), ::testing::Bool()));

TEST(CpuTokenIdsInputs, AnInputBeyondTheThreeInt32ArraysIsInvalidArgument) {
  std::mt19937 rng(5);
  Built built = Build(rng, plan::Pooling::kMean, false);
  auto factory = CreateCpuExecutorFactory(built.plan, built.spec, built.layout);
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  auto instance = (*factory)->CreateInstance(0);
  ASSERT_TRUE(instance.ok());
  EXPECT_EQ((*instance)->InputBuffer(kTokenIdInputs, 4).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*instance)->InputBuffer(kIdsInput, (kMaxTokens + 1) * 4).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(CpuTokenIdsInputs, AFactoryWithoutTheTokenIdLayoutIsRefused) {
  std::mt19937 rng(6);
  Built built = Build(rng, plan::Pooling::kMean, false);
  built.layout.ids.reset();
  EXPECT_EQ(CreateCpuExecutorFactory(built.plan, built.spec, built.layout).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ltserve
