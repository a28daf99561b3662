// The cuBLASLt executor against a double-precision reference (reference.h), per precision,
// batch size and epilogue; graph replay against eager runs; concurrent instances; error paths.
// Every test skips, saying why, where no GPU is usable.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <ostream>
#include <random>
#include <sstream>
#include <thread>

#include "common/float16.h"
#include "config/parameters.h"
#include "gpu/gpu_executor.h"
#include "reference.h"
#include "sixteen_bit.h"
#include "test_support.h"

namespace ltserve {
namespace {

using plan::Activation;
using testing::Builder;
using testing::RoundTo;
using testing::Random;
using testing::RelativeError;
using testing::Rng;
using testing::RunPoisoned;

// ‖out − ref‖ / ‖ref‖ bounds. fp32 accumulates in fp32 (far under 1e-3); TF32 rounds the
// operands to 10-bit mantissas (~3e-4 relative per product); fp16/bf16 also store every
// intermediate activation in 16 bits (bf16's 8-bit mantissa: ~4e-3 per rounding).
constexpr double kTolFp32 = 1e-5;
constexpr double kTolTf32 = 3e-3;
constexpr double kTolFp16 = 3e-3;
constexpr double kTolBf16 = 2e-2;
constexpr int kMaxBatch = 200;  // buckets 1..128 and 200: 127, 128 and 200 land differently

// Every op kind and every epilogue: BIAS, RELU_BIAS, GELU_BIAS, DEFAULT, RELU, GELU, residual
// through C, erf GELU, SiLU/Tanh/Sigmoid after a matmul, LayerNorm(+residual), Add, standalone
// activation. Widths are not multiples of 8.
std::shared_ptr<const plan::Plan> ZooPlan() {
  Builder b;
  const auto in = b.Value(37);
  const auto v1 = b.Linear(in, 61, true, Activation::kRelu);
  const auto v2 = b.Linear(v1, 61, true, Activation::kGeluTanh, v1);
  const auto v3 = b.Linear(v2, 45, false, Activation::kRelu);
  const auto v4 = b.Linear(v3, 45, true, Activation::kGeluErf);
  const auto v5 = b.Linear(v4, 45, false, Activation::kNone, v3);
  plan::LayerNormOp norm;
  norm.input = v5;
  norm.residual = v4;
  norm.output = b.Value(45);
  norm.gamma = Random(45, 1.0f);
  norm.beta = Random(45, 0.5f);
  b.plan->Append(norm);
  const auto v7 = b.Value(45);
  b.plan->Append(plan::ActivationOp{norm.output, v7, Activation::kSilu});
  const auto v8 = b.Linear(v7, 29, true, Activation::kTanh);
  const auto v9 = b.Linear(v8, 29, true, Activation::kSigmoid);
  const auto v10 = b.Value(29);
  b.plan->Append(plan::AddOp{v9, v8, v10});
  const auto v11 = b.Linear(v10, 33, false, Activation::kGeluTanh);
  const auto out = b.Linear(v11, 33, true, Activation::kNone);
  b.plan->SetInput(in, plan::InputKind::kRows);
  b.plan->SetOutput(out);
  EXPECT_TRUE(b.plan->Validate().ok());
  return b.plan;
}

// Widths cuBLASLt's fused kernels accept in every precision.
std::shared_ptr<const plan::Plan> AlignedPlan() {
  Builder b;
  const auto in = b.Value(64);
  const auto v1 = b.Linear(in, 128, true, Activation::kRelu);
  const auto v2 = b.Linear(v1, 128, true, Activation::kGeluTanh, v1);
  const auto out = b.Linear(v2, 64, true, Activation::kNone);
  b.plan->SetInput(in, plan::InputKind::kRows);
  b.plan->SetOutput(out);
  EXPECT_TRUE(b.plan->Validate().ok());
  return b.plan;
}

// Widths the small-batch kernel takes (in_features a multiple of 8), with a residual and every
// activation it applies in its epilogue.
std::shared_ptr<const plan::Plan> SmallBatchPlan() {
  Builder b;
  const auto in = b.Value(64);
  const auto v1 = b.Linear(in, 72, true, Activation::kRelu);
  const auto v2 = b.Linear(v1, 72, true, Activation::kGeluErf, v1);
  const auto v3 = b.Linear(v2, 40, false, Activation::kSilu);
  const auto v4 = b.Linear(v3, 40, true, Activation::kTanh, v3);
  const auto v5 = b.Linear(v4, 48, true, Activation::kSigmoid);
  const auto v6 = b.Linear(v5, 24, true, Activation::kGeluTanh);
  const auto out = b.Linear(v6, 16, false, Activation::kNone);
  b.plan->SetInput(in, plan::InputKind::kRows);
  b.plan->SetOutput(out);
  EXPECT_TRUE(b.plan->Validate().ok());
  return b.plan;
}

// Both forms of a post-LN step the GEMM + LayerNorm kernel takes: the residual in the GEMM,
// and the residual in the LayerNorm (nn.TransformerEncoderLayer's first norm), at an output
// width off the kernel's blocks, then a Linear reading the second norm.
std::shared_ptr<const plan::Plan> GemmLayerNormPlan() {
  Builder b;
  const auto in = b.Value(37);
  const auto v1 = b.Linear(in, 200, true, Activation::kRelu);
  const auto v2 = b.Linear(v1, 200, true, Activation::kNone, v1);
  const auto x1 = b.LayerNorm(v2);
  const auto v3 = b.Linear(x1, 200, false, Activation::kNone);
  const auto x2 = b.LayerNorm(v3, x1);
  const auto out = b.Linear(x2, 29, true, Activation::kNone);
  b.plan->SetInput(in, plan::InputKind::kRows);
  b.plan->SetOutput(out);
  EXPECT_TRUE(b.plan->Validate().ok());
  return b.plan;
}

ModelSpec Spec(const plan::Plan& plan, const std::string& precision, DataType io,
               int max_batch = kMaxBatch) {
  ModelSpec spec;
  spec.name = "test";
  spec.max_batch_size = max_batch;
  spec.inputs = {TensorSpec{"x", io, {plan.input_width()}}};
  spec.outputs = {TensorSpec{"y", io, {plan.output_width()}}};
  spec.options = testing::Options({{"precision", precision}});
  return spec;
}

double Tolerance(const std::string& precision) {
  if (precision == "fp32") return kTolFp32;
  if (precision == "tf32") return kTolTf32;
  if (precision == "fp16") return kTolFp16;
  return kTolBf16;
}

struct Case {
  std::string precision;
  DataType io;
  friend void PrintTo(const Case& c, std::ostream* out) {
    *out << c.precision << " with " << WireName(c.io) << " I/O";
  }
};

class PrecisionTest : public ::testing::TestWithParam<Case> {};

void CheckAgainstReference(std::shared_ptr<const plan::Plan> plan, const Case& c,
                           std::map<std::string, std::string> extra = {}) {
  ModelSpec spec = Spec(*plan, c.precision, c.io);
  std::map<std::string, std::string> parameters = extra;
  parameters["precision"] = c.precision;
  spec.options = testing::Options(parameters);
  auto factory = CreateGpuExecutorFactory(plan, spec, std::nullopt);
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  const std::string describe = factory.value()->Describe();
  std::printf("%s\n", describe.c_str());
  if (extra["fuse_epilogues"] == "false") {
    EXPECT_NE(describe.find("(0 with fused epilogue)"), std::string::npos) << describe;
  }
  const bool sixteen_bit = c.precision != "fp32" && c.precision != "tf32";
  if (extra["small_batch_kernel"] == "always" && sixteen_bit) {
    // 7 layers × the 4 buckets of at most 8 rows (1, 2, 4, 8).
    EXPECT_NE(describe.find("small-batch kernel for 28 GEMM buckets"), std::string::npos)
        << describe;
  }
  if (extra["skinny_gemm_kernel"] == "always") {
    // 7 layers × the 8 buckets of at most 128 rows (1, 2, ..., 128); 32-bit storage has no
    // tensor-core kernel of ltserve's and stays with cuBLASLt.
    if (sixteen_bit) {
      EXPECT_NE(describe.find("split-K kernel for 56 GEMM buckets"), std::string::npos)
          << describe;
    } else {
      EXPECT_EQ(describe.find("split-K kernel"), std::string::npos) << describe;
    }
  }
  if (extra["staged_gemm_kernel"] == "always") {
    // 7 layers × the 8 buckets of at most 128 rows, as for the split-K kernel (Hopper's own
    // instructions; none in 32-bit storage).
    if (sixteen_bit) {
      EXPECT_NE(describe.find("staged-weights kernel for 56 GEMM buckets"), std::string::npos)
          << describe;
    } else {
      EXPECT_EQ(describe.find("staged-weights kernel"), std::string::npos) << describe;
    }
  }
  if (extra["staged_gemm_kernel"] != "always") {
    // On `auto` (the default) the staged-weights kernel competes only up to 32 rows
    // (gpu::kStagedGemmAutoMaxRows, in a header this CUDA-free test does not include); the load
    // log lists the rows of the buckets that took it.
    const std::size_t note = describe.find("staged-weights kernel for ");
    if (note != std::string::npos) {
      const std::size_t at = describe.find("(at ", note);
      ASSERT_NE(at, std::string::npos) << describe;
      std::istringstream rows(describe.substr(at + 4, describe.find(" rows)", at) - at - 4));
      for (std::string row; std::getline(rows, row, ',');) {
        EXPECT_LE(std::stoll(row), 32) << describe;
      }
    }
  }
  if (extra["layer_chain_kernel"] == "always") {
    // SmallBatchPlan's chainable runs: steps 1-2 (step 1's residual is step 0's output, so
    // step 0 stays out) and 3-6 (step 3's residual is the run's input), at every bucket of at
    // most 32 rows; none in 32-bit storage.
    if (sixteen_bit) {
      EXPECT_NE(describe.find("layer-chain kernel for steps 1-2 at 1 rows"), std::string::npos)
          << describe;
      EXPECT_NE(describe.find("; steps 3-6 at 1 rows"), std::string::npos) << describe;
      EXPECT_NE(describe.find(", 32 rows"), std::string::npos) << describe;
      EXPECT_EQ(describe.find(", 64 rows"), std::string::npos) << describe;
    } else {
      EXPECT_EQ(describe.find("layer-chain"), std::string::npos) << describe;
    }
  }
  if (extra["gemm_layernorm_kernel"] == "always") {
    // GemmLayerNormPlan's two (GEMM, LayerNorm) pairs at each of the 9 buckets (1..128, 200);
    // which schedule timed faster at each is the GPU's to say.
    if (sixteen_bit) {
      EXPECT_NE(describe.find("GEMM + LayerNorm kernel for 18 GEMM buckets (at 1, 2, 4, 8, 16, "
                              "32, 64, 128, 200 rows; "),
                std::string::npos)
          << describe;
      EXPECT_NE(describe.find(" of them split-K with a LayerNorm tail)"), std::string::npos)
          << describe;
    } else {
      EXPECT_EQ(describe.find("GEMM + LayerNorm"), std::string::npos) << describe;
    }
  }
  if (extra["gemm_search"] == "wide") {
    EXPECT_NE(describe.find("wide cuBLASLt search: "), std::string::npos) << describe;
  }
  auto instance = factory.value()->CreateInstance(0);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  const std::string precision = c.precision;
  auto quantize = [&](float v) { return RoundTo(v, precision); };
  for (std::int64_t rows : {1, 3, 127, 128, kMaxBatch}) {
    std::vector<float> input = Random(rows * plan->input_width(), 1.0f);
    // What reaches the first matmul: the I/O dtype's rounding, then the compute dtype's.
    for (float& v : input) v = quantize(RoundTo(v, c.io == DataType::kFp32 ? "fp32"
                                                    : c.io == DataType::kBf16 ? "bf16" : "fp16"));
    const std::vector<float> out = RunPoisoned(*instance.value(), *plan, input, rows, c.io);
    const std::vector<double> ref = testing::ReferenceForward(*plan, input, rows, quantize);
    ASSERT_EQ(out.size(), ref.size());
    const double error = RelativeError(out, ref);
    std::printf("%s io=%s rows=%ld relative error %.3g\n", c.precision.c_str(),
                std::string(WireName(c.io)).c_str(), static_cast<long>(rows), error);
    EXPECT_LE(error, Tolerance(c.precision)) << "rows " << rows;
  }
}

TEST_P(PrecisionTest, EveryOpAndEpilogueMatchesReferenceAtOddWidths) {
  SKIP_WITHOUT_GPU();
  CheckAgainstReference(ZooPlan(), GetParam());
}

// LayerNorm has a kernel per width class: a warp per row holding 8, 16 or 32 values a lane in
// registers (widths up to 256, 512, 1024), and a block per row beyond. One width inside each,
// with a residual, gamma and beta, and a mean far from 0 (the two-pass variance's case).
std::shared_ptr<const plan::Plan> LayerNormPlan(std::int64_t width) {
  Builder b;
  const auto in = b.Value(37);
  const auto wide = b.Linear(in, width, true, Activation::kNone);
  const auto shifted = b.Linear(in, width, true, Activation::kRelu);
  plan::LayerNormOp norm;
  norm.input = wide;
  norm.residual = shifted;
  norm.output = b.Value(width);
  norm.gamma = Random(width, 1.0f);
  norm.beta = Random(width, 0.5f);
  b.plan->Append(norm);
  b.plan->SetInput(in, plan::InputKind::kRows);
  b.plan->SetOutput(norm.output);
  EXPECT_TRUE(b.plan->Validate().ok());
  return b.plan;
}

TEST_P(PrecisionTest, LayerNormOfEveryWidthClassMatchesReference) {
  SKIP_WITHOUT_GPU();
  for (std::int64_t width : {45, 300, 1000, 1500}) {
    std::printf("LayerNorm width %ld\n", static_cast<long>(width));
    CheckAgainstReference(LayerNormPlan(width), GetParam());
  }
}

TEST_P(PrecisionTest, UnfusedFallbackMatchesReference) {
  SKIP_WITHOUT_GPU();
  CheckAgainstReference(ZooPlan(), GetParam(), {{"fuse_epilogues", "false"}});
}

TEST_P(PrecisionTest, SmallBatchKernelMatchesReference) {
  SKIP_WITHOUT_GPU();
  CheckAgainstReference(SmallBatchPlan(), GetParam(), {{"small_batch_kernel", "always"}});
}

// The split-K kernel for every layer up to 128 rows (on Hopper), each at the configuration
// that timed fastest; 200 rows run cuBLASLt. Its every configuration: test_skinny_gemm.cc.
TEST_P(PrecisionTest, SkinnyGemmKernelMatchesReference) {
  SKIP_WITHOUT_GPU();
  CheckAgainstReference(SmallBatchPlan(), GetParam(),
                        {{"skinny_gemm_kernel", "always"}, {"small_batch_kernel", "off"}});
}

// The staged-weights kernel for every layer up to 128 rows (on Hopper), each at the
// configuration that timed fastest, the split-K kernel off so that it is the only one of
// ltserve's; 200 rows run cuBLASLt. Its every configuration: test_staged_gemm.cc.
TEST_P(PrecisionTest, StagedGemmKernelMatchesReference) {
  SKIP_WITHOUT_GPU();
  CheckAgainstReference(SmallBatchPlan(), GetParam(),
                        {{"staged_gemm_kernel", "always"},
                         {"skinny_gemm_kernel", "off"},
                         {"small_batch_kernel", "off"}});
}

// CUTLASS's GEMM for every layer whose activation it has (ReLU, both GELUs, none) at every
// bucket (on Hopper, 16-bit storage), each at the tile that timed fastest; the others run
// cuBLASLt. Its every tile: test_cutlass_gemm.cc.
TEST_P(PrecisionTest, CutlassGemmKernelMatchesReference) {
  SKIP_WITHOUT_GPU();
  CheckAgainstReference(SmallBatchPlan(), GetParam(), {{"cutlass_gemm_kernel", "always"}});
}

// The layer-chain kernel for every chainable run up to 32 rows (on Hopper), at the
// configuration that timed fastest; larger buckets run layer by layer. Its every
// configuration: test_chain_gemm.cc.
TEST_P(PrecisionTest, LayerChainKernelMatchesReference) {
  SKIP_WITHOUT_GPU();
  CheckAgainstReference(SmallBatchPlan(), GetParam(),
                        {{"layer_chain_kernel", "always"}, {"small_batch_kernel", "off"}});
}

// The GEMM + LayerNorm kernel for both pairs at every bucket (on Hopper), at the
// configuration that timed fastest; against it, the same plan with the kernel off. Its every
// configuration: test_norm_gemm.cc.
TEST_P(PrecisionTest, GemmLayerNormKernelMatchesReference) {
  SKIP_WITHOUT_GPU();
  CheckAgainstReference(GemmLayerNormPlan(), GetParam(), {{"gemm_layernorm_kernel", "always"}});
  CheckAgainstReference(GemmLayerNormPlan(), GetParam(), {{"gemm_layernorm_kernel", "off"}});
}

TEST_P(PrecisionTest, AlignedWidthsFuseEveryLayerAndMatchReference) {
  SKIP_WITHOUT_GPU();
  auto plan = AlignedPlan();
  auto factory = CreateGpuExecutorFactory(plan, Spec(*plan, GetParam().precision, GetParam().io), std::nullopt);
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  EXPECT_NE(factory.value()->Describe().find("3 GEMMs (3 with fused epilogue)"), std::string::npos)
      << factory.value()->Describe();
  CheckAgainstReference(plan, GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Gpu, PrecisionTest,
    ::testing::Values(Case{"fp32", DataType::kFp32}, Case{"tf32", DataType::kFp32},
                      Case{"fp16", DataType::kFp32}, Case{"fp16", DataType::kFp16},
                      Case{"bf16", DataType::kFp32}, Case{"bf16", DataType::kBf16}),
    [](const auto& info) {
      return info.param.precision + "_io_" + std::string(WireName(info.param.io));
    });

TEST(GpuExecutor, ExactGeluIsCloserToErfThanTheTanhEpilogue) {
  SKIP_WITHOUT_GPU();
  Builder b;
  const auto in = b.Value(64);
  const auto out = b.Linear(in, 64, true, Activation::kGeluErf);
  b.plan->SetInput(in, plan::InputKind::kRows);
  b.plan->SetOutput(out);
  std::shared_ptr<const plan::Plan> plan = b.plan;
  const std::int64_t rows = 128;
  const std::vector<float> input = Random(rows * 64, 3.0f);
  const auto ref = testing::ReferenceForward(*plan, input, rows, [](float v) { return v; });
  double max_diff[2] = {0, 0};
  const char* modes[2] = {"exact", "tanh"};
  for (int m = 0; m < 2; ++m) {
    ModelSpec spec = Spec(*plan, "fp32", DataType::kFp32);
    spec.options = testing::Options({{"precision", "fp32"}, {"gelu_epilogue", modes[m]}});
    auto factory = CreateGpuExecutorFactory(plan, spec, std::nullopt);
    ASSERT_TRUE(factory.ok()) << factory.status().ToString();
    auto instance = factory.value()->CreateInstance(0);
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();
    const auto result = RunPoisoned(*instance.value(), *plan, input, rows, DataType::kFp32);
    for (std::size_t i = 0; i < ref.size(); ++i) {
      max_diff[m] = std::max(max_diff[m], std::abs(result[i] - ref[i]));
    }
    std::printf("gelu_epilogue=%s: max |y - erf GELU reference| = %.3g\n", modes[m], max_diff[m]);
  }
  EXPECT_LT(max_diff[0], 1e-4);  // fp32 arithmetic error only
  EXPECT_LT(max_diff[0], max_diff[1]);
  // The tanh form differs from erf GELU by at most ~1e-3 in absolute terms (docs/gpu_executor.md).
  EXPECT_LT(max_diff[1], 2e-3);
}

// An instance of each factory, run on the same fresh random rows (FP32 I/O) at each of `rows`:
// the same output bits.
void ExpectSameBits(ExecutorFactory& first, ExecutorFactory& second, const plan::Plan& plan,
                    std::initializer_list<std::int64_t> rows_list) {
  auto a = first.CreateInstance(0);
  auto b = second.CreateInstance(0);
  ASSERT_TRUE(a.ok() && b.ok());
  for (std::int64_t rows : rows_list) {
    const std::vector<float> input = Random(rows * plan.input_width(), 1.0f);
    const auto x = RunPoisoned(*a.value(), plan, input, rows, DataType::kFp32);
    const auto y = RunPoisoned(*b.value(), plan, input, rows, DataType::kFp32);
    ASSERT_EQ(x.size(), y.size());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0) << "rows " << rows;
  }
}

TEST(GpuExecutor, GraphReplayIsBitEqualToEagerRunsAndTheCacheFileIsReused) {
  SKIP_WITHOUT_GPU();
  auto plan = ZooPlan();
  const std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("ltserve_algo_cache_" + std::to_string(Rng()()));
  ModelSpec spec = Spec(*plan, "bf16", DataType::kFp32);
  spec.options.algo_cache_file = cache.string();
  auto graphed = CreateGpuExecutorFactory(plan, spec, std::nullopt);
  ASSERT_TRUE(graphed.ok()) << graphed.status().ToString();
  ASSERT_TRUE(std::filesystem::exists(cache));
  spec.options.cuda_graphs = false;
  auto eager = CreateGpuExecutorFactory(plan, spec, std::nullopt);  // same algorithms, from the file
  ASSERT_TRUE(eager.ok()) << eager.status().ToString();
  EXPECT_NE(eager.value()->Describe().find("from the cache (" + cache.string() + ")"),
            std::string::npos)
      << eager.value()->Describe();
  ExpectSameBits(*graphed.value(), *eager.value(), *plan, {1, 3, 127, 128, kMaxBatch});
  std::filesystem::remove(cache);
}

// gemm_search wide: the configurations it takes beyond the heuristic's give the reference's
// results in every compute precision; its algorithms go to the cache file under keys of their
// own (one for each GEMM bucket it searched), so that a second wide load takes them all from
// there and gives the same bits; and a heuristic load of the same file runs no search (the
// option decides, not what the file holds).
TEST(GpuExecutor, WideGemmSearchMatchesTheReferenceAndKeepsItsChoicesApart) {
  SKIP_WITHOUT_GPU();
  auto plan = AlignedPlan();
  for (const std::string precision : {"fp32", "tf32", "fp16", "bf16"}) {
    CheckAgainstReference(plan, Case{precision, DataType::kFp32}, {{"gemm_search", "wide"}});
  }
  const std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("ltserve_algo_cache_" + std::to_string(Rng()()));
  ModelSpec spec = Spec(*plan, "bf16", DataType::kFp32);
  spec.options.algo_cache_file = cache.string();
  spec.options.gemm_search = GemmSearch::kWide;
  auto searched = CreateGpuExecutorFactory(plan, spec, std::nullopt);
  ASSERT_TRUE(searched.ok()) << searched.status().ToString();
  const std::string searched_log = searched.value()->Describe();
  const std::string note = "wide cuBLASLt search: ";
  const std::size_t at = searched_log.find(note);
  ASSERT_NE(at, std::string::npos) << searched_log;
  // At most AlignedPlan's 3 GEMMs at each of the 5 buckets of 16 rows or more (16..128, 200):
  // those that run cuBLASLt.
  const int shapes = std::atoi(searched_log.c_str() + at + note.size());
  EXPECT_GE(shapes, 1) << searched_log;
  EXPECT_LE(shapes, 15) << searched_log;
  std::ifstream file(cache);
  int wide_entries = 0;
  for (std::string line; std::getline(file, line);) {
    // Algorithm lines only: kernel and pass choices of a wide load carry the mode too.
    const bool algorithm = line.rfind("kernel ", 0) != 0 && line.rfind("choice ", 0) != 0;
    wide_entries += algorithm && line.find(",search=wide") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(wide_entries, shapes);

  auto reloaded = CreateGpuExecutorFactory(plan, spec, std::nullopt);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString();
  const std::string reloaded_log = reloaded.value()->Describe();
  EXPECT_NE(reloaded_log.find(std::to_string(shapes) + " GEMM algorithms"), std::string::npos)
      << reloaded_log;
  EXPECT_EQ(reloaded_log.find(note), std::string::npos) << reloaded_log;
  spec.options.gemm_search = GemmSearch::kHeuristic;
  auto heuristic = CreateGpuExecutorFactory(plan, spec, std::nullopt);
  ASSERT_TRUE(heuristic.ok()) << heuristic.status().ToString();
  EXPECT_EQ(heuristic.value()->Describe().find(note), std::string::npos)
      << heuristic.value()->Describe();
  ExpectSameBits(*searched.value(), *reloaded.value(), *plan, {1, 77, kMaxBatch});
  std::filesystem::remove(cache);
}

// Every choice in algorithm cache file `cache` whose key starts with `key_prefix` rewritten to
// `word`; returns how many there were.
int RewriteChoices(const std::filesystem::path& cache, const std::string& key_prefix,
                   const std::string& word) {
  std::vector<std::string> lines;
  int choices = 0;
  {
    std::ifstream in(cache);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("choice " + key_prefix, 0) == 0) {
        ++choices;
        line = line.substr(0, line.rfind(' ')) + " " + word;
      }
      lines.push_back(line);
    }
  }
  std::ofstream out(cache, std::ios::trunc);
  for (const std::string& line : lines) out << line << "\n";
  return choices;
}

// check_kernels_in_pass: with the choices the pass check makes, every 16-bit precision gives
// the reference's results; the check times each bucket where an own kernel competes (AlignedPlan:
// the 8 buckets of 1 to 128 rows) and keeps one choice per bucket in the cache file; flips read
// from the file run the runner-ups (here every step at every bucket flipped through the file),
// say so in the load log and still give the reference's results; a malformed choice in the
// file is timed again, never applied in part; and a load with the check off reads no flip.
TEST(GpuExecutor, KernelChoicesCheckedInThePassMatchTheReferenceAndComeBackFromTheCache) {
  SKIP_WITHOUT_GPU();
  auto plan = AlignedPlan();
  for (const std::string precision : {"fp16", "bf16"}) {
    CheckAgainstReference(plan, Case{precision, DataType::kFp32}, {{"check_kernels_in_pass", "true"}});
  }
  const std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("ltserve_algo_cache_" + std::to_string(Rng()()));
  ModelSpec spec = Spec(*plan, "bf16", DataType::kFp32);
  spec.options.algo_cache_file = cache.string();
  spec.options.check_kernels_in_pass = true;
  auto checked = CreateGpuExecutorFactory(plan, spec, std::nullopt);
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  const std::string note = "own-kernel choices checked in the pass at 8 buckets: ";
  EXPECT_NE(checked.value()->Describe().find(note), std::string::npos) << checked.value()->Describe();

  const auto rewrite_pass_choices = [&](const std::string& word) {
    return RewriteChoices(cache, "pass,", word);
  };
  // A word that names a step with no runner-up (99), or is not a list of steps, is not applied
  // in part: the bucket is timed again, and the load neither fails nor flips everything.
  for (const std::string word : {"flip:0,1,99", "flip:", "flip:0,,1", "flip:-1", "halves"}) {
    EXPECT_EQ(rewrite_pass_choices(word), 8) << word;
    auto reread = CreateGpuExecutorFactory(plan, spec, std::nullopt);
    ASSERT_TRUE(reread.ok()) << word << ": " << reread.status().ToString();
    const std::string log = reread.value()->Describe();
    EXPECT_NE(log.find(note), std::string::npos) << word << ": " << log;
    EXPECT_EQ(log.find(note + "24 flipped"), std::string::npos) << word << ": " << log;
  }
  // Every pass choice rewritten to flip AlignedPlan's three GEMM steps (0, 1, 2).
  EXPECT_EQ(rewrite_pass_choices("flip:0,1,2"), 8);
  auto flipped = CreateGpuExecutorFactory(plan, spec, std::nullopt);
  ASSERT_TRUE(flipped.ok()) << flipped.status().ToString();
  const std::string flipped_log = flipped.value()->Describe();
  // Three distinct layer shapes at each of the 8 buckets.
  EXPECT_NE(flipped_log.find(note + "24 flipped (linear 64->128 at 1 rows to "), std::string::npos)
      << flipped_log;
  auto instance = flipped.value()->CreateInstance(0);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  auto quantize = [](float v) { return RoundTo(v, "bf16"); };
  for (std::int64_t rows : {1, 2, 3, 77, 128, 129}) {
    std::vector<float> input = Random(rows * plan->input_width(), 1.0f);
    for (float& v : input) v = quantize(v);
    const std::vector<float> out = RunPoisoned(*instance.value(), *plan, input, rows, DataType::kFp32);
    const std::vector<double> ref = testing::ReferenceForward(*plan, input, rows, quantize);
    const double error = RelativeError(out, ref);
    std::printf("bf16 rows=%ld, every own-kernel choice flipped: relative error %.3g\n",
                static_cast<long>(rows), error);
    EXPECT_LE(error, Tolerance("bf16")) << "rows " << rows;
  }

  spec.options.check_kernels_in_pass = false;
  auto unchecked = CreateGpuExecutorFactory(plan, spec, std::nullopt);
  ASSERT_TRUE(unchecked.ok()) << unchecked.status().ToString();
  EXPECT_EQ(unchecked.value()->Describe().find("checked in the pass"), std::string::npos)
      << unchecked.value()->Describe();
  std::filesystem::remove(cache);
}

// check_kernels_in_pass with layer_chain_kernel auto: the layer chains are checked too, each
// run against the pass with its steps' own kernels. The chains are forced through the cache
// file (every chain choice rewritten to a ring configuration offered at up to 32 rows), so
// that SmallBatchPlan's two runs stand at each of its 6 buckets of at most 32 rows whatever
// the GPU timed; the check then times each bucket and keeps its answer in the file; drops
// read from the file (both runs, steps 1-2 and 3-6, at every bucket) say so in the load log
// and give the reference's results; a word naming a step that starts no run, or not a list,
// is timed again, never applied in part.
TEST(GpuExecutor, LayerChainsCheckedInThePassMatchTheReferenceAndComeBackFromTheCache) {
  SKIP_WITHOUT_HOPPER("the layer-chain kernel");
  auto plan = SmallBatchPlan();
  const std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("ltserve_algo_cache_" + std::to_string(Rng()()));
  ModelSpec spec = Spec(*plan, "bf16", DataType::kFp32);
  spec.options = testing::Options({{"precision", "bf16"},
                                   {"layer_chain_kernel", "auto"},
                                   {"small_batch_kernel", "off"},
                                   {"check_kernels_in_pass", "true"},
                                   {"algo_cache_file", cache.string()}});
  auto first = CreateGpuExecutorFactory(plan, spec, std::nullopt);
  ASSERT_TRUE(first.ok()) << first.status().ToString();

  // Every line `starts` begins with rewritten by `edit` (the whole line in, the line out, or
  // empty to drop it); returns how many there were.
  const auto rewrite = [&](const std::string& starts, auto edit) {
    std::vector<std::string> lines;
    int matched = 0;
    {
      std::ifstream in(cache);
      for (std::string line; std::getline(in, line);) {
        if (line.rfind(starts, 0) == 0) {
          ++matched;
          line = edit(line);
          if (line.empty()) continue;
        }
        lines.push_back(line);
      }
    }
    std::ofstream out(cache, std::ios::trunc);
    for (const std::string& line : lines) out << line << "\n";
    return matched;
  };
  // 2 runs x the 6 buckets of at most 32 rows.
  EXPECT_EQ(rewrite("kernel chain,", [](const std::string& line) {
              const std::size_t key_end = line.find(' ', std::string("kernel ").size());
              return line.substr(0, key_end) + " chain-ring 1 2 2";
            }),
            12);
  // Any chain check of the first load was of other chains: timed again.
  rewrite("choice pass,", [](const std::string& line) {
    return line.find(",chains=") == std::string::npos ? line : std::string();
  });
  const std::string note = "layer chains checked in the pass at 6 buckets: ";
  auto checked = CreateGpuExecutorFactory(plan, spec, std::nullopt);
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  const std::string checked_log = checked.value()->Describe();
  EXPECT_NE(checked_log.find("layer-chain kernel for steps 1-2 at 1 rows"), std::string::npos)
      << checked_log;
  EXPECT_NE(checked_log.find(note), std::string::npos) << checked_log;
  EXPECT_NE(checked_log.find("pass without the chain / with it at 1 rows: steps 1-2 "),
            std::string::npos)
      << checked_log;

  // The chain choices only (the per-step flips' "choice pass," lines stay as they are).
  const auto rewrite_chain_choices = [&](const std::string& word) {
    int chain_choices = 0;
    rewrite("choice pass,", [&](const std::string& line) {
      if (line.find(",chains=") == std::string::npos) return line;
      ++chain_choices;
      return line.substr(0, line.rfind(' ')) + " " + word;
    });
    return chain_choices;
  };
  const auto expect_reference = [&](ExecutorFactory& factory, const std::string& what) {
    auto instance = factory.CreateInstance(0);
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();
    auto quantize = [](float v) { return RoundTo(v, "bf16"); };
    for (std::int64_t rows : {1, 3, 17, 32, 77}) {
      std::vector<float> input = Random(rows * plan->input_width(), 1.0f);
      for (float& v : input) v = quantize(v);
      const std::vector<float> out =
          RunPoisoned(*instance.value(), *plan, input, rows, DataType::kFp32);
      const std::vector<double> ref = testing::ReferenceForward(*plan, input, rows, quantize);
      const double error = RelativeError(out, ref);
      std::printf("bf16 rows=%ld, %s: relative error %.3g\n", static_cast<long>(rows),
                  what.c_str(), error);
      EXPECT_LE(error, Tolerance("bf16")) << what << ", rows " << rows;
    }
  };
  expect_reference(*checked.value(), "layer chains as checked");

  // Step 2 starts no run, the others are not lists of steps: timed again, nothing dropped
  // from the file.
  for (const std::string word : {"drop:1,2", "drop:", "drop:1,,3", "flip:1", "keep"}) {
    EXPECT_EQ(rewrite_chain_choices(word), 6) << word;
    auto reread = CreateGpuExecutorFactory(plan, spec, std::nullopt);
    ASSERT_TRUE(reread.ok()) << word << ": " << reread.status().ToString();
    const std::string log = reread.value()->Describe();
    EXPECT_NE(log.find(note), std::string::npos) << word << ": " << log;
    EXPECT_NE(log.find("pass without the chain / with it at "), std::string::npos)
        << word << ": " << log;
  }
  EXPECT_EQ(rewrite_chain_choices("drop:1,3"), 6);
  auto dropped = CreateGpuExecutorFactory(plan, spec, std::nullopt);
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  const std::string dropped_log = dropped.value()->Describe();
  EXPECT_NE(dropped_log.find(note + "12 dropped (steps 1-2 at 1 rows; steps 3-6 at 1 rows; "),
            std::string::npos)
      << dropped_log;
  EXPECT_EQ(dropped_log.find("pass without the chain / with it at "), std::string::npos)
      << dropped_log;
  expect_reference(*dropped.value(), "every layer chain dropped");

  // layer_chain_kernel always keeps its chains: nothing checked.
  spec.options.layer_chain = OwnKernelMode::kAlways;
  auto always = CreateGpuExecutorFactory(plan, spec, std::nullopt);
  ASSERT_TRUE(always.ok()) << always.status().ToString();
  EXPECT_EQ(always.value()->Describe().find("layer chains checked"), std::string::npos)
      << always.value()->Describe();
  std::filesystem::remove(cache);
}

// two_stream_halves always on a row plan: every op kind (ZooPlan: fused and unfused
// epilogues, residuals, LayerNorm, pointwise steps) as two halves of the 256- and 512-row
// buckets on two streams, in every precision, the rows of each half against the reference.
TEST(GpuExecutor, TwoStreamHalvesOfEveryOpKindMatchTheReference) {
  SKIP_WITHOUT_GPU();
  auto plan = ZooPlan();
  for (const std::string precision : {"fp32", "tf32", "fp16", "bf16"}) {
    ModelSpec spec = Spec(*plan, precision, DataType::kFp32, /*max_batch=*/512);
    spec.options = testing::Options({{"precision", precision}, {"two_stream_halves", "always"}});
    auto factory = CreateGpuExecutorFactory(plan, spec, std::nullopt);
    ASSERT_TRUE(factory.ok()) << factory.status().ToString();
    const std::string describe = factory.value()->Describe();
    EXPECT_NE(describe.find("two-stream halves for 2 buckets (at 256, 512 rows)"),
              std::string::npos)
        << describe;
    auto instance = factory.value()->CreateInstance(0);
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();
    auto quantize = [&](float v) { return RoundTo(v, precision); };
    for (std::int64_t rows : {129, 256, 300, 511, 512}) {
      std::vector<float> input = Random(rows * plan->input_width(), 1.0f);
      for (float& v : input) v = quantize(v);
      const std::vector<float> out = RunPoisoned(*instance.value(), *plan, input, rows,
                                                 DataType::kFp32);
      const std::vector<double> ref = testing::ReferenceForward(*plan, input, rows, quantize);
      ASSERT_EQ(out.size(), ref.size());
      const auto cut = static_cast<std::ptrdiff_t>((rows <= 256 ? 128 : 256) * plan->output_width());
      const double first = RelativeError(std::vector<float>(out.begin(), out.begin() + cut),
                                         std::vector<double>(ref.begin(), ref.begin() + cut));
      const double second = RelativeError(std::vector<float>(out.begin() + cut, out.end()),
                                          std::vector<double>(ref.begin() + cut, ref.end()));
      std::printf("%s rows=%ld in halves: relative error %.3g and %.3g\n", precision.c_str(),
                  static_cast<long>(rows), first, second);
      EXPECT_LE(first, Tolerance(precision)) << precision << ", rows " << rows << ", first half";
      EXPECT_LE(second, Tolerance(precision)) << precision << ", rows " << rows << ", second half";
    }
  }
}

// Programmatic dependent launch only moves when a kernel may start: programmatic_launch true,
// false and auto (each bucket's choice timed at load) give the same bits, through graphs and
// without them (LayerNorm and the conversions in the zoo, the small-batch and the split-K
// kernels chained layer after layer, whose weight loads start before the layer before has
// finished, the layer-chain kernel, whose first ones do, and the GEMM + LayerNorm kernel). The
// factories read their kernel choices from one cache file, so that they run the same kernels.
TEST(GpuExecutor, ProgrammaticLaunchGivesTheResultsOfOrdinaryLaunches) {
  SKIP_WITHOUT_GPU();
  const std::pair<std::shared_ptr<const plan::Plan>, std::map<std::string, std::string>> cases[] = {
      {ZooPlan(), {{"small_batch_kernel", "always"}}},
      {SmallBatchPlan(), {{"small_batch_kernel", "always"}}},
      {SmallBatchPlan(), {{"small_batch_kernel", "off"}, {"skinny_gemm_kernel", "always"}}},
      {SmallBatchPlan(), {{"small_batch_kernel", "off"}, {"layer_chain_kernel", "always"}}},
      {GemmLayerNormPlan(), {{"gemm_layernorm_kernel", "always"}}}};
  const std::string modes[] = {"false", "true", "auto"};
  for (const auto& [plan, kernels] : cases) {
    const std::filesystem::path cache = std::filesystem::temp_directory_path() /
                                        ("ltserve_algo_cache_" + std::to_string(Rng()()));
    for (const bool graphs : {true, false}) {
      std::unique_ptr<ExecutorInstance> instances[std::size(modes)];
      for (std::size_t m = 0; m < std::size(modes); ++m) {
        ModelSpec spec = Spec(*plan, "bf16", DataType::kFp32);
        std::map<std::string, std::string> parameters = kernels;
        parameters["precision"] = "bf16";
        parameters["cuda_graphs"] = graphs ? "true" : "false";
        parameters["programmatic_launch"] = modes[m];
        spec.options = testing::Options(parameters);
        spec.options.algo_cache_file = cache.string();
        auto factory = CreateGpuExecutorFactory(plan, spec, std::nullopt);
        ASSERT_TRUE(factory.ok()) << factory.status().ToString();
        const std::string log = factory.value()->Describe();
        EXPECT_EQ(log.find("programmatic launch off") != std::string::npos, modes[m] == "false")
            << log;
        EXPECT_EQ(log.find("programmatic launch chosen per bucket") != std::string::npos,
                  modes[m] == "auto")
            << log;
        auto instance = factory.value()->CreateInstance(0);
        ASSERT_TRUE(instance.ok()) << instance.status().ToString();
        instances[m] = std::move(instance).value();
      }
      for (std::int64_t rows : {1, 2, 7, 127, kMaxBatch}) {
        const std::vector<float> input = Random(rows * plan->input_width(), 1.0f);
        const auto off = RunPoisoned(*instances[0], *plan, input, rows, DataType::kFp32);
        for (std::size_t m = 1; m < std::size(modes); ++m) {
          const auto out = RunPoisoned(*instances[m], *plan, input, rows, DataType::kFp32);
          ASSERT_EQ(out.size(), off.size());
          EXPECT_EQ(std::memcmp(out.data(), off.data(), out.size() * sizeof(float)), 0)
              << modes[m] << " against false, rows " << rows
              << (graphs ? " with graphs" : " without graphs");
        }
      }
    }
    std::filesystem::remove(cache);
  }
}

// programmatic_launch auto on Hopper: every bucket of up to kProgrammaticCheckMaxRows rows
// (here all 9, 1 to 200 rows) is timed in its pass and its choice kept in the cache file;
// choices read from the file apply (every bucket rewritten to ordinary launches: the load log
// lists them all, the results stay the reference's) without timing anything; a word that is
// not a choice is timed again; and true or false time nothing.
TEST(GpuExecutor, ProgrammaticLaunchChosenPerBucketComesBackFromTheCache) {
  SKIP_WITHOUT_HOPPER("programmatic dependent launch");
  auto plan = AlignedPlan();
  const std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("ltserve_algo_cache_" + std::to_string(Rng()()));
  ModelSpec spec = Spec(*plan, "bf16", DataType::kFp32);
  spec.options.algo_cache_file = cache.string();
  spec.options.programmatic_launch = ProgrammaticLaunch::kAuto;
  const std::string note = "programmatic launch checked in the pass at 9 buckets: ";
  const std::string timed = "pass with ordinary / programmatic launches at 1 rows ";
  auto first = CreateGpuExecutorFactory(plan, spec, std::nullopt);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_NE(first.value()->Describe().find(note), std::string::npos) << first.value()->Describe();
  EXPECT_NE(first.value()->Describe().find(timed), std::string::npos) << first.value()->Describe();

  const auto rewrite_choices = [&](const std::string& word) {
    return RewriteChoices(cache, "programmatic,", word);
  };
  EXPECT_EQ(rewrite_choices("ordinary"), 9);
  auto ordinary = CreateGpuExecutorFactory(plan, spec, std::nullopt);
  ASSERT_TRUE(ordinary.ok()) << ordinary.status().ToString();
  const std::string ordinary_log = ordinary.value()->Describe();
  EXPECT_NE(ordinary_log.find(note + "ordinary launches at 1, 2, 4, 8, 16, 32, 64, 128, 200 rows"),
            std::string::npos)
      << ordinary_log;
  EXPECT_NE(ordinary_log.find("9 programmatic launch choices from the cache"), std::string::npos)
      << ordinary_log;
  EXPECT_EQ(ordinary_log.find(timed), std::string::npos) << ordinary_log;
  auto instance = ordinary.value()->CreateInstance(0);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  auto quantize = [](float v) { return RoundTo(v, "bf16"); };
  for (std::int64_t rows : {1, 3, 77, 128, 129, kMaxBatch}) {
    std::vector<float> input = Random(rows * plan->input_width(), 1.0f);
    for (float& v : input) v = quantize(v);
    const std::vector<float> out = RunPoisoned(*instance.value(), *plan, input, rows, DataType::kFp32);
    const std::vector<double> ref = testing::ReferenceForward(*plan, input, rows, quantize);
    EXPECT_LE(RelativeError(out, ref), Tolerance("bf16")) << "rows " << rows;
  }

  for (const std::string word : {"off", "ordinary,", "halves"}) {
    EXPECT_EQ(rewrite_choices(word), 9) << word;
    auto reread = CreateGpuExecutorFactory(plan, spec, std::nullopt);
    ASSERT_TRUE(reread.ok()) << word << ": " << reread.status().ToString();
    EXPECT_NE(reread.value()->Describe().find(timed), std::string::npos)
        << word << ": " << reread.value()->Describe();
  }

  for (const ProgrammaticLaunch fixed : {ProgrammaticLaunch::kOn, ProgrammaticLaunch::kOff}) {
    spec.options.programmatic_launch = fixed;
    auto loaded = CreateGpuExecutorFactory(plan, spec, std::nullopt);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ(loaded.value()->Describe().find("programmatic launch checked"), std::string::npos)
        << loaded.value()->Describe();
  }
  std::filesystem::remove(cache);
}

// copies_in_graph: a small bucket's copies in and out run inside its graph (one launch a
// batch). The same kernels (one cache file) give the same bits either way, at every batch size
// on both sides of the largest staged bucket; the staged graph's events still time the three
// phases; and rows past a batch's own, which the staged graph reads and computes, never
// reach its outputs, not even rows of NaN left in staging by an earlier, fuller batch.
TEST(GpuExecutor, CopiesInsideTheGraphGiveTheBitsOfSeparateCopies) {
  SKIP_WITHOUT_GPU();
  // FP32 rows of 1001 in and 1003 out are 8,016 bytes: buckets of up to 32 rows fit the
  // executor's 256 KiB bound for staged copies, 64 and more do not.
  Builder b;
  const auto in = b.Value(1001);
  const auto hidden = b.Linear(in, 1003, true, Activation::kRelu);
  const auto out = b.Linear(hidden, 1003, true, Activation::kNone, hidden);
  b.plan->SetInput(in, plan::InputKind::kRows);
  b.plan->SetOutput(out);
  std::shared_ptr<const plan::Plan> plan = b.plan;
  const std::filesystem::path cache = std::filesystem::temp_directory_path() /
                                      ("ltserve_algo_cache_" + std::to_string(Rng()()));
  std::unique_ptr<ExecutorInstance> instances[2];
  for (int staged = 0; staged < 2; ++staged) {
    ModelSpec spec = Spec(*plan, "bf16", DataType::kFp32);
    spec.options = testing::Options({{"precision", "bf16"},
                                     {"copies_in_graph", staged == 1 ? "true" : "false"}});
    spec.options.algo_cache_file = cache.string();
    auto factory = CreateGpuExecutorFactory(plan, spec, std::nullopt);
    ASSERT_TRUE(factory.ok()) << factory.status().ToString();
    const std::string describe = factory.value()->Describe();
    EXPECT_EQ(describe.find("copies inside the graphs up to 32 rows") != std::string::npos,
              staged == 1)
        << describe;
    auto instance = factory.value()->CreateInstance(0);
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();
    instances[staged] = std::move(instance).value();
  }
  std::filesystem::remove(cache);
  ExecutorInstance& staged = *instances[1];

  // A full bucket of NaN rows first (8 rows: bucket 8), then fewer rows in the same bucket.
  auto buffer = staged.InputBuffer(0, 8 * plan->input_width() * sizeof(float));
  ASSERT_TRUE(buffer.ok());
  testing::WriteInput(buffer.value(), std::vector<float>(8 * plan->input_width(), std::nanf("")),
                      DataType::kFp32);
  BatchShape full;
  full.batch_size = 8;
  ASSERT_TRUE(staged.Execute(full, nullptr).ok());

  const auto quantize = [](float v) { return RoundTo(v, "bf16"); };
  for (std::int64_t rows : {5, 1, 3, 8, 13, 32, 33, 64, 127, kMaxBatch}) {
    std::vector<float> input = Random(rows * plan->input_width(), 1.0f);
    for (float& v : input) v = quantize(v);
    const auto in_graph = RunPoisoned(staged, *plan, input, rows, DataType::kFp32);
    const auto separate = RunPoisoned(*instances[0], *plan, input, rows, DataType::kFp32);
    ASSERT_EQ(in_graph.size(), separate.size());
    EXPECT_EQ(std::memcmp(in_graph.data(), separate.data(), in_graph.size() * sizeof(float)), 0)
        << "rows " << rows;
    const std::vector<double> ref = testing::ReferenceForward(*plan, input, rows, quantize);
    EXPECT_LE(RelativeError(in_graph, ref), kTolBf16) << "rows " << rows;
    ExecuteTimings timings;
    BatchShape shape;
    shape.batch_size = rows;
    ASSERT_TRUE(staged.Execute(shape, &timings).ok());
    EXPECT_GT(timings.input_ns, 0u) << "rows " << rows;
    EXPECT_GT(timings.infer_ns, 0u) << "rows " << rows;
    EXPECT_GT(timings.output_ns, 0u) << "rows " << rows;
  }
}

TEST(GpuExecutor, TwoInstancesOnTwoThreadsGiveTheResultsOfOne) {
  SKIP_WITHOUT_GPU();
  auto plan = AlignedPlan();
  auto factory = CreateGpuExecutorFactory(plan, Spec(*plan, "bf16", DataType::kFp32), std::nullopt);
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  constexpr int kRounds = 20;
  std::vector<std::vector<float>> inputs[2];
  std::vector<std::vector<float>> expected[2];
  auto solo = factory.value()->CreateInstance(0);
  ASSERT_TRUE(solo.ok());
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < kRounds; ++r) {
      const std::int64_t rows = 1 + (Rng()() % kMaxBatch);
      inputs[t].push_back(Random(rows * plan->input_width(), 1.0f));
      expected[t].push_back(RunPoisoned(*solo.value(), *plan, inputs[t].back(), rows, DataType::kFp32));
    }
  }
  std::vector<std::unique_ptr<ExecutorInstance>> instances;
  for (int t = 0; t < 2; ++t) {
    auto instance = factory.value()->CreateInstance(t + 1);
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();
    instances.push_back(std::move(instance.value()));
  }
  std::vector<std::vector<float>> got[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const auto rows = static_cast<std::int64_t>(inputs[t][r].size()) / plan->input_width();
        got[t].push_back(RunPoisoned(*instances[t], *plan, inputs[t][r], rows, DataType::kFp32));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < kRounds; ++r) {
      ASSERT_EQ(got[t][r].size(), expected[t][r].size());
      EXPECT_EQ(std::memcmp(got[t][r].data(), expected[t][r].data(), got[t][r].size() * 4), 0)
          << "thread " << t << " round " << r;
    }
  }
}

TEST(GpuExecutor, RejectsBadBatchesAndBuffers) {
  SKIP_WITHOUT_GPU();
  auto plan = AlignedPlan();
  auto factory = CreateGpuExecutorFactory(plan, Spec(*plan, "bf16", DataType::kFp32), std::nullopt);
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  auto instance = factory.value()->CreateInstance(0);
  ASSERT_TRUE(instance.ok());
  ExecutorInstance& exec = *instance.value();
  EXPECT_EQ(exec.InputBuffer(1, 4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(exec.InputBuffer(0, kMaxBatch * 64 * 4 + 1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(exec.InputBuffer(0, kMaxBatch * 64 * 4).ok());
  for (std::int64_t rows : {0, -1, kMaxBatch + 1}) {
    BatchShape shape;
    shape.batch_size = rows;
    EXPECT_EQ(exec.Execute(shape, nullptr).code(), StatusCode::kInvalidArgument) << rows;
    EXPECT_TRUE(exec.Output(0).empty());
  }
  EXPECT_TRUE(exec.Output(1).empty());
}

TEST(GpuExecutor, RejectsBadParametersAndUnsupportedModels) {
  SKIP_WITHOUT_GPU();
  auto plan = AlignedPlan();
  for (auto [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"precision", "int8"}, {"gelu_epilogue", "fast"}, {"cuda_graphs", "yes"},
           {"cublaslt_workspace_bytes", "-1"}, {"algo_candidates", "many"},
           {"fuse_epilogues", "no"}, {"small_batch_kernel", "sometimes"}}) {
    std::map<std::string, std::string> parameters{{"precision", "bf16"}};
    parameters[name] = value;
    EXPECT_EQ(config::ParseModelOptions(parameters).status().code(), StatusCode::kInvalidArgument)
        << name;
  }
  ModelSpec int_io = Spec(*plan, "bf16", DataType::kInt32);
  EXPECT_EQ(CreateGpuExecutorFactory(plan, int_io, std::nullopt).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateGpuExecutorFactory(nullptr, int_io, std::nullopt).status().code(),
            StatusCode::kInvalidArgument);

  const std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("ltserve_bad_cache_" + std::to_string(Rng()()));
  std::ofstream(cache) << "not a cache\n";
  ModelSpec bad_cache = Spec(*plan, "bf16", DataType::kFp32);
  bad_cache.options.algo_cache_file = cache.string();
  EXPECT_EQ(CreateGpuExecutorFactory(plan, bad_cache, std::nullopt).status().code(),
            StatusCode::kInvalidArgument);
  std::filesystem::remove(cache);

  // Attention heads wider than the kernel holds.
  Builder b;
  const auto in = b.Value(48);
  const auto qkv = b.Linear(in, 3 * 2 * 160, true, Activation::kNone);
  const auto attn = b.Value(2 * 160);
  b.plan->Append(plan::AttentionOp{qkv, attn, 2, 160});
  b.plan->SetInput(in, plan::InputKind::kTokens);
  b.plan->SetOutput(attn);
  ModelSpec tokens = Spec(*b.plan, "bf16", DataType::kFp32);
  tokens.options.max_tokens_per_batch = 256;
  EXPECT_EQ(CreateGpuExecutorFactory(b.plan, tokens, MakeTokenLayout(tokens, std::nullopt).value())
                .status()
                .code(),
            StatusCode::kUnimplemented);
}

TEST(GpuExecutor, OutOfMemoryAtLoadIsAResourceExhaustedError) {
  SKIP_WITHOUT_GPU();
  Builder b;
  const auto in = b.Value(4096);
  const auto out = b.Linear(in, 4096, true, Activation::kRelu);
  b.plan->SetInput(in, plan::InputKind::kRows);
  b.plan->SetOutput(out);
  // 2^31 rows of 4096 bf16 values: 16 TiB per activation, more than any GPU holds.
  auto factory = CreateGpuExecutorFactory(
      b.plan, Spec(*b.plan, "bf16", DataType::kFp32, std::numeric_limits<int>::max()), std::nullopt);
  EXPECT_EQ(factory.status().code(), StatusCode::kResourceExhausted)
      << factory.status().ToString();
  // The failed load leaves the device usable.
  auto plan = AlignedPlan();
  EXPECT_TRUE(CreateGpuExecutorFactory(plan, Spec(*plan, "bf16", DataType::kFp32), std::nullopt).ok());
}

}  // namespace
}  // namespace ltserve
