// The split-K skinny GEMM (server/gpu/skinny_gemm.h) launched directly: every compiled shape at
// every cluster size against a double-precision reference, at odd sizes (rows, N and K off the
// tile sizes, K off the chunk size), into poisoned outputs with a guard band; bit-equal reruns;
// and what the launcher refuses. The candidate and refusal tests need no GPU; the others skip
// where none is usable.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/float16.h"
#include "gpu/gemm_kernel.h"
#include "gpu/gpu_executor.h"
#include "gpu/skinny_gemm.h"
#include "reference.h"
#include "sixteen_bit.h"
#include "test_support.h"

namespace ltserve {
namespace {

using gpu::ElemType;
using gpu::SkinnyGemmConfig;
using plan::Activation;
using testing::DeviceHalves;
using testing::FromBits;
using testing::kGuard;
using testing::RoundToBits;
using testing::Random;

struct Problem {
  std::int64_t rows, n, k;
  bool bias, residual;
  Activation act;
};

// Rows on and off the X tiles (8..64, and two tiles of 64), N off the 64- and 128-row blocks,
// K at the 8-element minimum, inside one chunk, and a chunk and a bit past whole chunks.
const Problem kProblems[] = {
    {1, 61, 64, true, false, Activation::kRelu},
    {3, 200, 136, false, true, Activation::kGeluTanh},
    {8, 129, 1000, true, true, Activation::kNone},
    {13, 77, 264, true, false, Activation::kSilu},
    {32, 256, 2048, true, true, Activation::kGeluErf},
    {37, 100, 520, false, false, Activation::kNone},
    {64, 190, 776, true, true, Activation::kTanh},
    {100, 65, 392, true, true, Activation::kSigmoid},
    {128, 300, 768, true, true, Activation::kGeluTanh},
    {5, 1000, 8, true, false, Activation::kNone},
};

// Every compiled (m_tile, row_tiles, unroll), at `cluster`.
std::vector<SkinnyGemmConfig> EveryShape(int cluster) {
  std::vector<SkinnyGemmConfig> shapes;
  for (int m_tile : {8, 16, 32, 64}) {
    for (const auto& [row_tiles, unroll] : {std::pair{1, 4}, {2, 4}, {1, 8}}) {
      if (unroll == 8 && m_tile > 32) continue;
      shapes.push_back(SkinnyGemmConfig{static_cast<std::uint8_t>(m_tile),
                                        static_cast<std::uint8_t>(row_tiles),
                                        static_cast<std::uint8_t>(unroll),
                                        static_cast<std::uint8_t>(cluster)});
    }
  }
  return shapes;
}

// One problem's data, rounded to the storage type, and its double-precision reference.
struct Case {
  Problem p;
  ElemType type;
  std::vector<std::uint16_t> x, w, bias, residual;
  std::vector<double> reference;

  Case(const Problem& problem, ElemType t) : p(problem), type(t) {
    const auto quantize = [&](const std::vector<float>& values) { return RoundToBits(values, type); };
    x = quantize(Random(p.rows * p.k, 1.0f));
    w = quantize(Random(p.n * p.k, 1.0f / std::sqrt(static_cast<float>(p.k))));
    if (p.bias) bias = quantize(Random(p.n, 0.5f));
    if (p.residual) residual = quantize(Random(p.rows * p.n, 1.0f));
    reference.resize(p.rows * p.n);
    for (std::int64_t m = 0; m < p.rows; ++m) {
      for (std::int64_t n = 0; n < p.n; ++n) {
        double sum = 0;
        for (std::int64_t k = 0; k < p.k; ++k) {
          sum += static_cast<double>(FromBits(x[m * p.k + k], type)) * FromBits(w[n * p.k + k], type);
        }
        if (p.bias) sum += FromBits(bias[n], type);
        if (p.residual) sum += FromBits(residual[m * p.n + n], type);
        reference[m * p.n + n] = testing::Activate(p.act, sum);
      }
    }
  }
};

// The device side of a Case: inputs uploaded once, an output with a guard band.
struct DeviceCase {
  DeviceHalves x, w, bias, residual, y;
  explicit DeviceCase(const Case& c)
      : x(c.x.size()), w(c.w.size()), bias(std::max<std::size_t>(c.bias.size(), 1)),
        residual(std::max<std::size_t>(c.residual.size(), 1)),
        y(static_cast<std::size_t>(c.p.rows * c.p.n) + kGuard) {
    x.Upload(c.x);
    w.Upload(c.w);
    if (c.p.bias) bias.Upload(c.bias);
    if (c.p.residual) residual.Upload(c.residual);
  }
  // Poisons the output, runs `config` and returns the output with its guard band.
  std::vector<std::uint16_t> Run(const Case& c, const SkinnyGemmConfig& config,
                                 bool programmatic) {
    EXPECT_EQ(cudaMemset(y.data(), 0xff, (c.p.rows * c.p.n + kGuard) * 2), cudaSuccess);
    EXPECT_EQ(gpu::LaunchSkinnyGemm(config, x.data(), w.data(), c.p.bias ? bias.data() : nullptr,
                                    c.p.residual ? residual.data() : nullptr, y.data(), c.p.rows,
                                    c.p.n, c.p.k, c.p.act, c.type, programmatic, nullptr),
              cudaSuccess)
        << config.Describe();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << config.Describe();
    return y.Download();
  }
};

void ExpectMatches(const Case& c, const std::vector<std::uint16_t>& out, const std::string& what) {
  testing::ExpectMatches(out, c.reference, c.type, c.p.n, what);
}

std::string Name(const Problem& p, ElemType type) {
  return std::string(type == ElemType::kBf16 ? "bf16" : "fp16") + " " + std::to_string(p.rows) +
         "x" + std::to_string(p.k) + " -> " + std::to_string(p.n);
}

TEST(SkinnyGemm, EveryShapeAndClusterMatchesReference) {
  SKIP_WITHOUT_HOPPER("the split-K kernel");
  for (const ElemType type : {ElemType::kBf16, ElemType::kFp16}) {
    for (const Problem& p : kProblems) {
      const Case c(p, type);
      DeviceCase device(c);
      for (int cluster : {1, 2, 4, 8, 16}) {
        for (const SkinnyGemmConfig& config : EveryShape(cluster)) {
          ExpectMatches(c, device.Run(c, config, /*programmatic=*/false),
                        Name(p, type) + ", " + config.Describe());
        }
      }
    }
  }
}

// The sum over the cluster runs in rank order and every block's loop in chunk order: the same
// launch twice gives the same bits, programmatic or not.
TEST(SkinnyGemm, RerunsAreBitEqual) {
  SKIP_WITHOUT_HOPPER("the split-K kernel");
  const Case c(kProblems[4], ElemType::kBf16);
  DeviceCase device(c);
  for (const SkinnyGemmConfig& config : gpu::SkinnyGemmCandidates(c.p.rows, c.p.n, c.p.k)) {
    const auto first = device.Run(c, config, false);
    const auto second = device.Run(c, config, true);
    EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * 2), 0) << config.Describe();
  }
}

TEST(SkinnyGemm, CandidatesTakeTheSmallestTileAndNeverSplitPastTheChunks) {
  for (const auto& [rows, m_tile] :
       {std::pair{1, 8}, {8, 8}, {9, 16}, {17, 32}, {33, 64}, {64, 64}, {128, 64}}) {
    for (const SkinnyGemmConfig& c : gpu::SkinnyGemmCandidates(rows, 4096, 4096)) {
      EXPECT_EQ(c.m_tile, m_tile) << rows << " rows";
      EXPECT_FALSE(c.unroll == 8 && c.m_tile > 32) << rows << " rows";
    }
  }
  // 4096 = 32 chunks of 128 or 16 of 256: every cluster size; 64 = one chunk: no split.
  EXPECT_EQ(gpu::SkinnyGemmCandidates(4, 4096, 4096).size(), 15u);
  for (const SkinnyGemmConfig& c : gpu::SkinnyGemmCandidates(4, 4096, 64)) {
    EXPECT_EQ(c.cluster, 1) << c.Describe();
  }
  // 384 = 3 chunks of 128 or 2 of 256: clusters up to 2.
  for (const SkinnyGemmConfig& c : gpu::SkinnyGemmCandidates(4, 4096, 384)) {
    EXPECT_LE(c.cluster, 2) << c.Describe();
  }
  EXPECT_TRUE(gpu::SkinnyGemmCandidates(0, 4096, 4096).empty());
}

TEST(SkinnyGemm, SupportsOnlyHopperSixteenBitAndWholeVectorsOfK) {
  EXPECT_TRUE(gpu::SkinnyGemmSupports(9, ElemType::kBf16, 128, 8));
  EXPECT_TRUE(gpu::SkinnyGemmSupports(10, ElemType::kFp16, 1, 4096));
  EXPECT_FALSE(gpu::SkinnyGemmSupports(8, ElemType::kBf16, 1, 4096));
  EXPECT_FALSE(gpu::SkinnyGemmSupports(9, ElemType::kFp32, 1, 4096));
  EXPECT_FALSE(gpu::SkinnyGemmSupports(9, ElemType::kBf16, 129, 4096));
  EXPECT_FALSE(gpu::SkinnyGemmSupports(9, ElemType::kBf16, 0, 4096));
  EXPECT_FALSE(gpu::SkinnyGemmSupports(9, ElemType::kBf16, 4, 4092));
}

// Refused before anything reaches the GPU, so these run anywhere.
TEST(SkinnyGemm, LauncherRefusesWhatItCannotRun) {
  const SkinnyGemmConfig good{8, 1, 4, 1};
  const auto launch = [](const SkinnyGemmConfig& c, ElemType type, std::int64_t rows,
                         std::int64_t n, std::int64_t k) {
    return gpu::LaunchSkinnyGemm(c, nullptr, nullptr, nullptr, nullptr, nullptr, rows, n, k,
                                 Activation::kNone, type, false, nullptr);
  };
  EXPECT_EQ(launch(good, ElemType::kFp32, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, ElemType::kBf16, 4, 64, 60), cudaErrorInvalidValue);   // K % 8
  EXPECT_EQ(launch(good, ElemType::kBf16, 0, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, ElemType::kBf16, 129, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, ElemType::kBf16, 4, 0, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({8, 1, 4, 3}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({8, 1, 4, 32}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({24, 1, 4, 1}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({8, 3, 4, 1}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({64, 1, 8, 1}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({8, 2, 8, 1}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
}

TEST(SkinnyGemm, KernelChoicesSurviveTheirTextForm) {
  using gpu::GemmKernel;
  const GemmKernel kernels[] = {GemmKernel{},
                                GemmKernel::SmallBatch(),
                                GemmKernel::Skinny({32, 2, 4, 8}),
                                GemmKernel::Chain({4, false, 2}),
                                GemmKernel::Chain({1, true, 1}),
                                GemmKernel::NormGemm({16, 3, 4}),
                                GemmKernel::NormGemm({8, 1, 8})};
  for (const GemmKernel& kernel : kernels) {
    const auto back = GemmKernel::FromText(kernel.ToText());
    ASSERT_TRUE(back.has_value()) << kernel.ToText();
    EXPECT_EQ(*back, kernel) << kernel.ToText();
  }
  const GemmKernel skinny = GemmKernel::Skinny({32, 2, 4, 8});
  EXPECT_EQ(skinny.ToText(), "skinny 32 2 4 8");
  EXPECT_EQ(GemmKernel::Chain({2, true, 1}).ToText(), "chain 2 1 1");
  EXPECT_EQ(GemmKernel::NormGemm({16, 4, 8}).ToText(), "norm 16 4 8");
  for (const char* bad : {"", "cublas", "skinny 32 2 4", "skinny 32 2 4 0", "skinny 32 2 4 8 1",
                          "small-batch 1", "skinny a b c d", "chain 3 1 1", "chain 2 2 1", "chain 2 1",
                          "chain 2 1 3", "chain 2 1 1 0", "norm 16 3", "norm 32 3 4", "norm 16 5 4",
                          "norm 16 0 4", "norm 16 3 2", "norm 16 3 4 1"}) {
    EXPECT_FALSE(GemmKernel::FromText(bad).has_value()) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace ltserve
