// The staged-weights GEMM (server/gpu/staged_gemm.h) launched directly: both X tiles at every
// cluster size against a double-precision reference, at odd sizes (rows off the 8-row mma
// tiles and the 64/128-row X tiles, N off the 64-output blocks, K from 8 to slices of several
// hundred and off the 64-element boxes), into poisoned outputs with a guard band; bit-equal
// reruns, programmatic or not; the candidates and what the launcher refuses (those need no GPU,
// except a misaligned operand, which only the tensor-map encoder sees).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gpu/staged_gemm.h"
#include "linear_case.h"

namespace ltserve {
namespace {

using gpu::ElemType;
using gpu::StagedGemmConfig;
using plan::Activation;

using Problem = testing::LinearProblem;
using Case = testing::LinearCase;

// K = 8 and 40 leave most blocks of a cluster with zeros only (boxes wholly past K); 776 and
// 1000 end inside a box; 3072 is BERT-base's FFN down projection (slices of 384 at 8 blocks).
const Problem kProblems[] = {
    {1, 61, 8, true, false, Activation::kRelu},
    {13, 130, 40, false, true, Activation::kGeluTanh},
    {64, 64, 776, true, true, Activation::kNone},
    {65, 300, 1000, true, false, Activation::kSilu},
    {100, 77, 264, false, false, Activation::kGeluErf},
    {128, 190, 3072, true, true, Activation::kTanh},
    {127, 129, 520, true, true, Activation::kSigmoid},
};

struct DeviceCase : testing::DeviceLinearCase {
  using DeviceLinearCase::DeviceLinearCase;
  std::vector<std::uint16_t> Run(const Case& c, const StagedGemmConfig& config,
                                 bool programmatic) {
    return DeviceLinearCase::Run(c, config.Describe(),
                                 [&](void* x, void* w, void* bias, void* residual, void* y) {
      return gpu::LaunchStagedGemm(config, x, w, bias, residual, y, c.p.rows, c.p.n, c.p.k,
                                   c.p.act, c.type, programmatic, nullptr);
    });
  }
};

TEST(StagedGemm, EveryTileAndClusterMatchesReference) {
  SKIP_WITHOUT_HOPPER("the staged-weights kernel");
  for (const ElemType type : {ElemType::kBf16, ElemType::kFp16}) {
    for (const Problem& p : kProblems) {
      const Case c(p, type);
      DeviceCase device(c);
      for (const int m_tile : {64, 128}) {
        for (int cluster = 1; cluster <= 8; ++cluster) {
          const StagedGemmConfig config{static_cast<std::uint8_t>(m_tile),
                                        static_cast<std::uint8_t>(cluster)};
          if (gpu::StagedGemmSharedBytes(config, p.k) > gpu::kStagedGemmMaxSharedBytes) continue;
          c.ExpectMatches(device.Run(c, config, /*programmatic=*/false),
                          c.Name() + ", " + config.Describe());
        }
      }
    }
  }
}

// Each block sums its slice in K order and the cluster adds the blocks in rank order: the
// same launch twice gives the same bits, programmatic or not.
TEST(StagedGemm, RerunsAreBitEqual) {
  SKIP_WITHOUT_HOPPER("the staged-weights kernel");
  const Case c(kProblems[5], ElemType::kBf16);
  DeviceCase device(c);
  const auto candidates = gpu::StagedGemmCandidates(c.p.rows, c.p.n, c.p.k);
  ASSERT_FALSE(candidates.empty());
  for (const StagedGemmConfig& config : candidates) {
    const auto first = device.Run(c, config, false);
    const auto second = device.Run(c, config, true);
    EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * 2), 0) << config.Describe();
  }
}

TEST(StagedGemm, CandidatesFitSharedMemoryAndGiveEveryBlockSomeK) {
  for (const auto& [rows, m_tile] : {std::pair{1, 64}, {64, 64}, {65, 128}, {128, 128}}) {
    for (const StagedGemmConfig& c : gpu::StagedGemmCandidates(rows, 2304, 768)) {
      EXPECT_EQ(c.m_tile, m_tile) << rows << " rows";
    }
  }
  // 768 at 128 rows: slices of 384, 256, 192 and 128 (2, 3, 4 and 6 blocks; 768 whole would
  // take 289 KiB, and 5, 7 or 8 blocks would leave the last without K).
  const auto bert = gpu::StagedGemmCandidates(128, 2304, 768);
  ASSERT_EQ(bert.size(), 4u);
  EXPECT_EQ(bert[0].cluster, 2);
  EXPECT_EQ(bert[3].cluster, 6);
  // 4096 at 128 rows: only 8 blocks make a slice (512) small enough.
  const auto wide = gpu::StagedGemmCandidates(128, 4096, 4096);
  ASSERT_EQ(wide.size(), 1u);
  EXPECT_EQ(wide[0].cluster, 8);
  // 40 = two slices of 32 at most: a third block would have none.
  for (const StagedGemmConfig& c : gpu::StagedGemmCandidates(8, 64, 40)) {
    EXPECT_LE(c.cluster, 2) << c.Describe();
    EXPECT_LT((c.cluster - 1) * gpu::StagedGemmSlice(c, 40), 40) << c.Describe();
  }
  for (const int k : {8, 264, 768, 3072, 4096}) {
    for (const StagedGemmConfig& c : gpu::StagedGemmCandidates(100, 512, k)) {
      EXPECT_LE(gpu::StagedGemmSharedBytes(c, k), gpu::kStagedGemmMaxSharedBytes) << c.Describe();
      EXPECT_EQ(gpu::StagedGemmSlice(c, k) % 64, 0) << c.Describe();
      EXPECT_GE(gpu::StagedGemmSlice(c, k) * c.cluster, k) << c.Describe();
    }
  }
  EXPECT_TRUE(gpu::StagedGemmCandidates(0, 64, 64).empty());
  EXPECT_TRUE(gpu::StagedGemmCandidates(129, 64, 64).empty());
  EXPECT_TRUE(gpu::StagedGemmCandidates(4, 64, 60).empty());
  EXPECT_TRUE(gpu::StagedGemmCandidates(4, 0, 64).empty());
}

// The copy engine takes tiles from 16-byte aligned rows only: an operand that is not is refused
// when its tensor map is made, before anything is launched, and the output keeps its poison.
TEST(StagedGemm, MisalignedOperandIsRefused) {
  SKIP_WITHOUT_HOPPER("the staged-weights kernel");
  const Case c(kProblems[2], ElemType::kBf16);
  DeviceCase device(c);
  const StagedGemmConfig config{64, 2};
  cudaError_t misaligned_x = cudaSuccess;
  cudaError_t misaligned_w = cudaSuccess;
  const auto out = device.DeviceLinearCase::Run(
      c, "misaligned", [&](void* x, void* w, void* bias, void* residual, void* y) {
        misaligned_x = gpu::LaunchStagedGemm(config, static_cast<char*>(x) + 2, w, bias, residual,
                                             y, c.p.rows, c.p.n, c.p.k, c.p.act, c.type, false,
                                             nullptr);
        misaligned_w = gpu::LaunchStagedGemm(config, x, static_cast<char*>(w) + 2, bias, residual,
                                             y, c.p.rows, c.p.n, c.p.k, c.p.act, c.type, false,
                                             nullptr);
        return cudaSuccess;
      });
  EXPECT_EQ(misaligned_x, cudaErrorInvalidValue);
  EXPECT_EQ(misaligned_w, cudaErrorInvalidValue);
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](std::uint16_t v) { return v == 0xffff; }));
  // The same buffers, aligned, give the reference.
  c.ExpectMatches(device.Run(c, config, false), c.Name());
}

// Refused before anything reaches the GPU, so these run anywhere.
TEST(StagedGemm, LauncherRefusesWhatItCannotRun) {
  const StagedGemmConfig good{64, 1};
  const auto launch = [](const StagedGemmConfig& c, ElemType type, std::int64_t rows,
                         std::int64_t n, std::int64_t k) {
    return gpu::LaunchStagedGemm(c, nullptr, nullptr, nullptr, nullptr, nullptr, rows, n, k,
                                 Activation::kNone, type, false, nullptr);
  };
  EXPECT_EQ(launch(good, ElemType::kFp32, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, ElemType::kBf16, 4, 64, 60), cudaErrorInvalidValue);  // K % 8
  EXPECT_EQ(launch(good, ElemType::kBf16, 0, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, ElemType::kBf16, 129, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, ElemType::kBf16, 4, 0, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({32, 1}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({64, 9}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({64, 16}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({64, 0}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  // A slice of 4096 at 192 staged rows is 1.5 MiB of shared memory.
  EXPECT_EQ(launch({128, 1}, ElemType::kBf16, 128, 64, 4096), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace ltserve
