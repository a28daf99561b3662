// Transformer encoder plans on the GPU executor: the fused attention kernel alone and whole
// encoder layers (both LayerNorm orders, ReLU and GELU, 1 to 12 heads) against the double
// reference (reference.h) on packed sequences of mixed lengths; a mixed batch against each of
// its sequences run alone; graph replay of lengths never seen at capture; bad token batches.
// Every test skips, saying why, where no GPU is usable.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <numeric>
#include <ostream>
#include <string>
#include <vector>

#include "gpu/gpu_executor.h"
#include "gpu/buckets.h"
#include "gpu/cutlass_gemm.h"
#include "reference.h"
#include "sixteen_bit.h"
#include "test_support.h"

namespace ltserve {
namespace {

using plan::Activation;
using testing::Builder;
using testing::RoundTo;
using testing::Random;
using testing::RelativeDifference;
using testing::RelativeError;
using testing::Rng;
using testing::RunPoisoned;

// ‖out − ref‖ / ‖ref‖ bounds. fp32: fp32 accumulation over at most 3072 products and 512
// keys, ~1e-6 in practice; the bound leaves room for the longest sums. bf16: every
// intermediate (qkv, attention output, hidden layer, each residual sum) is stored with an
// 8-bit mantissa (~2e-3 relative per rounding, about ten roundings per layer, partly
// cancelling), plus the tanh GELU epilogue's ≤ 1e-3 absolute difference from erf.
constexpr double kTolLayerFp32 = 1e-4;
constexpr double kTolLayerBf16 = 2e-2;
// Attention alone: inputs the reference sees rounded the same way. fp32 (CUDA-core kernel):
// only the summation order differs. bf16/fp16: the output's rounding, and on the tensor-core
// kernel the softmax weights P rounded to the input type before P·V (≤ 2^-9 relative each,
// averaging out over the keys).
constexpr double kTolAttentionFp32 = 1e-5;
constexpr double kTolAttentionBf16 = 1e-2;
constexpr std::int64_t kMaxTokens = 1024;  // buckets 1, 2, 4, ..., 512, 1024

std::vector<std::int32_t> MixedLengths(std::int64_t width) {
  // d 768 stops at 128 tokens a sequence here: the double reference of a 512-token sequence
  // at that width costs seconds of CPU, so it runs once (Bf16LayerOfWidth768...At512Tokens).
  if (width >= 512) return {1, 7, 128};
  return {1, 7, 128, 512};
}

ModelSpec TokenSpec(const plan::Plan& plan, const std::string& precision) {
  ModelSpec spec;
  spec.name = "encoder";
  spec.max_batch_size = 8;
  spec.inputs = {TensorSpec{"x", DataType::kFp32, {-1, plan.input_width()}}};
  spec.outputs = {TensorSpec{"y", DataType::kFp32, {-1, plan.output_width()}}};
  spec.options = testing::Options({{"precision", precision},
                                    {"max_tokens_per_batch", std::to_string(kMaxTokens)},
                                    // load time: tuning is not under test here
                                    {"algo_candidates", "2"}});
  return spec;
}

// The layout the loader gives such a model (every input carries tokens, no mask).
std::optional<TokenLayout> Layout(const ModelSpec& spec) {
  Result<TokenLayout> layout = MakeTokenLayout(spec, std::nullopt);
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  if (!layout.ok()) return std::nullopt;
  return *layout;
}

Result<std::unique_ptr<ExecutorFactory>> TokenFactory(std::shared_ptr<const plan::Plan> plan,
                                                      const ModelSpec& spec) {
  return CreateGpuExecutorFactory(std::move(plan), spec, Layout(spec));
}

std::int64_t Sum(const std::vector<std::int32_t>& lengths) {
  return std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
}

// Runs `lengths` packed through `instance` and checks the result against the reference;
// returns the output.
std::vector<float> CheckBatch(ExecutorInstance& instance, const plan::Plan& plan,
                              const std::string& precision,
                              const std::vector<std::int32_t>& lengths, float input_scale,
                              double tolerance) {
  const std::int64_t tokens = Sum(lengths);
  auto quantize = [&](float v) { return RoundTo(v, precision); };
  std::vector<float> input = Random(tokens * plan.input_width(), input_scale);
  for (float& v : input) v = quantize(v);  // what the first kernel reads
  const std::vector<float> out =
      RunPoisoned(instance, plan, input, tokens, DataType::kFp32, lengths);
  const std::vector<double> ref =
      testing::ReferenceForward(plan, input, tokens, quantize, lengths);
  const double error = RelativeError(out, ref);
  std::string shape;
  for (std::int32_t length : lengths) shape += std::to_string(length) + " ";
  std::printf("%s lengths [ %s] relative error %.3g\n", precision.c_str(), shape.c_str(), error);
  EXPECT_LE(error, tolerance) << "lengths [ " << shape << "]";
  return out;
}

// The mixed batch, then each sequence alone: each against the reference, and each alone
// against its rows of the mixed batch (GEMM algorithms differ between buckets, so the bound
// is the tolerance, not bit equality; a sequence seeing another's keys would miss it by O(1)).
void CheckMixedAndAlone(const std::shared_ptr<const plan::Plan>& plan,
                        const std::string& precision, const std::vector<std::int32_t>& lengths,
                        float input_scale, double tolerance) {
  auto factory = TokenFactory(plan, TokenSpec(*plan, precision));
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  std::printf("%s\n", factory.value()->Describe().c_str());
  auto instance = factory.value()->CreateInstance(0);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  const std::int64_t tokens = Sum(lengths);
  auto quantize = [&](float v) { return RoundTo(v, precision); };
  std::vector<float> input = Random(tokens * plan->input_width(), input_scale);
  for (float& v : input) v = quantize(v);
  const std::vector<float> mixed =
      RunPoisoned(*instance.value(), *plan, input, tokens, DataType::kFp32, lengths);
  // A refused batch (RunPoisoned has said why) ends this check here: the loop below slices the
  // batch's rows, and past an empty output that would end the whole test process.
  ASSERT_EQ(mixed.size(), static_cast<std::size_t>(tokens * plan->output_width()));
  const double error = RelativeError(
      mixed, testing::ReferenceForward(*plan, input, tokens, quantize, lengths));
  std::printf("%s mixed batch of %zu sequences, %ld tokens: relative error %.3g\n",
              precision.c_str(), lengths.size(), static_cast<long>(tokens), error);
  EXPECT_LE(error, tolerance);
  std::int64_t first = 0;
  for (std::int32_t length : lengths) {
    const std::vector<float> alone_input(input.begin() + first * plan->input_width(),
                                         input.begin() + (first + length) * plan->input_width());
    const std::vector<std::int32_t> one{length};
    const std::vector<float> alone =
        RunPoisoned(*instance.value(), *plan, alone_input, length, DataType::kFp32, one);
    const std::vector<float> rows(mixed.begin() + first * plan->output_width(),
                                  mixed.begin() + (first + length) * plan->output_width());
    const double difference = RelativeDifference(alone, rows);
    std::printf("  sequence of %d alone vs in the batch: relative difference %.3g\n", length,
                difference);
    EXPECT_LE(difference, tolerance) << "sequence of " << length;
    first += length;
  }
}

// ---- The attention kernel alone: the plan's input is the packed q | k | v.

struct AttentionCase {
  std::int64_t heads;
  std::int64_t head_dim;
  std::string precision;
  friend void PrintTo(const AttentionCase& c, std::ostream* out) {
    *out << c.heads << "x" << c.head_dim << " " << c.precision;
  }
};

std::shared_ptr<const plan::Plan> AttentionPlan(std::int64_t heads, std::int64_t head_dim) {
  Builder b;
  const auto qkv = b.Value(3 * heads * head_dim);
  const auto out = b.Attention(qkv, heads);
  b.plan->SetInput(qkv, plan::InputKind::kTokens);
  b.plan->SetOutput(out);
  EXPECT_TRUE(b.plan->Validate().ok());
  return b.plan;
}

class AttentionKernelTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionKernelTest, MatchesReferenceOnMixedLengthsAndEachAlone) {
  SKIP_WITHOUT_GPU();
  const AttentionCase& c = GetParam();
  // Lengths around both kernels' tiles (32 keys and 8 queries on CUDA cores; 64 keys, 16
  // query rows a warp and 64 an item on tensor cores); inputs of scale 3 give scores of
  // standard deviation ~3, so the online softmax's running max changes between tiles.
  CheckMixedAndAlone(AttentionPlan(c.heads, c.head_dim), c.precision,
                     {1, 2, 15, 17, 31, 33, 64, 65, 100, 129, 511}, 3.0f,
                     c.precision == "fp32" ? kTolAttentionFp32 : kTolAttentionBf16);
}

INSTANTIATE_TEST_SUITE_P(
    Gpu, AttentionKernelTest,
    // Tensor cores: bf16/fp16 with head_dim 16, 32, 48, 64, 96, 128. CUDA cores: fp32, and
    // 16-bit types with a head_dim that is not a multiple of 16 (1, 15, 72).
    ::testing::Values(AttentionCase{1, 1, "fp32"}, AttentionCase{2, 15, "fp32"},
                      AttentionCase{2, 15, "bf16"}, AttentionCase{1, 72, "fp16"},
                      AttentionCase{2, 16, "bf16"}, AttentionCase{4, 32, "bf16"},
                      AttentionCase{2, 48, "fp16"}, AttentionCase{3, 64, "fp16"},
                      AttentionCase{2, 96, "bf16"}, AttentionCase{1, 128, "fp32"},
                      AttentionCase{1, 128, "bf16"}, AttentionCase{12, 64, "fp32"},
                      AttentionCase{12, 64, "bf16"}),
    [](const auto& info) {
      return std::to_string(info.param.heads) + "x" + std::to_string(info.param.head_dim) + "_" +
             info.param.precision;
    });

// ---- Whole encoder layers, as nn.TransformerEncoderLayer computes them.

struct LayerCase {
  std::int64_t d;
  std::int64_t heads;
  std::int64_t ffn;
  Activation activation;
  bool norm_first;
  std::string precision;
  friend void PrintTo(const LayerCase& c, std::ostream* out) {
    *out << "d " << c.d << " heads " << c.heads << " ffn " << c.ffn << " "
         << plan::ActivationName(c.activation) << (c.norm_first ? " norm_first " : " post-norm ")
         << c.precision;
  }
};

// norm_first = false: x = norm1(x + out_proj(attn(x))); x = norm2(x + linear2(act(linear1(x)))),
//   the first residual taken by the LayerNorm, the second fused into linear2.
// norm_first = true:  x = x + out_proj(attn(norm1(x))); x = x + linear2(act(linear1(norm2(x)))),
//   both residuals fused into their projections.
std::shared_ptr<const plan::Plan> EncoderLayerPlan(const LayerCase& c) {
  Builder b;
  const auto x = b.Value(c.d);
  plan::ValueId y = plan::kNoValue;
  if (c.norm_first) {
    const auto qkv = b.Linear(b.LayerNorm(x), 3 * c.d, true, Activation::kNone);
    const auto attended = b.Linear(b.Attention(qkv, c.heads), c.d, true, Activation::kNone, x);
    const auto hidden = b.Linear(b.LayerNorm(attended), c.ffn, true, c.activation);
    y = b.Linear(hidden, c.d, true, Activation::kNone, attended);
  } else {
    const auto qkv = b.Linear(x, 3 * c.d, true, Activation::kNone);
    const auto projected = b.Linear(b.Attention(qkv, c.heads), c.d, true, Activation::kNone);
    const auto h = b.LayerNorm(projected, x);
    const auto hidden = b.Linear(h, c.ffn, true, c.activation);
    y = b.LayerNorm(b.Linear(hidden, c.d, true, Activation::kNone, h));
  }
  b.plan->SetInput(x, plan::InputKind::kTokens);
  b.plan->SetOutput(y);
  EXPECT_TRUE(b.plan->Validate().ok());
  return b.plan;
}

class EncoderLayerTest : public ::testing::TestWithParam<LayerCase> {};

TEST_P(EncoderLayerTest, MatchesReferenceOnMixedLengthsAndEachAlone) {
  SKIP_WITHOUT_GPU();
  const LayerCase& c = GetParam();
  CheckMixedAndAlone(EncoderLayerPlan(c), c.precision, MixedLengths(c.d), 1.0f,
                     c.precision == "fp32" ? kTolLayerFp32 : kTolLayerBf16);
}

std::vector<LayerCase> LayerCases() {
  std::vector<LayerCase> cases;
  for (const std::string precision : {"fp32", "bf16"}) {
    cases.push_back({64, 1, 96, Activation::kRelu, false, precision});
    cases.push_back({64, 4, 128, Activation::kGeluErf, true, precision});
    cases.push_back({60, 4, 72, Activation::kGeluTanh, true, precision});  // head_dim 15
    cases.push_back({768, 12, 3072, Activation::kGeluErf, false, precision});
    cases.push_back({768, 12, 3072, Activation::kRelu, true, precision});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Gpu, EncoderLayerTest, ::testing::ValuesIn(LayerCases()),
                         [](const auto& info) {
                           const LayerCase& c = info.param;
                           return "d" + std::to_string(c.d) + "_h" + std::to_string(c.heads) +
                                  "_" + plan::ActivationName(c.activation) +
                                  (c.norm_first ? "_norm_first_" : "_post_norm_") + c.precision;
                         });

// BERT-base's width at its longest sequence, once (the double reference takes seconds here).
TEST(GpuEncoder, Bf16LayerOfWidth768MatchesReferenceAt512Tokens) {
  SKIP_WITHOUT_GPU();
  auto plan = EncoderLayerPlan({768, 12, 3072, Activation::kGeluErf, false, "bf16"});
  auto factory = TokenFactory(plan, TokenSpec(*plan, "bf16"));
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  auto instance = factory.value()->CreateInstance(0);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  CheckBatch(*instance.value(), *plan, "bf16", {512}, 1.0f, kTolLayerBf16);
}

// ---- Graphs, empty sequences, errors.

// Also against graphs of ordinary launches: programmatic dependent launch (on by default)
// changes when attention and LayerNorm may start, never what they compute.
TEST(GpuEncoder, GraphReplayOfUnseenLengthsIsBitEqualToEagerRunsAndOrdinaryLaunches) {
  SKIP_WITHOUT_GPU();
  auto plan = EncoderLayerPlan({64, 4, 128, Activation::kGeluErf, false, "bf16"});
  const std::filesystem::path cache = std::filesystem::temp_directory_path() /
                                      ("ltserve_encoder_cache_" + std::to_string(Rng()()));
  ModelSpec spec = TokenSpec(*plan, "bf16");
  spec.options.algo_cache_file = cache.string();
  auto graphed = TokenFactory(plan, spec);
  ASSERT_TRUE(graphed.ok()) << graphed.status().ToString();
  spec.options.cuda_graphs = false;
  auto eager = TokenFactory(plan, spec);  // the same algorithms, from the file
  ASSERT_TRUE(eager.ok()) << eager.status().ToString();
  spec.options.cuda_graphs = true;
  spec.options.programmatic_launch = ProgrammaticLaunch::kOff;
  auto ordinary = TokenFactory(plan, spec);
  ASSERT_TRUE(ordinary.ok()) << ordinary.status().ToString();
  auto a = graphed.value()->CreateInstance(0);
  auto b = eager.value()->CreateInstance(0);
  auto c = ordinary.value()->CreateInstance(0);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  // Same bucket (64 tokens) with different splits, then other buckets.
  const std::vector<std::vector<std::int32_t>> batches{
      {64}, {1, 63}, {33, 31}, {8, 8, 8, 8, 8, 8, 8, 8}, {5}, {300, 1, 200}, {1024}};
  for (const auto& lengths : batches) {
    const std::int64_t tokens = Sum(lengths);
    const std::vector<float> input = Random(tokens * plan->input_width(), 1.0f);
    const auto x = RunPoisoned(*a.value(), *plan, input, tokens, DataType::kFp32, lengths);
    const auto y = RunPoisoned(*b.value(), *plan, input, tokens, DataType::kFp32, lengths);
    const auto z = RunPoisoned(*c.value(), *plan, input, tokens, DataType::kFp32, lengths);
    ASSERT_EQ(x.size(), y.size());
    ASSERT_EQ(x.size(), z.size());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0)
        << lengths.size() << " sequences of " << tokens << " tokens";
    EXPECT_EQ(std::memcmp(x.data(), z.data(), x.size() * sizeof(float)), 0)
        << lengths.size() << " sequences of " << tokens << " tokens, ordinary launches";
  }
  std::filesystem::remove(cache);
}

// CUTLASS's GEMMs for all four of BERT-base's layer GEMMs at every bucket: against the
// reference, and graphs launched programmatically (CUTLASS's kernels then wait for the kernel
// ahead inside, and let the next one start before they end) against graphs of ordinary
// launches, bit for bit, both loads reading one cache file so that they run the same tiles.
TEST(GpuEncoder, CutlassGemmsMatchTheReferenceAndGiveTheSameBitsProgrammaticOrNot) {
  SKIP_WITHOUT_GPU();
  auto plan = EncoderLayerPlan({768, 12, 3072, Activation::kGeluErf, false, "bf16"});
  const std::filesystem::path cache = std::filesystem::temp_directory_path() /
                                      ("ltserve_cutlass_cache_" + std::to_string(Rng()()));
  ModelSpec spec = TokenSpec(*plan, "bf16");
  spec.options.cutlass_gemm = OwnKernelMode::kAlways;
  spec.options.algo_cache_file = cache.string();
  auto programmatic = TokenFactory(plan, spec);
  ASSERT_TRUE(programmatic.ok()) << programmatic.status().ToString();
  spec.options.programmatic_launch = ProgrammaticLaunch::kOff;
  auto ordinary = TokenFactory(plan, spec);
  ASSERT_TRUE(ordinary.ok()) << ordinary.status().ToString();
  auto a = programmatic.value()->CreateInstance(0);
  auto b = ordinary.value()->CreateInstance(0);
  ASSERT_TRUE(a.ok() && b.ok());
  CheckBatch(*a.value(), *plan, "bf16", {300, 1, 200}, 1.0f, kTolLayerBf16);
  for (const std::vector<std::int32_t>& lengths :
       std::vector<std::vector<std::int32_t>>{{128}, {77, 128, 3}, {512, 512}}) {
    const std::int64_t tokens = Sum(lengths);
    const std::vector<float> input = Random(tokens * plan->input_width(), 1.0f);
    const auto x = RunPoisoned(*a.value(), *plan, input, tokens, DataType::kFp32, lengths);
    const auto y = RunPoisoned(*b.value(), *plan, input, tokens, DataType::kFp32, lengths);
    ASSERT_EQ(x.size(), y.size());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0)
        << lengths.size() << " sequences of " << tokens << " tokens";
  }
  std::filesystem::remove(cache);
}

// cutlass_gemm_kernel auto with the pass check: CUTLASS's tiles compete from
// kCutlassGemmAutoMinRows (the 4,096-row bucket here, not the smaller ones), the check flips
// layer shapes to them one at a time and then every shape left on cuBLASLt with a CUTLASS
// runner-up at once; whatever it keeps gives the reference's results, and the load log says
// what was checked, with no joint trial below the threshold.
TEST(GpuEncoder, CutlassAutoCheckedInThePassMatchesTheReference) {
  SKIP_WITHOUT_HOPPER("CUTLASS's Hopper GEMM");
  if (!gpu::CutlassGemmAvailable()) GTEST_SKIP() << "built without CUTLASS";
  constexpr std::int64_t kTokens = 4096;  // buckets ..., 2,048, 4,096
  static_assert(kTokens / 2 < gpu::kCutlassGemmAutoMinRows &&
                gpu::kCutlassGemmAutoMinRows <= kTokens);
  auto plan = EncoderLayerPlan({768, 12, 3072, Activation::kGeluErf, false, "bf16"});
  ModelSpec spec = TokenSpec(*plan, "bf16");
  spec.options.max_tokens_per_batch = kTokens;
  spec.options.cutlass_gemm = OwnKernelMode::kAuto;
  spec.options.check_kernels_in_pass = true;
  auto factory = TokenFactory(plan, spec);
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  const std::string log = factory.value()->Describe();
  EXPECT_NE(log.find("own-kernel choices checked in the pass at "), std::string::npos) << log;
  // "...; <rows> rows: <trial> <ratio>, ..., <n> shapes on CUTLASS <ratio>; <rows> rows: ..."
  for (std::size_t at = log.find(" shapes on CUTLASS"); at != std::string::npos;
       at = log.find(" shapes on CUTLASS", at + 1)) {
    const std::size_t rows_end = log.rfind(" rows:", at);
    ASSERT_NE(rows_end, std::string::npos) << log;
    const std::size_t rows_begin = log.find_last_not_of("0123456789", rows_end - 1) + 1;
    EXPECT_GE(std::stoll(log.substr(rows_begin, rows_end - rows_begin)),
              gpu::kCutlassGemmAutoMinRows)
        << log;
  }
  auto instance = factory.value()->CreateInstance(0);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  CheckBatch(*instance.value(), *plan, "bf16", {300, 1, 200}, 1.0f, kTolLayerBf16);
  // 2,049 tokens: the 4,096-row bucket, where CUTLASS competes.
  CheckBatch(*instance.value(), *plan, "bf16", {512, 512, 512, 512, 1}, 1.0f, kTolLayerBf16);
}

// LayerNorm's streaming schedule at every bucket (always) against the row-a-warp kernel
// (off): the same bits, graphed, for a post-LN bf16 layer (one LayerNorm with a residual, one
// without) and a pre-LN fp32 one, at batches that fill one warp's rows and many times the
// streaming grid. Both factories read their GEMM algorithms from one cache file: timed apart,
// they could choose different ones, which give different bits.
TEST(GpuEncoder, StreamingLayerNormGivesTheBitsOfTheRowAWarpKernel) {
  SKIP_WITHOUT_GPU();
  const LayerCase cases[] = {{768, 12, 3072, Activation::kGeluErf, false, "bf16"},
                             {64, 4, 128, Activation::kRelu, true, "fp32"}};
  for (const LayerCase& c : cases) {
    auto plan = EncoderLayerPlan(c);
    const std::filesystem::path cache = std::filesystem::temp_directory_path() /
                                        ("ltserve_encoder_cache_" + std::to_string(Rng()()));
    std::unique_ptr<ExecutorInstance> instances[2];  // off, always
    for (int streaming = 0; streaming < 2; ++streaming) {
      ModelSpec spec = TokenSpec(*plan, c.precision);
      spec.options.algo_cache_file = cache.string();
      spec.options.streaming_layernorm =
          streaming == 1 ? OwnKernelMode::kAlways : OwnKernelMode::kOff;
      auto factory = TokenFactory(plan, spec);
      ASSERT_TRUE(factory.ok()) << factory.status().ToString();
      const std::string describe = factory.value()->Describe();
      EXPECT_EQ(describe.find("streaming LayerNorm for ") != std::string::npos, streaming == 1)
          << describe;
      auto instance = factory.value()->CreateInstance(0);
      ASSERT_TRUE(instance.ok()) << instance.status().ToString();
      instances[streaming] = std::move(instance).value();
    }
    const std::vector<std::vector<std::int32_t>> batches{
        {1}, {7, 128}, {300, 1, 200}, std::vector<std::int32_t>(8, 128)};
    for (const auto& lengths : batches) {
      const std::int64_t tokens = Sum(lengths);
      const std::vector<float> input = Random(tokens * plan->input_width(), 1.0f);
      const auto off = RunPoisoned(*instances[0], *plan, input, tokens, DataType::kFp32, lengths);
      const auto on = RunPoisoned(*instances[1], *plan, input, tokens, DataType::kFp32, lengths);
      ASSERT_EQ(on.size(), off.size());
      EXPECT_EQ(std::memcmp(on.data(), off.data(), on.size() * sizeof(float)), 0)
          << c.precision << ", " << lengths.size() << " sequences of " << tokens << " tokens";
    }
    std::filesystem::remove(cache);
  }
}

// Two halves on two streams (always) at every bucket with a half of 128 rows or more (256,
// 512 and 1024 tokens here), each half's rows against the double reference, on batches whose
// cut falls inside a sequence (attention must still see the whole sequence), and against the
// whole pass (off): not the same bits, since each half runs the half bucket's algorithms, but
// the same values within the layer's tolerance.
TEST(GpuEncoder, TwoStreamHalvesMatchTheReferenceAndTheWholePass) {
  SKIP_WITHOUT_GPU();
  const LayerCase cases[] = {{768, 12, 3072, Activation::kGeluErf, false, "bf16"},
                             {64, 4, 128, Activation::kRelu, true, "fp32"}};
  for (const LayerCase& c : cases) {
    auto plan = EncoderLayerPlan(c);
    const double tolerance = c.precision == "fp32" ? kTolLayerFp32 : kTolLayerBf16;
    std::unique_ptr<ExecutorInstance> instances[2];  // off, always
    for (int halves = 0; halves < 2; ++halves) {
      ModelSpec spec = TokenSpec(*plan, c.precision);
      spec.options.two_stream_halves = halves == 1 ? OwnKernelMode::kAlways : OwnKernelMode::kOff;
      auto factory = TokenFactory(plan, spec);
      ASSERT_TRUE(factory.ok()) << factory.status().ToString();
      const std::string describe = factory.value()->Describe();
      EXPECT_EQ(describe.find("two-stream halves for 3 buckets (at 256, 512, 1024 rows)") !=
                    std::string::npos,
                halves == 1)
          << describe;
      auto instance = factory.value()->CreateInstance(0);
      ASSERT_TRUE(instance.ok()) << instance.status().ToString();
      instances[halves] = std::move(instance).value();
    }
    // Buckets 256 (cut at 128), 512 (cut at 256) twice, and for the narrow layer 1024 (the
    // double reference of 1024 tokens at width 768 takes too long here).
    std::vector<std::vector<std::int32_t>> batches{{200, 56}, {300, 1, 200}, {1, 7, 128, 128, 129}};
    if (c.d < 512) batches.push_back({511, 1, 512});
    for (const auto& lengths : batches) {
      const std::int64_t tokens = Sum(lengths);
      const std::int64_t bucket = tokens <= 256 ? 256 : tokens <= 512 ? 512 : 1024;
      auto quantize = [&](float v) { return RoundTo(v, c.precision); };
      std::vector<float> input = Random(tokens * plan->input_width(), 1.0f);
      for (float& v : input) v = quantize(v);
      const auto off = RunPoisoned(*instances[0], *plan, input, tokens, DataType::kFp32, lengths);
      const auto on = RunPoisoned(*instances[1], *plan, input, tokens, DataType::kFp32, lengths);
      const std::vector<double> ref =
          testing::ReferenceForward(*plan, input, tokens, quantize, lengths);
      ASSERT_EQ(on.size(), ref.size());
      ASSERT_EQ(off.size(), ref.size());
      const auto cut = static_cast<std::ptrdiff_t>(bucket / 2 * plan->output_width());
      const double first_half = RelativeError(std::vector<float>(on.begin(), on.begin() + cut),
                                              std::vector<double>(ref.begin(), ref.begin() + cut));
      const double second_half = RelativeError(std::vector<float>(on.begin() + cut, on.end()),
                                               std::vector<double>(ref.begin() + cut, ref.end()));
      const double whole = RelativeDifference(on, off);
      std::printf("%s %ld tokens in halves of %ld: relative error %.3g and %.3g, against the "
                  "whole pass %.3g\n",
                  c.precision.c_str(), static_cast<long>(tokens), static_cast<long>(bucket / 2),
                  first_half, second_half, whole);
      EXPECT_LE(first_half, tolerance) << tokens << " tokens, first half";
      EXPECT_LE(second_half, tolerance) << tokens << " tokens, second half";
      EXPECT_LE(whole, tolerance) << tokens << " tokens, against the whole pass";
    }
  }
}

TEST(GpuEncoder, EmptySequencesInABatchAreSkipped) {
  SKIP_WITHOUT_GPU();
  auto plan = EncoderLayerPlan({64, 4, 128, Activation::kRelu, true, "fp32"});
  auto factory = TokenFactory(plan, TokenSpec(*plan, "fp32"));
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  auto instance = factory.value()->CreateInstance(0);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  CheckBatch(*instance.value(), *plan, "fp32", {0, 3, 0, 0, 9, 0}, 1.0f, kTolLayerFp32);
}

// Host-side arithmetic, so it runs without a GPU too.
TEST(GpuBuckets, TokenModelsGoUpInStepsAfterTheFirstStep) {
  using Rows = std::vector<std::int64_t>;
  EXPECT_EQ(gpu::Buckets(plan::InputKind::kRows, 1), Rows{1});
  EXPECT_EQ(gpu::Buckets(plan::InputKind::kRows, 2048),
            (Rows{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048}));
  EXPECT_EQ(gpu::Buckets(plan::InputKind::kTokens, 1000),
            (Rows{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000}));
  const Rows tokens = gpu::Buckets(plan::InputKind::kTokens, 16384);
  ASSERT_EQ(tokens.size(), 10u + 31u);  // 1 .. 512, then 1024, 1536, ..., 16384
  for (std::size_t b = 10; b < tokens.size(); ++b) {
    EXPECT_EQ(tokens[b], 512 * static_cast<std::int64_t>(b - 8));
  }
  // A larger capacity takes larger steps, so there are never more than 32 of them.
  const Rows big = gpu::Buckets(plan::InputKind::kTokens, 100000);
  EXPECT_EQ(big[12], 4096);             // doubling until past the step
  EXPECT_EQ(big[13] - big[12], 3200);  // 100000 / 32 = 3125, rounded up to 128
  EXPECT_LE(big.size(), 12u + 32u);
  EXPECT_EQ(big.back(), 100000);
}

// Host-side arithmetic too: the rows after a pooling, and which bucket a batch takes.
TEST(GpuBuckets, PooledBucketsHoldAsManySequencesAsTokensUpToTheBatchSize) {
  using Rows = std::vector<std::int64_t>;
  const Rows tokens = gpu::Buckets(plan::InputKind::kTokenIds, 1000);
  const Rows sequences = gpu::BucketSequences(tokens, 8);
  EXPECT_EQ(sequences, (Rows{1, 2, 4, 8, 8, 8, 8, 8, 8, 8, 8}));
  // A capacity below the batch size: the last bucket still holds a batch of empty sequences.
  EXPECT_EQ(gpu::BucketSequences(Rows{1, 2, 4}, 16), (Rows{1, 2, 16}));
}

TEST(GpuBuckets, ABatchTakesTheSmallestBucketHoldingItsTokensAndSequences) {
  const std::vector<std::int64_t> tokens{1, 2, 4, 8, 16};
  const std::vector<std::int64_t> sequences = gpu::BucketSequences(tokens, 8);
  EXPECT_EQ(gpu::SmallestBucket(tokens, sequences, 3, 1), 2u);
  EXPECT_EQ(gpu::SmallestBucket(tokens, sequences, 3, 8), 3u);  // 5 empty sequences among them
  EXPECT_EQ(gpu::SmallestBucket(tokens, sequences, 0, 3), 2u);  // all empty
  EXPECT_EQ(gpu::SmallestBucket(tokens, sequences, 9, 1), 4u);
  EXPECT_EQ(gpu::SmallestBucket(tokens, {}, 3, 8), 2u);  // no pooling: tokens alone
  EXPECT_EQ(gpu::SmallestBucket(tokens, sequences, 100, 100), 4u);  // none holds it: the last
}

TEST(GpuEncoder, RejectsBadTokenBatches) {
  SKIP_WITHOUT_GPU();
  auto plan = AttentionPlan(2, 16);
  auto factory = TokenFactory(plan, TokenSpec(*plan, "bf16"));
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  auto instance = factory.value()->CreateInstance(0);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  ExecutorInstance& exec = *instance.value();
  std::vector<std::int32_t> too_many_sequences(kMaxTokens + 1, 0);
  too_many_sequences[0] = 1;
  const std::vector<std::vector<std::int32_t>> bad{
      {}, {-1, 5}, {static_cast<std::int32_t>(kMaxTokens) + 1}, {600, 600},
      too_many_sequences};
  for (const auto& lengths : bad) {
    BatchShape shape;
    shape.batch_size = std::ssize(lengths);
    shape.sequence_lengths = lengths;
    EXPECT_EQ(exec.Execute(shape, nullptr).code(), StatusCode::kInvalidArgument)
        << lengths.size() << " sequences";
    EXPECT_TRUE(exec.Output(0).empty());
  }
  // Sequences that were all padding: nothing to compute, an empty output of the right width.
  const std::vector<std::int32_t> all_padding{0, 0};
  BatchShape empty;
  empty.batch_size = 2;
  empty.sequence_lengths = all_padding;
  ASSERT_TRUE(exec.Execute(empty, nullptr).ok());
  EXPECT_TRUE(exec.Output(0).empty());
  EXPECT_EQ(exec.OutputShape(0), (std::vector<std::int64_t>{0, plan->output_width()}));
  const std::vector<std::int32_t> three{3, 4, 5};
  BatchShape mismatched;
  mismatched.batch_size = 2;  // lengths for 3 sequences
  mismatched.sequence_lengths = three;
  EXPECT_EQ(exec.Execute(mismatched, nullptr).code(), StatusCode::kInvalidArgument);
  // The instance still serves after the errors.
  CheckBatch(exec, *plan, "bf16", three, 1.0f, kTolAttentionBf16);
}

TEST(GpuEncoder, TokenPlanWithoutATokenBudgetIsALoadError) {
  SKIP_WITHOUT_GPU();
  auto plan = AttentionPlan(2, 16);
  ModelSpec spec = TokenSpec(*plan, "bf16");
  // No layout: nothing says how many packed tokens an instance holds.
  EXPECT_EQ(CreateGpuExecutorFactory(plan, spec, std::nullopt).status().code(),
            StatusCode::kInvalidArgument);
  std::optional<TokenLayout> no_budget = Layout(spec);
  ASSERT_TRUE(no_budget.has_value());
  no_budget->max_batch_tokens = 0;
  EXPECT_EQ(CreateGpuExecutorFactory(plan, spec, no_budget).status().code(),
            StatusCode::kInvalidArgument);
  spec.inputs[0].dims = {16, plan->input_width()};  // fixed length: 8 sequences of 16 tokens
  spec.options.max_tokens_per_batch.reset();
  auto factory = TokenFactory(plan, spec);
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  EXPECT_NE(factory.value()->Describe().find("up to 128 rows"), std::string::npos)
      << factory.value()->Describe();
}

}  // namespace
}  // namespace ltserve
