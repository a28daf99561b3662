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
#include "linear_case.h"

namespace ltserve {
namespace {

using gpu::ElemType;
using gpu::SkinnyGemmConfig;
using plan::Activation;

using Problem = testing::LinearProblem;
using Case = testing::LinearCase;

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

// The device side of a Case, run with one configuration of the kernel.
struct DeviceCase : testing::DeviceLinearCase {
  using DeviceLinearCase::DeviceLinearCase;
  std::vector<std::uint16_t> Run(const Case& c, const SkinnyGemmConfig& config,
                                 bool programmatic) {
    return DeviceLinearCase::Run(c, config.Describe(),
                                 [&](void* x, void* w, void* bias, void* residual, void* y) {
      return gpu::LaunchSkinnyGemm(config, x, w, bias, residual, y, c.p.rows, c.p.n, c.p.k,
                                   c.p.act, c.type, programmatic, nullptr);
    });
  }
};

TEST(SkinnyGemm, EveryShapeAndClusterMatchesReference) {
  SKIP_WITHOUT_HOPPER("the split-K kernel");
  for (const ElemType type : {ElemType::kBf16, ElemType::kFp16}) {
    for (const Problem& p : kProblems) {
      const Case c(p, type);
      DeviceCase device(c);
      for (int cluster : {1, 2, 4, 8, 16}) {
        for (const SkinnyGemmConfig& config : EveryShape(cluster)) {
          c.ExpectMatches(device.Run(c, config, /*programmatic=*/false),
                          c.Name() + ", " + config.Describe());
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
  EXPECT_EQ(launch({0, 1, 4, 1}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({8, 3, 4, 1}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({64, 1, 8, 1}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({8, 2, 8, 1}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
}

TEST(SkinnyGemm, CompiledShapesAreTheLaunchableOnes) {
  int compiled = 0;
  int with_tail = 0;
  for (int m_tile = 1; m_tile <= 128; ++m_tile) {
    for (int row_tiles = 1; row_tiles <= 3; ++row_tiles) {
      for (int unroll : {2, 4, 8}) {
        for (int cluster = 1; cluster <= 32; ++cluster) {
          const SkinnyGemmConfig c{static_cast<std::uint8_t>(m_tile),
                                   static_cast<std::uint8_t>(row_tiles),
                                   static_cast<std::uint8_t>(unroll),
                                   static_cast<std::uint8_t>(cluster)};
          compiled += gpu::SkinnyGemmCompiled(c, false) ? 1 : 0;
          with_tail += gpu::SkinnyGemmCompiled(c, true) ? 1 : 0;
          // The tail's shapes are a subset of the plain kernel's.
          if (gpu::SkinnyGemmCompiled(c, true)) {
            EXPECT_TRUE(gpu::SkinnyGemmCompiled(c, false)) << c.Describe();
          }
        }
      }
    }
  }
  // 4 tiles × 2 shapes of unroll 4 + 3 tiles of unroll 8, each with 5 cluster sizes; the
  // tail: the unroll-4 ones only.
  EXPECT_EQ(compiled, (4 * 2 + 3) * 5);
  EXPECT_EQ(with_tail, 4 * 2 * 5);
  for (const int rows : {1, 9, 33, 128}) {
    for (const SkinnyGemmConfig& c : gpu::SkinnyGemmCandidates(rows, 768, 3072)) {
      EXPECT_TRUE(gpu::SkinnyGemmCompiled(c, false)) << c.Describe();
    }
    for (const SkinnyGemmConfig& c : gpu::SkinnyGemmLayerNormCandidates(rows, 768, 3072)) {
      EXPECT_TRUE(gpu::SkinnyGemmCompiled(c, true)) << c.Describe();
    }
  }
}

TEST(SkinnyGemm, KernelChoicesSurviveTheirTextForm) {
  using gpu::GemmKernel;
  const GemmKernel kernels[] = {GemmKernel{},
                                GemmKernel::SmallBatch(),
                                GemmKernel::Skinny({32, 2, 4, 8}),
                                GemmKernel::Staged({128, 6}),
                                GemmKernel::Staged({64, 1}),
                                GemmKernel::Chain({4, false, 2}),
                                GemmKernel::Chain({1, true, 1}),
                                GemmKernel::Chain({1, false, 3, 2}),
                                GemmKernel::Chain({2, false, 2, 4}),
                                GemmKernel::NormGemm({16, 3, 4}),
                                GemmKernel::NormGemm({8, 1, 8}),
                                GemmKernel::NormGemm(gpu::NormGemmConfig::SplitK({8, 1, 4, 4}))};
  for (const GemmKernel& kernel : kernels) {
    const auto back = GemmKernel::FromText(kernel.ToText());
    ASSERT_TRUE(back.has_value()) << kernel.ToText();
    EXPECT_EQ(*back, kernel) << kernel.ToText();
  }
  const GemmKernel skinny = GemmKernel::Skinny({32, 2, 4, 8});
  EXPECT_EQ(skinny.ToText(), "skinny 32 2 4 8");
  EXPECT_EQ(GemmKernel::Staged({128, 6}).ToText(), "staged 128 6");
  EXPECT_FALSE(GemmKernel::Staged({128, 6}) == GemmKernel::Staged({128, 4}));
  EXPECT_EQ(GemmKernel::Chain({2, true, 1}).ToText(), "chain 2 1 1");
  EXPECT_EQ(GemmKernel::Chain({1, false, 3, 2}).ToText(), "chain-ring 1 2 3");
  // The schedules are told apart: a ring configuration never equals a warp one.
  EXPECT_FALSE(GemmKernel::Chain({1, false, 2, 2}) == GemmKernel::Chain({1, false, 2}));
  EXPECT_EQ(GemmKernel::NormGemm({16, 4, 8}).ToText(), "norm 16 4 8");
  EXPECT_EQ(GemmKernel::NormGemm(gpu::NormGemmConfig::SplitK({16, 2, 4, 8})).ToText(),
            "norm-split 16 2 4 8");
  // The schedules are told apart: a split-K configuration never equals a cluster one.
  EXPECT_FALSE(GemmKernel::NormGemm(gpu::NormGemmConfig::SplitK({16, 2, 4, 8})) ==
               GemmKernel::NormGemm({16, 3, 4}));
  for (const char* bad : {"", "cublas", "skinny 32 2 4", "skinny 32 2 4 0", "skinny 32 2 4 8 1",
                          "small-batch 1", "skinny a b c d", "chain 3 1 1", "chain 2 2 1", "chain 2 1",
                          "chain 2 1 3", "chain 2 1 1 0", "chain-ring 1 3 2", "chain-ring 3 2 2",
                          "chain-ring 1 2 1", "chain-ring 1 4 3", "chain-ring 1 2", "chain-ring 1 2 2 0",
                          "chain-ring 1 0 2", "norm 16 3", "norm 32 3 4", "norm 16 5 4",
                          "norm 16 0 4", "norm 16 3 2", "norm 16 3 4 1", "norm-split 8 1 4",
                          "norm-split 8 1 4 0", "norm-split 8 1 4 4 1",
                          // Numbers in range but no compiled shape: a stale cache file's entries.
                          "skinny 24 1 4 1", "skinny 8 3 4 1", "skinny 64 1 8 1", "skinny 8 1 4 3",
                          "skinny 8 1 4 32", "norm-split 8 1 8 4", "norm-split 24 1 4 4",
                          "norm-split 8 2 8 1", "staged 128", "staged 128 6 1", "staged 32 1",
                          "staged 128 9", "staged 64 0"}) {
    EXPECT_FALSE(GemmKernel::FromText(bad).has_value()) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace ltserve
