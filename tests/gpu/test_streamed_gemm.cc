// The streamed GEMM (server/gpu/streamed_gemm.h) launched directly: every configuration that
// runs a shape against a double-precision reference, at odd sizes (rows off the X tiles, N off
// the 16-row tiles and with several tiles a block, K off the 512-K stages and past 4096), into
// poisoned outputs with a guard band; bit-equal reruns; packed weights bit-equal to row-major
// ones; two layers launched programmatically, the second's ring filled while the first runs;
// what the candidates hold and what the launcher refuses. The candidate and refusal tests need
// no GPU; the others skip where none is usable.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "gpu/streamed_gemm.h"
#include "linear_case.h"

namespace ltserve {
namespace {

using gpu::ElemType;
using gpu::StreamedGemmConfig;
using plan::Activation;
using Problem = testing::LinearProblem;
using Case = testing::LinearCase;
using testing::SmCount;

constexpr int kH200Sms = 132;

const Problem kProblems[] = {
    {1, 61, 64, true, false, Activation::kRelu},
    {3, 200, 136, false, true, Activation::kGeluTanh},
    {8, 129, 1000, true, true, Activation::kNone},
    {13, 77, 264, true, false, Activation::kSilu},
    {32, 256, 2048, true, true, Activation::kGeluErf},
    {5, 1000, 8, true, false, Activation::kNone},
    {17, 3000, 1544, true, true, Activation::kTanh},
    {2, 4100, 4104, true, false, Activation::kSigmoid},
};

// Every configuration, whether it runs the shape or not.
std::vector<StreamedGemmConfig> EveryConfiguration() {
  std::vector<StreamedGemmConfig> configs;
  for (int m_tile : {8, 16, 32}) {
    for (int split : {1, 2, 4, 8}) {
      for (int stages : {2, 4, 8}) {
        for (int blocks : {1, 2, 3}) {
          configs.push_back(StreamedGemmConfig{
              static_cast<std::uint8_t>(m_tile), static_cast<std::uint8_t>(split),
              static_cast<std::uint8_t>(stages), static_cast<std::uint8_t>(blocks)});
        }
      }
    }
  }
  return configs;
}

std::vector<std::uint16_t> RunStreamed(testing::DeviceLinearCase& device, const Case& c,
                               const StreamedGemmConfig& config, bool programmatic) {
  return device.Run(c, config.Describe(), [&](void* x, void* w, void* bias, void* residual, void* y) {
    return gpu::LaunchStreamedGemm(config, x, w, bias, residual, y, c.p.rows, c.p.n, c.p.k,
                                   c.p.act, c.type, programmatic, nullptr);
  });
}

TEST(StreamedGemm, EveryConfigurationThatRunsAShapeMatchesReference) {
  SKIP_WITHOUT_HOPPER("the streamed GEMM");
  const int sms = SmCount();
  for (const ElemType type : {ElemType::kBf16, ElemType::kFp16}) {
    for (const Problem& p : kProblems) {
      const Case c(p, type);
      testing::DeviceLinearCase device(c);
      int ran = 0;
      for (const StreamedGemmConfig& config : EveryConfiguration()) {
        if (!gpu::StreamedGemmRuns(config, p.rows, p.n, p.k, sms)) continue;
        ++ran;
        c.ExpectMatches(RunStreamed(device, c, config, /*programmatic=*/false),
                        c.Name() + ", " + config.Describe());
      }
      EXPECT_GE(ran, 2) << c.Name();
    }
  }
}

// The partial sums are added in warp order, then rank order: the same bits every run.
TEST(StreamedGemm, RerunsAreBitEqual) {
  SKIP_WITHOUT_HOPPER("the streamed GEMM");
  const Case c(kProblems[6], ElemType::kBf16);
  testing::DeviceLinearCase device(c);
  const auto candidates = gpu::StreamedGemmCandidates(c.p.rows, c.p.n, c.p.k, SmCount());
  ASSERT_FALSE(candidates.empty());
  for (const StreamedGemmConfig& config : candidates) {
    const auto first = RunStreamed(device, c, config, false);
    const auto second = RunStreamed(device, c, config, true);
    EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * 2), 0) << config.Describe();
  }
}

// Packed weights (one copy a stage) are the same numbers in another order: the same bits out,
// at every configuration that takes them, ragged tiles and chunks included.
TEST(StreamedGemm, PackedWeightsGiveTheBitsOfRowMajorOnes) {
  SKIP_WITHOUT_HOPPER("the streamed GEMM");
  const int sms = SmCount();
  // K 1096: two whole 512-K chunks and 72 more; K 2048 at 17 rows: split 2 and 4 (slices of
  // two chunks and of one; split 1 would hold too much X).
  for (const Problem& p : {Problem{3, 200, 1096, true, true, Activation::kGeluTanh},
                           Problem{8, 129, 1024, true, false, Activation::kRelu},
                           Problem{17, 3000, 2048, false, true, Activation::kNone}}) {
    const Case c(p, ElemType::kBf16);
    testing::DeviceLinearCase device(c);
    const auto packed_w = gpu::PackStreamedGemmWeights(c.w.data(), p.n, p.k);
    ASSERT_EQ(static_cast<std::int64_t>(packed_w.size()), gpu::StreamedGemmPackedElements(p.n, p.k));
    testing::DeviceHalves packed(packed_w.size());
    packed.Upload(packed_w);
    int ran = 0;
    for (const StreamedGemmConfig& config : EveryConfiguration()) {
      if (!gpu::StreamedGemmRuns(config, p.rows, p.n, p.k, sms) ||
          !gpu::StreamedGemmTakesPacked(config, p.k)) {
        continue;
      }
      ++ran;
      const auto row_major = RunStreamed(device, c, config, false);
      const auto from_packed = device.Run(c, config.Describe() + ", packed",
                                          [&](void* x, void*, void* bias, void* residual, void* y) {
        return gpu::LaunchStreamedGemm(config, x, packed.data(), bias, residual, y, p.rows, p.n,
                                       p.k, p.act, c.type, /*programmatic=*/true, nullptr,
                                       gpu::StreamedWeights::kPacked);
      });
      c.ExpectMatches(from_packed, c.Name() + ", " + config.Describe() + ", packed");
      EXPECT_EQ(std::memcmp(row_major.data(), from_packed.data(), row_major.size() * 2), 0)
          << c.Name() << ", " << config.Describe();
    }
    EXPECT_GE(ran, 2) << c.Name();
  }
}

// Layer two's weights are copied in before it waits for layer one; its X, layer one's output,
// only after. Launched programmatically right behind layer one (a large, slow first layer), it
// must still see all of layer one's output: checked against a reference computed from the
// output layer one left.
TEST(StreamedGemm, ASecondLayerLaunchedProgrammaticallyReadsTheFirstOnesWholeOutput) {
  SKIP_WITHOUT_HOPPER("the streamed GEMM");
  const int sms = SmCount();
  for (const ElemType type : {ElemType::kBf16, ElemType::kFp16}) {
    const Case first(Problem{4, 4096, 4104, true, false, Activation::kRelu}, type);
    testing::DeviceLinearCase first_device(first);
    testing::DeviceHalves second_w(std::size_t{520} * 4096);
    const auto w2 = testing::RoundToBits(testing::Random(std::size_t{520} * 4096, 1.0f / 64), type);
    second_w.Upload(w2);
    testing::DeviceHalves second_y(std::size_t{4} * 520 + testing::kGuard);
    for (const StreamedGemmConfig& config : gpu::StreamedGemmCandidates(4, 520, 4096, sms)) {
      const StreamedGemmConfig big{8, 1, 8};
      second_y.Poison();
      const auto layer_one = first_device.Run(first, big.Describe(),
                                              [&](void* x, void* w, void* bias, void*, void* y) {
        // Poisoned output, then layer one and, behind it on the same stream, layer two.
        cudaError_t error = gpu::LaunchStreamedGemm(big, x, w, bias, nullptr, y, 4, 4096, 4104,
                                                    Activation::kRelu, type, false, nullptr);
        if (error != cudaSuccess) return error;
        return gpu::LaunchStreamedGemm(config, y, second_w.data(), nullptr, nullptr,
                                       second_y.data(), 4, 520, 4096, Activation::kNone, type,
                                       /*programmatic=*/true, nullptr);
      });
      first.ExpectMatches(layer_one, "layer one");
      std::vector<double> reference(4 * 520);
      for (int m = 0; m < 4; ++m) {
        for (int n = 0; n < 520; ++n) {
          double sum = 0;
          for (int k = 0; k < 4096; ++k) {
            sum += static_cast<double>(testing::FromBits(layer_one[m * 4096 + k], type)) *
                   testing::FromBits(w2[static_cast<std::size_t>(n) * 4096 + k], type);
          }
          reference[m * 520 + n] = sum;
        }
      }
      testing::ExpectMatches(second_y.Download(), reference, type, 520,
                             "layer two, " + config.Describe());
    }
  }
}

TEST(StreamedGemm, CandidatesTakeTheSmallestTileAndOnlyWhatFits) {
  for (const auto& [rows, m_tile] : {std::pair{1, 8}, {8, 8}, {9, 16}, {16, 16}, {17, 32}, {32, 32}}) {
    const auto candidates = gpu::StreamedGemmCandidates(rows, 4096, 1024, kH200Sms);
    EXPECT_FALSE(candidates.empty()) << rows << " rows";
    for (const StreamedGemmConfig& c : candidates) EXPECT_EQ(c.m_tile, m_tile) << rows << " rows";
  }
  // One row of K 4096 fits whole: every split, one block an SM with 4 and 8 stages, two with 2
  // and 4; three only with 2 (three rings of 4 and X do not fit an SM).
  std::set<int> splits;
  int one = 0;
  int three = 0;
  for (const StreamedGemmConfig& c : gpu::StreamedGemmCandidates(1, 4096, 4096, kH200Sms)) {
    splits.insert(c.split);
    one += c.blocks_per_sm == 1 ? 1 : 0;
    three += c.blocks_per_sm == 3 ? 1 : 0;
    if (c.blocks_per_sm == 3 && c.split == 1) {
      EXPECT_EQ(c.stages, 2) << c.Describe();
    }
  }
  EXPECT_EQ(splits, (std::set<int>{1, 2, 4, 8}));
  EXPECT_EQ(one, 8);
  EXPECT_GE(three, 4);
  // 32 rows of K 4096 are 264 KiB of X: only slices of a quarter or less fit.
  const auto wide = gpu::StreamedGemmCandidates(32, 4096, 4096, kH200Sms);
  EXPECT_FALSE(wide.empty());
  for (const StreamedGemmConfig& c : wide) EXPECT_GE(c.split, 4) << c.Describe();
  // K 8 cannot be split: a second block would have no K.
  for (const StreamedGemmConfig& c : gpu::StreamedGemmCandidates(1, 4096, 8, kH200Sms)) {
    EXPECT_EQ(c.split, 1) << c.Describe();
  }
  // No more blocks in a cluster than SMs.
  for (const StreamedGemmConfig& c : gpu::StreamedGemmCandidates(1, 4096, 4096, 2)) {
    EXPECT_LE(c.split, 2) << c.Describe();
  }
  EXPECT_TRUE(gpu::StreamedGemmCandidates(0, 4096, 4096, kH200Sms).empty());
  EXPECT_TRUE(gpu::StreamedGemmCandidates(33, 4096, 4096, kH200Sms).empty());
}

TEST(StreamedGemm, SupportsOnlyHopperSixteenBitAndWholeVectorsOfK) {
  EXPECT_TRUE(gpu::StreamedGemmSupports(9, ElemType::kBf16, 32, 8));
  EXPECT_TRUE(gpu::StreamedGemmSupports(10, ElemType::kFp16, 1, 4096));
  EXPECT_FALSE(gpu::StreamedGemmSupports(8, ElemType::kBf16, 1, 4096));
  EXPECT_FALSE(gpu::StreamedGemmSupports(9, ElemType::kFp32, 1, 4096));
  EXPECT_FALSE(gpu::StreamedGemmSupports(9, ElemType::kBf16, 33, 4096));
  EXPECT_FALSE(gpu::StreamedGemmSupports(9, ElemType::kBf16, 0, 4096));
  EXPECT_FALSE(gpu::StreamedGemmSupports(9, ElemType::kBf16, 4, 4092));
}

// Refused before anything reaches the GPU, so these run anywhere.
TEST(StreamedGemm, LauncherRefusesWhatItCannotRun) {
  const StreamedGemmConfig good{8, 1, 4};
  const auto launch = [](const StreamedGemmConfig& c, ElemType type, std::int64_t rows,
                         std::int64_t n, std::int64_t k) {
    return gpu::LaunchStreamedGemm(c, nullptr, nullptr, nullptr, nullptr, nullptr, rows, n, k,
                                   Activation::kNone, type, false, nullptr);
  };
  EXPECT_EQ(launch(good, ElemType::kFp32, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, ElemType::kBf16, 4, 64, 60), cudaErrorInvalidValue);  // K % 8
  EXPECT_EQ(launch(good, ElemType::kBf16, 0, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, ElemType::kBf16, 33, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, ElemType::kBf16, 4, 0, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, ElemType::kBf16, 9, 64, 64), cudaErrorInvalidValue);  // rows > m_tile
  EXPECT_EQ(launch({24, 1, 4}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({8, 3, 4}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({8, 16, 4}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({8, 1, 5}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({8, 1, 4, 0}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({8, 1, 4, 4}, ElemType::kBf16, 4, 64, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch({8, 1, 8, 3}, ElemType::kBf16, 8, 64, 4096), cudaErrorInvalidValue);  // smem
  EXPECT_EQ(launch({32, 1, 4}, ElemType::kBf16, 32, 64, 4096), cudaErrorInvalidValue);  // X
  // Packed weights need K slices that start on a 512-K chunk: 1544 / 2 = 772 does not.
  EXPECT_EQ(gpu::LaunchStreamedGemm({8, 2, 4}, nullptr, nullptr, nullptr, nullptr, nullptr, 4, 64,
                                    1544, Activation::kNone, ElemType::kBf16, false, nullptr,
                                    gpu::StreamedWeights::kPacked),
            cudaErrorInvalidValue);
  EXPECT_TRUE(gpu::StreamedGemmTakesPacked({8, 1, 4}, 1544));
  EXPECT_TRUE(gpu::StreamedGemmTakesPacked({8, 8, 4}, 4096));
  EXPECT_FALSE(gpu::StreamedGemmTakesPacked({8, 4, 4}, 1024));
}

}  // namespace
}  // namespace ltserve
