// The CPU plan executor and the TorchScript fallback against the module's own forward in
// float64, on fresh random inputs, with output buffers poisoned before every checked run.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "cpu/cpu_executor.h"
#include "test_models.h"
#include "torch/torch_loader.h"

namespace ltserve {
namespace {

using testing::MakeSpec;

// fp32 compute against float64: the project's bound for fp32 paths. Widths up to 1000
// accumulate ~sqrt(1000) roundings of 2^-24, far below it.
constexpr double kFp32Tolerance = 1e-5;
// fp32 compute, one final rounding to the 16-bit output: at most half an ulp of the largest
// value, 2^-11 (fp16) and 2^-8 (bf16) relative, with a factor two of margin.
constexpr double kCpuFp16Tolerance = 1e-3;
constexpr double kCpuBf16Tolerance = 8e-3;
// The TorchScript forward of a 16-bit module rounds every layer's output (three roundings on
// the fp16_io/bf16_io MLP): about 6e-4 (fp16) and 5e-3 (bf16) seen over many random batches;
// three times that.
constexpr double kTorchScriptFp16Tolerance = 2e-3;
constexpr double kTorchScriptBf16Tolerance = 1.5e-2;

enum class Path { kCpu, kTorchScript };
const char* PathName(Path path) { return path == Path::kCpu ? "cpu" : "torchscript"; }
void PrintTo(Path path, std::ostream* out) { *out << PathName(path); }

at::ScalarType ScalarTypeOf(DataType type) {
  switch (type) {
    case DataType::kFp16: return at::kHalf;
    case DataType::kBf16: return at::kBFloat16;
    default: return at::kFloat;
  }
}

// The factory and one instance of the chosen executor for a model.
struct Executor {
  std::unique_ptr<ExecutorFactory> factory;
  std::unique_ptr<ExecutorInstance> instance;
};

Executor MakeExecutor(const ModelSpec& spec, Path path) {
  Executor executor;
  Result<LoadedModel> loaded = LoadTorchScriptModel(spec);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  if (!loaded.ok()) return executor;
  if (path == Path::kCpu) {
    EXPECT_NE(loaded->plan, nullptr) << loaded->lowering_report;
    Result<std::unique_ptr<ExecutorFactory>> cpu = CreateCpuExecutorFactory(loaded->plan, spec, loaded->token_layout);
    EXPECT_TRUE(cpu.ok()) << cpu.status().ToString();
    if (!cpu.ok()) return executor;
    EXPECT_EQ((*cpu)->path(), ExecutionPath::kCpuPlan);
    executor.factory = std::move(cpu).value();
  } else {
    executor.factory = std::move(loaded->torchscript);
  }
  Result<std::unique_ptr<ExecutorInstance>> instance = executor.factory->CreateInstance(0);
  EXPECT_TRUE(instance.ok()) << instance.status().ToString();
  if (instance.ok()) executor.instance = std::move(instance).value();
  return executor;
}

Status ExecuteRows(ExecutorInstance& instance, std::int64_t batch,
                   ExecuteTimings* timings = nullptr) {
  BatchShape shape;
  shape.batch_size = batch;
  return instance.Execute(shape, timings);
}

// Runs a full batch first so the output buffer spans its whole capacity, then poisons it.
void RunFullBatchAndPoison(ExecutorInstance& instance, const ModelSpec& spec, std::mt19937& rng) {
  const at::ScalarType dtype = ScalarTypeOf(spec.inputs[0].dtype);
  const std::int64_t rows = std::max(spec.max_batch_size, 1);
  testing::Stage(instance, 0, testing::RandomInput(rng, rows, spec.inputs[0].dims, dtype));
  ASSERT_TRUE(ExecuteRows(instance, rows).ok());
  testing::PoisonOutput(instance, 0, ScalarTypeOf(spec.outputs[0].dtype));
}

// One checked run of `rows` fresh random rows (0: the model has no batch dim).
void ExpectMatchesReference(ExecutorInstance& instance, const ModelSpec& spec, std::int64_t rows,
                            double tolerance, std::mt19937& rng) {
  SCOPED_TRACE("batch " + std::to_string(rows));
  RunFullBatchAndPoison(instance, spec, rng);
  const at::Tensor input =
      testing::RandomInput(rng, rows, spec.inputs[0].dims, ScalarTypeOf(spec.inputs[0].dtype));
  testing::Stage(instance, 0, input);
  ExecuteTimings timings;
  Status status = ExecuteRows(instance, std::max<std::int64_t>(rows, 1), &timings);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_GT(timings.infer_ns, 0u);
  const at::Tensor actual = testing::OutputTensor(instance, 0, ScalarTypeOf(spec.outputs[0].dtype));
  const at::Tensor reference = testing::ReferenceForward(spec.model_file, {input}).at(0);
  EXPECT_LE(testing::MaxRelativeError(actual, reference), tolerance);
}

using ChainParam = std::tuple<std::string, std::string, Path>;
class ChainExecutorTest : public ::testing::TestWithParam<ChainParam> {};

TEST_P(ChainExecutorTest, MatchesFloat64Forward) {
  const auto& [name, mode, path] = GetParam();
  const testing::ChainModel& model = testing::FindChainModel(name);
  const ModelSpec spec = MakeSpec(name + "_" + mode, model.input_dims, model.output_dims);
  Executor executor = MakeExecutor(spec, path);
  ASSERT_NE(executor.instance, nullptr);
  const std::uint32_t seed = testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (std::int64_t rows : {1, 3, testing::kTestMaxBatch}) {
    ExpectMatchesReference(*executor.instance, spec, rows, kFp32Tolerance, rng);
  }
}

std::vector<ChainParam> AllChainParams() {
  std::vector<ChainParam> params;
  for (const testing::ChainModel& model : testing::ChainModels()) {
    for (const char* mode : {"script", "trace"}) {
      for (Path path : {Path::kCpu, Path::kTorchScript})
        params.emplace_back(model.name, mode, path);
    }
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ChainExecutorTest, ::testing::ValuesIn(AllChainParams()),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_" +
                                  PathName(std::get<2>(info.param));
                         });

struct PrecisionCase {
  const char* model;
  DataType dtype;
  Path path;
  double tolerance;
};

// Keeps ctest's test names readable (gtest would print the struct's bytes).
void PrintTo(const PrecisionCase& c, std::ostream* out) {
  *out << c.model << "/" << PathName(c.path);
}

class ReducedPrecisionTest : public ::testing::TestWithParam<PrecisionCase> {};

TEST_P(ReducedPrecisionTest, MatchesFloat64Forward) {
  const PrecisionCase& c = GetParam();
  const ModelSpec spec = MakeSpec(c.model, {testing::kOddIn}, {testing::kOddIn}, c.dtype);
  Executor executor = MakeExecutor(spec, c.path);
  ASSERT_NE(executor.instance, nullptr);
  const std::uint32_t seed = testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (std::int64_t rows : {1, 3, testing::kTestMaxBatch}) {
    ExpectMatchesReference(*executor.instance, spec, rows, c.tolerance, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Io, ReducedPrecisionTest,
    ::testing::Values(
        PrecisionCase{"fp16_io", DataType::kFp16, Path::kCpu, kCpuFp16Tolerance},
        PrecisionCase{"bf16_io", DataType::kBf16, Path::kCpu, kCpuBf16Tolerance},
        PrecisionCase{"fp16_io", DataType::kFp16, Path::kTorchScript, kTorchScriptFp16Tolerance},
        PrecisionCase{"bf16_io", DataType::kBf16, Path::kTorchScript, kTorchScriptBf16Tolerance}),
    [](const auto& info) {
      return std::string(info.param.model) + "_" + PathName(info.param.path);
    });

TEST(NoBatchDimTest, BothPathsRunOneUnbatchedSample) {
  const ModelSpec spec = MakeSpec("gelu_script", {testing::kOddIn}, {testing::kOddIn},
                                  DataType::kFp32, /*max_batch_size=*/0);
  std::mt19937 rng(testing::FreshSeed());
  for (Path path : {Path::kCpu, Path::kTorchScript}) {
    SCOPED_TRACE(PathName(path));
    Executor executor = MakeExecutor(spec, path);
    ASSERT_NE(executor.instance, nullptr);
    ExpectMatchesReference(*executor.instance, spec, 0, kFp32Tolerance, rng);
    EXPECT_EQ(executor.instance->OutputShape(0), std::vector<std::int64_t>{testing::kOddIn});
  }
}

TEST(TorchScriptFallbackTest, UnloweredModelMatchesFloat64Forward) {
  const ModelSpec spec = MakeSpec("cumsum", {testing::kOddIn}, {5});
  Executor executor = MakeExecutor(spec, Path::kTorchScript);
  ASSERT_NE(executor.instance, nullptr);
  std::mt19937 rng(testing::FreshSeed());
  for (std::int64_t rows : {1, 3, testing::kTestMaxBatch}) {
    ExpectMatchesReference(*executor.instance, spec, rows, kFp32Tolerance, rng);
  }
}

TEST(TorchScriptFallbackTest, TupleOutputsMapToOutputsInConfigOrder) {
  ModelSpec spec = MakeSpec("two_outputs", {testing::kOddIn}, {7});
  spec.outputs.push_back(TensorSpec{"OUTPUT__1", DataType::kFp32, {3}});
  Executor executor = MakeExecutor(spec, Path::kTorchScript);
  ASSERT_NE(executor.instance, nullptr);
  std::mt19937 rng(testing::FreshSeed());
  const at::Tensor input = testing::RandomInput(rng, 5, {testing::kOddIn}, at::kFloat);
  testing::Stage(*executor.instance, 0, input);
  ASSERT_TRUE(ExecuteRows(*executor.instance, 5).ok());
  const std::vector<at::Tensor> reference = testing::ReferenceForward(spec.model_file, {input});
  ASSERT_EQ(reference.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const at::Tensor actual = testing::OutputTensor(*executor.instance, i, at::kFloat);
    EXPECT_LE(testing::MaxRelativeError(actual, reference[i]), kFp32Tolerance) << "output " << i;
  }
  EXPECT_TRUE(executor.instance->Output(2).empty());
}

TEST(TorchScriptFallbackTest, InputsArePassedInConfigOrder) {
  ModelSpec spec = MakeSpec("two_inputs", {testing::kOddIn}, {6});
  spec.inputs.push_back(TensorSpec{"INPUT__1", DataType::kFp32, {5}});
  Executor executor = MakeExecutor(spec, Path::kTorchScript);
  ASSERT_NE(executor.instance, nullptr);
  std::mt19937 rng(testing::FreshSeed());
  const at::Tensor a = testing::RandomInput(rng, 3, {testing::kOddIn}, at::kFloat);
  const at::Tensor b = testing::RandomInput(rng, 3, {5}, at::kFloat);
  testing::Stage(*executor.instance, 0, a);
  testing::Stage(*executor.instance, 1, b);
  ASSERT_TRUE(ExecuteRows(*executor.instance, 3).ok());
  const at::Tensor actual = testing::OutputTensor(*executor.instance, 0, at::kFloat);
  const at::Tensor reference = testing::ReferenceForward(spec.model_file, {a, b}).at(0);
  EXPECT_LE(testing::MaxRelativeError(actual, reference), kFp32Tolerance);
}

TEST(TorchScriptFallbackTest, OutputCountMismatchIsInternal) {
  const ModelSpec spec = MakeSpec("two_outputs", {testing::kOddIn}, {7});  // returns two
  Executor executor = MakeExecutor(spec, Path::kTorchScript);
  ASSERT_NE(executor.instance, nullptr);
  std::mt19937 rng(testing::FreshSeed());
  testing::Stage(*executor.instance, 0,
                 testing::RandomInput(rng, 2, {testing::kOddIn}, at::kFloat));
  Status status = ExecuteRows(*executor.instance, 2);
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find("2 tensors"), std::string::npos) << status.message();
  EXPECT_TRUE(executor.instance->Output(0).empty());
}

TEST(TorchScriptFallbackTest, TypesLibtorchCannotHoldAreALoadError) {
  ModelSpec spec = MakeSpec("relu_script", {testing::kOddIn}, {testing::kOddIn});
  spec.outputs[0].dtype = DataType::kInvalid;
  Result<LoadedModel> loaded = LoadTorchScriptModel(spec);
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(loaded.status().message().find("OUTPUT__0"), std::string::npos);
}

// The request already matched the config, so a forward that raises is the model's failure.
TEST(TorchScriptFallbackTest, ShapeErrorRaisedByTorchScriptIsInternal) {
  const ModelSpec spec = MakeSpec("relu_script", {testing::kOddIn}, {testing::kOddIn});
  Executor executor = MakeExecutor(spec, Path::kTorchScript);
  ASSERT_NE(executor.instance, nullptr);
  BatchShape shape;
  shape.batch_size = 2;
  shape.input_dims = {{testing::kOddIn - 1}};
  Status status = executor.instance->Execute(shape, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kInternal) << status.ToString();
  EXPECT_NE(status.message().find("TorchScript"), std::string::npos) << status.message();
  EXPECT_TRUE(executor.instance->Output(0).empty());
}

TEST(TorchScriptFallbackTest, VariableDimsComeFromTheBatchShape) {
  const ModelSpec spec = MakeSpec("relu_trace", {-1}, {-1});
  Executor executor = MakeExecutor(spec, Path::kTorchScript);
  ASSERT_NE(executor.instance, nullptr);
  std::mt19937 rng(testing::FreshSeed());
  const at::Tensor input = testing::RandomInput(rng, 3, {testing::kOddIn}, at::kFloat);
  testing::Stage(*executor.instance, 0, input);
  BatchShape shape;
  shape.batch_size = 3;
  EXPECT_EQ(executor.instance->Execute(shape, nullptr).code(), StatusCode::kInvalidArgument);
  shape.input_dims = {{testing::kOddIn}};
  ASSERT_TRUE(executor.instance->Execute(shape, nullptr).ok());
  EXPECT_EQ(executor.instance->OutputShape(0), (std::vector<std::int64_t>{3, testing::kOddIn}));
  const at::Tensor reference = testing::ReferenceForward(spec.model_file, {input}).at(0);
  EXPECT_LE(testing::MaxRelativeError(testing::OutputTensor(*executor.instance, 0, at::kFloat),
                                      reference),
            kFp32Tolerance);
}

TEST(ExecutorBoundsTest, BadBatchesAndBuffersAreInvalidArgument) {
  const ModelSpec spec = MakeSpec("relu_trace", {testing::kOddIn}, {testing::kOddIn});
  for (Path path : {Path::kCpu, Path::kTorchScript}) {
    SCOPED_TRACE(PathName(path));
    Executor executor = MakeExecutor(spec, path);
    ASSERT_NE(executor.instance, nullptr);
    ExecutorInstance& instance = *executor.instance;
    const std::size_t full = testing::kTestMaxBatch * testing::kOddIn * sizeof(float);
    EXPECT_TRUE(instance.InputBuffer(0, full).ok());
    EXPECT_EQ(instance.InputBuffer(0, full + 1).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(instance.InputBuffer(1, 4).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(ExecuteRows(instance, 0).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(ExecuteRows(instance, testing::kTestMaxBatch + 1).code(),
              StatusCode::kInvalidArgument);
    EXPECT_TRUE(instance.Output(0).empty());
  }
}

TEST(CpuExecutorTest, TokenSequencesAreInvalidArgument) {
  const ModelSpec spec = MakeSpec("relu_trace", {testing::kOddIn}, {testing::kOddIn});
  Executor executor = MakeExecutor(spec, Path::kCpu);
  ASSERT_NE(executor.instance, nullptr);
  const std::int32_t lengths[] = {2, 1};
  BatchShape shape;
  shape.batch_size = 2;
  shape.sequence_lengths = lengths;
  EXPECT_EQ(executor.instance->Execute(shape, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(CpuExecutorTest, InstancesOwnTheirBuffers) {
  const ModelSpec spec = MakeSpec("layernorm_script", {testing::kOddIn}, {9});
  Executor first = MakeExecutor(spec, Path::kCpu);
  ASSERT_NE(first.instance, nullptr);
  Result<std::unique_ptr<ExecutorInstance>> second = first.factory->CreateInstance(1);
  ASSERT_TRUE(second.ok());
  std::mt19937 rng(testing::FreshSeed());
  const at::Tensor x = testing::RandomInput(rng, 4, {testing::kOddIn}, at::kFloat);
  const at::Tensor y = testing::RandomInput(rng, 4, {testing::kOddIn}, at::kFloat);
  testing::Stage(*first.instance, 0, x);
  ASSERT_TRUE(ExecuteRows(*first.instance, 4).ok());
  testing::Stage(**second, 0, y);
  ASSERT_TRUE(ExecuteRows(**second, 4).ok());
  const at::Tensor reference = testing::ReferenceForward(spec.model_file, {x}).at(0);
  EXPECT_LE(
      testing::MaxRelativeError(testing::OutputTensor(*first.instance, 0, at::kFloat), reference),
      kFp32Tolerance);
}

std::shared_ptr<const plan::Plan> LoadPlan(const ModelSpec& spec) {
  Result<LoadedModel> loaded = LoadTorchScriptModel(spec);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  return loaded.ok() ? loaded->plan : nullptr;
}

TEST(CpuExecutorTest, RefusesWhatItCannotRun) {
  const ModelSpec spec = MakeSpec("relu_script", {testing::kOddIn}, {testing::kOddIn});
  std::shared_ptr<const plan::Plan> plan = LoadPlan(spec);
  ASSERT_NE(plan, nullptr);

  EXPECT_EQ(CreateCpuExecutorFactory(nullptr, spec, std::nullopt).status().code(), StatusCode::kInvalidArgument);

  ModelSpec int_io = spec;
  int_io.inputs[0].dtype = DataType::kInt32;
  Result<std::unique_ptr<ExecutorFactory>> refused = CreateCpuExecutorFactory(plan, int_io, std::nullopt);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("INT32"), std::string::npos);

  ModelSpec wrong_width = spec;
  wrong_width.outputs[0].dims = {testing::kOddIn + 1};
  refused = CreateCpuExecutorFactory(plan, wrong_width, std::nullopt);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("[38]"), std::string::npos)
      << refused.status().message();

  ModelSpec two_outputs = spec;
  two_outputs.outputs.push_back(spec.outputs[0]);
  EXPECT_EQ(CreateCpuExecutorFactory(plan, two_outputs, std::nullopt).status().code(),
            StatusCode::kInvalidArgument);

  auto invalid = std::make_shared<plan::Plan>();  // no ops, no input
  EXPECT_FALSE(CreateCpuExecutorFactory(invalid, spec, std::nullopt).ok());
}

// A plan of one attention op: [tokens, 3·d] packed q | k | v in, [tokens, d] out.
std::shared_ptr<const plan::Plan> AttentionPlan(std::int64_t heads, std::int64_t head_dim) {
  auto plan = std::make_shared<plan::Plan>();
  const plan::ValueId qkv = plan->AddValue("qkv", 3 * heads * head_dim);
  const plan::ValueId out = plan->AddValue("attn", heads * head_dim);
  plan->SetInput(qkv, plan::InputKind::kTokens);
  plan->Append(plan::AttentionOp{qkv, out, heads, head_dim});
  plan->SetOutput(out);
  EXPECT_TRUE(plan->Validate().ok());
  return plan;
}

// softmax(q·kᵀ / sqrt(head_dim))·v per head over one sequence, in float64, written out
// independently of ATen's attention.
at::Tensor AttentionReference(const at::Tensor& qkv, std::int64_t heads, std::int64_t head_dim) {
  const at::Tensor x = qkv.to(at::kDouble);
  const std::int64_t d = heads * head_dim;
  at::Tensor out = at::empty({x.size(0), d}, at::kDouble);
  for (std::int64_t h = 0; h < heads; ++h) {
    const at::Tensor q = x.narrow(1, h * head_dim, head_dim);
    const at::Tensor k = x.narrow(1, d + h * head_dim, head_dim);
    const at::Tensor v = x.narrow(1, 2 * d + h * head_dim, head_dim);
    const at::Tensor scores = q.matmul(k.t()) / std::sqrt(static_cast<double>(head_dim));
    const at::Tensor weights = (scores - std::get<0>(scores.max(1, true))).exp();
    out.narrow(1, h * head_dim, head_dim).copy_((weights / weights.sum(1, true)).matmul(v));
  }
  return out;
}

TEST(CpuExecutorTest, AttentionRunsPerSequenceOverPackedTokens) {
  constexpr std::int64_t kHeads = 2;
  constexpr std::int64_t kHeadDim = 3;  // odd on purpose
  constexpr std::int64_t kQkv = 3 * kHeads * kHeadDim;
  const ModelSpec spec = MakeSpec("attention", {-1, kQkv}, {-1, kHeads * kHeadDim});
  Result<std::unique_ptr<ExecutorFactory>> factory =
      CreateCpuExecutorFactory(AttentionPlan(kHeads, kHeadDim), spec,
                               MakeTokenLayout(spec, std::nullopt).value());
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  Result<std::unique_ptr<ExecutorInstance>> instance = (*factory)->CreateInstance(0);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  const std::uint32_t seed = testing::FreshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const std::vector<std::int32_t> lengths = {4, 1, 9};
  const at::Tensor tokens = testing::RandomInput(rng, 14, {kQkv}, at::kFloat);
  testing::Stage(**instance, 0, tokens);
  BatchShape shape;
  shape.batch_size = static_cast<std::int64_t>(lengths.size());
  shape.sequence_lengths = lengths;
  ASSERT_TRUE((*instance)->Execute(shape, nullptr).ok());
  EXPECT_EQ((*instance)->OutputShape(0), (std::vector<std::int64_t>{14, kHeads * kHeadDim}));
  const at::Tensor actual = testing::OutputTensor(**instance, 0, at::kFloat);
  std::int64_t offset = 0;
  for (std::int32_t length : lengths) {
    EXPECT_LE(testing::MaxRelativeError(
                  actual.narrow(0, offset, length),
                  AttentionReference(tokens.narrow(0, offset, length), kHeads, kHeadDim)),
              kFp32Tolerance)
        << "sequence at " << offset;
    offset += length;
  }
}

TEST(CpuExecutorTest, TokenPlanNeedsSequenceDims) {
  const ModelSpec spec = MakeSpec("attention", {18}, {6});
  Result<std::unique_ptr<ExecutorFactory>> refused =
      CreateCpuExecutorFactory(AttentionPlan(2, 3), spec, std::nullopt);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("[seq, width]"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace ltserve
