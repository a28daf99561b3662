// The GEMM + LayerNorm kernel (server/gpu/norm_gemm.h) launched directly: every compiled
// shape whose cluster covers the row, against a double-precision reference of
// LayerNorm(x·wᵀ + bias + residual)·gamma + beta, at odd sizes (rows off the tiles, outputs off
// the blocks, K off the step), into poisoned outputs with a guard band, the residual as the
// GEMM's or as the LayerNorm's; the split-K schedule against a double LayerNorm of the
// pre-norm sum its GEMM stores (plus the LayerNorm's residual), at every row-tile size, its
// counters left zero, back to back on a stream and replayed from a graph; bit-equal reruns;
// what the launcher refuses. The candidate and refusal tests need no GPU;
// the others skip where no Hopper GPU is usable.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/cuda_resources.h"
#include "gpu/gpu_model.h"
#include "gpu/norm_gemm.h"
#include "gpu/skinny_gemm.h"
#include "linear_case.h"
#include "sixteen_bit.h"
#include "test_support.h"

namespace ltserve {
namespace {

using gpu::ElemType;
using gpu::NormGemmConfig;
using gpu::SkinnyGemmConfig;
using plan::Activation;
using testing::FromBits;
using testing::Random;
using testing::RoundToBits;

struct Problem {
  std::int64_t rows, n, k;
  bool bias, residual, affine;
  float eps;
};

// BERT-base's two shapes (768 outputs from 768 and 3072) at one sequence's 128 tokens and at
// odd token counts; outputs that fill no block evenly (61, 200, 1000) or one block (16); K at
// the 8-element minimum, inside one 128-wide stage, and off the stages and the 32-wide steps
// (K = 3072 runs 24 stages through rings of 4 and 8); rows past the 8- and 16-row
// tiles and past 128 (where 8-row tiles are no longer offered).
const Problem kProblems[] = {
    {1, 768, 768, true, true, true, 1e-12f},   {3, 61, 64, false, false, true, 1e-5f},
    {13, 200, 136, true, false, false, 1e-5f}, {16, 1000, 1000, true, true, true, 1e-5f},
    {37, 768, 3072, true, true, true, 1e-12f}, {128, 768, 768, true, true, true, 1e-12f},
    {130, 100, 520, false, true, true, 1e-5f}, {5, 16, 8, true, false, true, 1e-5f},
    {300, 384, 264, true, true, true, 1e-5f},
};

// Every compiled (m_tile, col_tiles, stages) whose cluster of at most 16 blocks covers `n`.
std::vector<NormGemmConfig> EveryShape(std::int64_t n) {
  std::vector<NormGemmConfig> shapes;
  for (int m_tile : {8, 16}) {
    for (int col_tiles = 1; col_tiles <= 4; ++col_tiles) {
      for (int stages : {4, 8}) {
        const NormGemmConfig config{static_cast<std::uint8_t>(m_tile),
                                    static_cast<std::uint8_t>(col_tiles),
                                    static_cast<std::uint8_t>(stages)};
        if (gpu::NormGemmClusterSize(config, n) >= 1) shapes.push_back(config);
      }
    }
  }
  return shapes;
}

// One problem's data, rounded to the storage type (gamma and beta stay fp32, as the plan
// keeps them), and its double-precision reference.
struct Case {
  Problem p;
  ElemType type;
  std::vector<std::uint16_t> x, w, bias, residual;
  std::vector<float> gamma, beta;
  std::vector<double> reference;

  Case(const Problem& problem, ElemType t) : p(problem), type(t) {
    x = RoundToBits(Random(p.rows * p.k, 1.0f), type);
    w = RoundToBits(Random(p.n * p.k, 1.0f / std::sqrt(static_cast<float>(p.k))), type);
    if (p.bias) bias = RoundToBits(Random(p.n, 0.5f), type);
    // A residual with a large common offset: the centred (two-pass) variance's case.
    if (p.residual) {
      std::vector<float> r = Random(p.rows * p.n, 1.0f);
      for (float& v : r) v += 8.0f;
      residual = RoundToBits(r, type);
    }
    if (p.affine) {
      gamma = Random(p.n, 1.0f);
      beta = Random(p.n, 0.5f);
    }
    reference.resize(p.rows * p.n);
    std::vector<double> h(p.n);
    for (std::int64_t m = 0; m < p.rows; ++m) {
      double sum = 0;
      for (std::int64_t n = 0; n < p.n; ++n) {
        double v = 0;
        for (std::int64_t k = 0; k < p.k; ++k) {
          v += static_cast<double>(FromBits(x[m * p.k + k], type)) * FromBits(w[n * p.k + k], type);
        }
        if (p.bias) v += FromBits(bias[n], type);
        if (p.residual) v += FromBits(residual[m * p.n + n], type);
        h[n] = v;
        sum += v;
      }
      const double mean = sum / static_cast<double>(p.n);
      double squares = 0;
      for (double v : h) squares += (v - mean) * (v - mean);
      const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(p.n) + p.eps);
      for (std::int64_t n = 0; n < p.n; ++n) {
        double v = (h[n] - mean) * rstd;
        if (p.affine) v = v * gamma[n] + beta[n];
        reference[m * p.n + n] = v;
      }
    }
  }
};

// Where a Case's residual joins: into the GEMM's sum (the GEMM step's, rounded with it in the
// split-K schedule) or into the LayerNorm's input (the LayerNorm step's, added in fp32).
enum class ResidualOf { kGemm, kLayerNorm };

// The double LayerNorm, over rows of `width`, of 16-bit values `pre` (a GEMM's stored
// pre-norm sums) plus, with kLayerNorm, Case `c`'s residual, with the affine of `c`.
std::vector<double> LayerNormOf(const std::vector<std::uint16_t>& pre, const Case& c,
                                ResidualOf residual_of) {
  const bool add_residual = c.p.residual && residual_of == ResidualOf::kLayerNorm;
  std::vector<double> out(static_cast<std::size_t>(c.p.rows * c.p.n));
  std::vector<double> h(static_cast<std::size_t>(c.p.n));
  for (std::int64_t m = 0; m < c.p.rows; ++m) {
    double sum = 0;
    for (std::int64_t n = 0; n < c.p.n; ++n) {
      h[n] = FromBits(pre[m * c.p.n + n], c.type);
      if (add_residual) h[n] += FromBits(c.residual[m * c.p.n + n], c.type);
      sum += h[n];
    }
    const double mean = sum / static_cast<double>(c.p.n);
    double squares = 0;
    for (const double v : h) squares += (v - mean) * (v - mean);
    const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(c.p.n) + c.p.eps);
    for (std::int64_t n = 0; n < c.p.n; ++n) {
      double v = (h[n] - mean) * rstd;
      if (c.p.affine) v = v * c.gamma[n] + c.beta[n];
      out[m * c.p.n + n] = v;
    }
  }
  return out;
}

// The device side of a Case: the Linear's inputs and the guarded output as for the other
// few-row kernels, gamma and beta (fp32), and the split-K schedule's row-tile counters.
struct DeviceCase : testing::DeviceLinearCase {
  float* gamma = nullptr;
  float* beta = nullptr;
  int* counters = nullptr;
  explicit DeviceCase(const Case& c) : DeviceLinearCase(c) {
    const std::size_t counter_bytes = gpu::kNormGemmMaxRowTiles * sizeof(int);
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&counters), counter_bytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(counters, 0, counter_bytes), cudaSuccess);
    if (c.p.affine) {
      const std::size_t bytes = c.gamma.size() * sizeof(float);
      EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&gamma), bytes), cudaSuccess);
      EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&beta), bytes), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(gamma, c.gamma.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(beta, c.beta.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  ~DeviceCase() {
    cudaFree(counters);
    cudaFree(gamma);
    cudaFree(beta);
  }
  DeviceCase(const DeviceCase&) = delete;
  DeviceCase& operator=(const DeviceCase&) = delete;

  // Enqueues `config` on `stream` with the case's residual where `residual_of` says.
  cudaError_t Launch(const Case& c, const NormGemmConfig& config, ResidualOf residual_of,
                     bool programmatic, cudaStream_t stream) {
    const void* r = c.p.residual ? residual.data() : nullptr;
    const bool gemms = residual_of == ResidualOf::kGemm;
    return gpu::LaunchNormGemm(config, x.data(), w.data(), c.p.bias ? bias.data() : nullptr,
                               gemms ? r : nullptr, gemms ? nullptr : r, gamma, beta, c.p.eps,
                               y.data(), c.p.rows, c.p.n, c.p.k, c.type, counters, programmatic,
                               stream);
  }
  // Poisons the output, runs `config` and returns the output with its guard band; expects
  // the counters zero again after it.
  std::vector<std::uint16_t> Run(const Case& c, const NormGemmConfig& config, bool programmatic,
                                 ResidualOf residual_of = ResidualOf::kGemm) {
    y.Poison();
    EXPECT_EQ(Launch(c, config, residual_of, programmatic, nullptr), cudaSuccess)
        << config.Describe(c.p.n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << config.Describe(c.p.n);
    ExpectCountersZero(config.Describe(c.p.n));
    return y.Download();
  }
  // Poisons the output and runs the plain split-K GEMM of `config` (the pre-norm sum alone,
  // with the residual only where it is the GEMM's).
  std::vector<std::uint16_t> RunGemmAlone(const Case& c, const SkinnyGemmConfig& config,
                                          ResidualOf residual_of) {
    y.Poison();
    const bool residual_in_gemm = c.p.residual && residual_of == ResidualOf::kGemm;
    EXPECT_EQ(gpu::LaunchSkinnyGemm(config, x.data(), w.data(), c.p.bias ? bias.data() : nullptr,
                                    residual_in_gemm ? residual.data() : nullptr, y.data(),
                                    c.p.rows, c.p.n, c.p.k, Activation::kNone, c.type, false,
                                    nullptr),
              cudaSuccess)
        << config.Describe();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << config.Describe();
    return y.Download();
  }
  void ExpectCountersZero(const std::string& what) const {
    std::vector<int> host(gpu::kNormGemmMaxRowTiles, -1);
    EXPECT_EQ(cudaMemcpy(host.data(), counters, host.size() * sizeof(int), cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (std::size_t i = 0; i < host.size(); ++i) {
      EXPECT_EQ(host[i], 0) << what << ": row-tile counter " << i << " left non-zero";
    }
  }
};

std::string Name(const Problem& p, ElemType type) {
  return std::string(type == ElemType::kBf16 ? "bf16" : "fp16") + " " + std::to_string(p.rows) +
         "x" + std::to_string(p.k) + " -> " + std::to_string(p.n);
}

TEST(NormGemm, EveryShapeMatchesReference) {
  SKIP_WITHOUT_HOPPER("the GEMM + LayerNorm kernel");
  for (const ElemType type : {ElemType::kBf16, ElemType::kFp16}) {
    for (const Problem& p : kProblems) {
      const Case c(p, type);
      DeviceCase device(c);
      for (const NormGemmConfig& config : EveryShape(p.n)) {
        testing::ExpectMatches(device.Run(c, config, /*programmatic=*/false), c.reference, type,
                               p.n, Name(p, type) + ", " + config.Describe(p.n));
      }
      // The cluster kernel never rounds the pre-norm sum, so the LayerNorm's residual joins
      // it as the GEMM's does: the same reference.
      if (!p.residual) continue;
      const NormGemmConfig config{16, 4, 4};
      if (gpu::NormGemmClusterSize(config, p.n) < 1) continue;
      testing::ExpectMatches(device.Run(c, config, false, ResidualOf::kLayerNorm), c.reference,
                             type, p.n, Name(p, type) + ", residual in the LayerNorm");
    }
  }
}

// The split-K schedule stores the pre-norm sum as the plain split-K GEMM of the same
// configuration does (rounded to 16 bits, the same bits: same kernel, same order) and then
// normalises what it stored, with the LayerNorm's residual added in fp32 as the LayerNorm
// kernel adds it; so its reference is the double LayerNorm of the plain GEMM's output (plus
// that residual), whose own reference the split-K GEMM's tests hold. Every candidate
// configuration, each problem the schedule takes (up to 128 rows, 1024 outputs), both 16-bit
// types, the residual as either step's.
TEST(NormGemm, SplitKNormalisesWhatItsGemmStores) {
  SKIP_WITHOUT_HOPPER("the split-K GEMM + LayerNorm schedule");
  int runs = 0;
  for (const ElemType type : {ElemType::kBf16, ElemType::kFp16}) {
    for (const Problem& p : kProblems) {
      if (p.rows > gpu::kSkinnyGemmMaxRows || p.n > gpu::kSkinnyLayerNormMaxWidth) continue;
      const Case c(p, type);
      DeviceCase device(c);
      for (const ResidualOf residual_of : {ResidualOf::kGemm, ResidualOf::kLayerNorm}) {
        if (!p.residual && residual_of == ResidualOf::kLayerNorm) continue;
        for (const SkinnyGemmConfig& config :
             gpu::SkinnyGemmLayerNormCandidates(p.rows, p.n, p.k)) {
          const std::vector<double> reference =
              LayerNormOf(device.RunGemmAlone(c, config, residual_of), c, residual_of);
          testing::ExpectMatches(
              device.Run(c, NormGemmConfig::SplitK(config), false, residual_of), reference, type,
              p.n,
              Name(p, type) + ", " + config.Describe() +
                  (residual_of == ResidualOf::kGemm ? "" : ", residual in the LayerNorm"));
          ++runs;
        }
      }
    }
  }
  EXPECT_GT(runs, 30) << "the problems should exercise the schedule";
}

// The candidates take the smallest X tile that holds the rows; the kernel takes any: 16 row
// tiles of 8 at 128 rows (every counter), 32-row tiles, 64-row tiles over few rows, each
// with one and two W row tiles a warp and clusters of 1 to 16.
TEST(NormGemm, SplitKAtEveryRowTileSize) {
  SKIP_WITHOUT_HOPPER("the split-K GEMM + LayerNorm schedule");
  for (const Problem& p : {kProblems[5], kProblems[4], kProblems[1]}) {  // 128, 37, 3 rows
    const Case c(p, ElemType::kBf16);
    DeviceCase device(c);
    for (const std::uint8_t m_tile : {8, 16, 32, 64}) {
      for (const std::uint8_t row_tiles : {1, 2}) {
        for (const std::uint8_t cluster : {1, 4, 16}) {
          const SkinnyGemmConfig config{m_tile, row_tiles, 4, cluster};
          if (cluster > (p.k + 127) / 128) continue;  // more blocks than K chunks: no work
          const std::vector<double> reference =
              LayerNormOf(device.RunGemmAlone(c, config, ResidualOf::kGemm), c, ResidualOf::kGemm);
          testing::ExpectMatches(device.Run(c, NormGemmConfig::SplitK(config), false),
                                 reference, c.type, p.n,
                                 Name(p, c.type) + ", " + config.Describe());
        }
      }
    }
  }
}

// Launches that share the counters one after another on a stream, none waiting for the host
// (programmatic, so each may start before the one before it ends), and the same captured in a
// graph and replayed: each leaves the counters zero for the next, so every output is the
// single launch's.
TEST(NormGemm, SplitKBackToBackAndInAGraph) {
  SKIP_WITHOUT_HOPPER("the split-K GEMM + LayerNorm schedule");
  const Case c(kProblems[5], ElemType::kBf16);  // 128 rows: 2 to 16 row tiles
  DeviceCase device(c);
  auto stream = gpu::CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  cudaStream_t s = stream.value().get();
  for (const SkinnyGemmConfig& split :
       {SkinnyGemmConfig{8, 1, 4, 4}, SkinnyGemmConfig{64, 2, 4, 2}}) {
    const NormGemmConfig config = NormGemmConfig::SplitK(split);
    const std::vector<std::uint16_t> single = device.Run(c, config, false);
    device.y.Poison();
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(device.Launch(c, config, ResidualOf::kGemm, /*programmatic=*/i > 0, s),
                cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess) << split.Describe();
    EXPECT_TRUE(device.y.Download() == single) << split.Describe() << ", back to back";
    device.ExpectCountersZero(split.Describe() + ", back to back");

    auto graph = gpu::CaptureGraph(s, [&]() -> Status {
      for (int i = 0; i < 3; ++i) {
        if (device.Launch(c, config, ResidualOf::kGemm, i > 0, s) != cudaSuccess) {
          return Internal("launch " + std::to_string(i));
        }
      }
      return Status::Ok();
    });
    ASSERT_TRUE(graph.ok()) << graph.status().message();
    for (int replay = 0; replay < 3; ++replay) {
      device.y.Poison();
      ASSERT_EQ(cudaGraphLaunch(graph.value().get(), s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess) << split.Describe();
      EXPECT_TRUE(device.y.Download() == single) << split.Describe() << ", replay " << replay;
      device.ExpectCountersZero(split.Describe() + ", replay " + std::to_string(replay));
    }
  }
}

// Warps' partials meet in warp order and the blocks' row sums in rank order: the same launch
// twice gives the same bits, programmatic or not.
TEST(NormGemm, RerunsAreBitEqual) {
  SKIP_WITHOUT_HOPPER("the GEMM + LayerNorm kernel");
  const Case c(kProblems[4], ElemType::kBf16);
  DeviceCase device(c);
  for (const NormGemmConfig& config : gpu::NormGemmCandidates(c.p.rows, c.p.n, c.p.k)) {
    const auto first = device.Run(c, config, false);
    const auto second = device.Run(c, config, true);
    EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * 2), 0)
        << config.Describe(c.p.n);
  }
}

// The cluster kernel's configurations among `candidates`, and how many are split-K ones.
std::vector<NormGemmConfig> ClusterConfigs(const std::vector<NormGemmConfig>& candidates,
                                           std::size_t* split_count) {
  std::vector<NormGemmConfig> cluster;
  *split_count = 0;
  for (const NormGemmConfig& c : candidates) {
    if (c.split_k.has_value()) {
      ++*split_count;
    } else {
      cluster.push_back(c);
    }
  }
  return cluster;
}

TEST(NormGemm, CandidatesCoverTheRowWithAClusterOfAtMostSixteen) {
  // 768 outputs: 48 or 64 a block (16 or 12 blocks); 16- and 8-row tiles at 128 rows.
  std::size_t split = 0;
  const auto bert = ClusterConfigs(gpu::NormGemmCandidates(128, 768, 3072), &split);
  EXPECT_EQ(bert.size(), 8u);
  for (const NormGemmConfig& c : bert) {
    EXPECT_GE(c.col_tiles, 3) << c.Describe(768);
    EXPECT_LE(gpu::NormGemmClusterSize(c, 768), 16) << c.Describe(768);
  }
  for (const NormGemmConfig& c : ClusterConfigs(gpu::NormGemmCandidates(8, 768, 768), &split)) {
    EXPECT_EQ(c.m_tile, 8) << "8 rows fit one 8-row tile";
  }
  for (const NormGemmConfig& c : gpu::NormGemmCandidates(129, 768, 768)) {
    EXPECT_FALSE(c.split_k.has_value()) << "the split-K schedule stops at 128 rows";
    EXPECT_EQ(c.m_tile, 16) << "past 128 rows only 16-row tiles";
  }
  // 16 outputs: one block of 16, no wider block that would leave lanes idle.
  const auto narrow = ClusterConfigs(gpu::NormGemmCandidates(4, 16, 64), &split);
  ASSERT_EQ(narrow.size(), 2u);
  EXPECT_EQ(narrow[0].col_tiles, 1);
  EXPECT_TRUE(gpu::NormGemmCandidates(4, 1025, 64).empty());
  EXPECT_TRUE(gpu::NormGemmCandidates(513, 768, 768).empty());
  EXPECT_TRUE(gpu::NormGemmCandidates(0, 768, 768).empty());
  EXPECT_EQ(gpu::NormGemmClusterSize({16, 3, 4}, 768), 16);
  EXPECT_EQ(gpu::NormGemmClusterSize({16, 4, 8}, 768), 12);
  EXPECT_EQ(gpu::NormGemmClusterSize({16, 2, 4}, 768), 0);  // 24 blocks: too many
}

TEST(NormGemm, SplitKCandidatesAreTheSplitKGemmsUpTo128RowsAnd1024Outputs) {
  std::size_t split = 0;
  ClusterConfigs(gpu::NormGemmCandidates(128, 768, 3072), &split);
  EXPECT_EQ(split, gpu::SkinnyGemmLayerNormCandidates(128, 768, 3072).size());
  ClusterConfigs(gpu::NormGemmCandidates(1, 1024, 768), &split);
  EXPECT_EQ(split, gpu::SkinnyGemmLayerNormCandidates(1, 1024, 768).size());
  EXPECT_GT(split, 0u);
  // The split-K GEMM's candidates in the shapes the tail is compiled for: unroll 4, each
  // cluster size up to the K chunks (768 / 128 = 6: 1, 2, 4), one or two row tiles a warp.
  const auto tail = gpu::SkinnyGemmLayerNormCandidates(1, 768, 768);
  EXPECT_EQ(tail.size(), 6u);
  for (const SkinnyGemmConfig& c : tail) EXPECT_EQ(c.unroll, 4) << c.Describe();
  // At 128 rows every X tile up to the 64 rows SkinnyGemmCandidates takes: 4 tiles × 2
  // shapes × clusters of 1 to 16 (3072 / 128 = 24 chunks).
  const auto at_128 = gpu::SkinnyGemmLayerNormCandidates(128, 768, 3072);
  EXPECT_EQ(at_128.size(), 40u);
  for (const std::uint8_t m_tile : {8, 16, 32, 64}) {
    EXPECT_EQ(std::count_if(at_128.begin(), at_128.end(),
                            [&](const SkinnyGemmConfig& c) { return c.m_tile == m_tile; }),
              10)
        << int{m_tile} << "-row tiles";
  }
  for (const SkinnyGemmConfig& c : gpu::SkinnyGemmLayerNormCandidates(9, 768, 768)) {
    EXPECT_LE(c.m_tile, 16) << "9 rows: 16-row tiles and smaller";
  }
  EXPECT_TRUE(gpu::SkinnyGemmLayerNormCandidates(129, 768, 768).empty());
  EXPECT_TRUE(gpu::SkinnyGemmLayerNormCandidates(0, 768, 768).empty());
  EXPECT_TRUE(gpu::SkinnyGemmLayerNormCandidates(8, 1025, 768).empty());
  for (const NormGemmConfig& c : gpu::NormGemmCandidates(1, 768, 768)) {
    if (!c.split_k.has_value()) continue;
    EXPECT_EQ(c.split_k->m_tile, 8) << c.Describe(768);
    EXPECT_EQ(gpu::NormGemmClusterSize(c, 768), c.split_k->cluster) << c.Describe(768);
    EXPECT_LE(gpu::SkinnyGemmRowTiles(*c.split_k, 128), gpu::kNormGemmMaxRowTiles);
  }
  EXPECT_EQ(gpu::SkinnyGemmRowTiles({8, 1, 4, 1}, 128), 16);
  EXPECT_EQ(gpu::SkinnyGemmRowTiles({64, 1, 4, 1}, 65), 2);
  EXPECT_EQ(gpu::SkinnyGemmRowTiles({0, 1, 4, 1}, 8), 0);
}

TEST(NormGemm, SupportsOnlyHopperSixteenBitWholeVectorsOfKAndRowsAClusterCovers) {
  EXPECT_TRUE(gpu::NormGemmSupports(9, ElemType::kBf16, 512, 1024, 8));
  EXPECT_TRUE(gpu::NormGemmSupports(10, ElemType::kFp16, 1, 1, 3072));
  EXPECT_FALSE(gpu::NormGemmSupports(8, ElemType::kBf16, 1, 768, 768));
  EXPECT_FALSE(gpu::NormGemmSupports(9, ElemType::kFp32, 1, 768, 768));
  EXPECT_FALSE(gpu::NormGemmSupports(9, ElemType::kBf16, 513, 768, 768));
  EXPECT_FALSE(gpu::NormGemmSupports(9, ElemType::kBf16, 0, 768, 768));
  EXPECT_FALSE(gpu::NormGemmSupports(9, ElemType::kBf16, 4, 1025, 768));
  EXPECT_FALSE(gpu::NormGemmSupports(9, ElemType::kBf16, 4, 768, 764));
}

// Refused before anything reaches the GPU, so these run anywhere.
TEST(NormGemm, LauncherRefusesWhatItCannotRun) {
  const auto launch = [](const NormGemmConfig& c, ElemType type, std::int64_t rows, std::int64_t n,
                         std::int64_t k) {
    return gpu::LaunchNormGemm(c, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                               1e-5f, nullptr, rows, n, k, type, nullptr, false, nullptr);
  };
  const NormGemmConfig good{16, 3, 4};
  EXPECT_EQ(launch(good, ElemType::kFp32, 4, 768, 768), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, ElemType::kBf16, 0, 768, 768), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, ElemType::kBf16, 513, 768, 768), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, ElemType::kBf16, 4, 769, 768), cudaErrorInvalidValue);  // 17 blocks
  EXPECT_EQ(launch(good, ElemType::kBf16, 4, 768, 12), cudaErrorInvalidValue);
  EXPECT_EQ(launch({32, 3, 4}, ElemType::kBf16, 4, 768, 768), cudaErrorInvalidValue);
  EXPECT_EQ(launch({16, 5, 4}, ElemType::kBf16, 4, 768, 768), cudaErrorInvalidValue);
  EXPECT_EQ(launch({16, 0, 4}, ElemType::kBf16, 4, 768, 768), cudaErrorInvalidValue);
  EXPECT_EQ(launch({16, 3, 2}, ElemType::kBf16, 4, 768, 768), cudaErrorInvalidValue);
  // The split-K schedule: without counters, past 128 rows, a configuration the split-K GEMM
  // refuses (an 8-row tile of 0, a cluster of 3).
  const auto split = [](std::uint8_t m_tile, std::uint8_t cluster) {
    return NormGemmConfig::SplitK(SkinnyGemmConfig{m_tile, 1, 4, cluster});
  };
  EXPECT_EQ(launch(split(8, 4), ElemType::kBf16, 4, 768, 768), cudaErrorInvalidValue);
  int counters[gpu::kNormGemmMaxRowTiles] = {};
  const auto launch_counted = [&](const NormGemmConfig& c, std::int64_t rows, std::int64_t n) {
    return gpu::LaunchNormGemm(c, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                               1e-5f, nullptr, rows, n, 768, ElemType::kBf16, counters, false,
                               nullptr);
  };
  EXPECT_EQ(launch_counted(split(64, 4), 129, 768), cudaErrorInvalidValue);
  EXPECT_EQ(launch_counted(split(0, 4), 4, 768), cudaErrorInvalidValue);
  EXPECT_EQ(launch_counted(split(8, 3), 4, 768), cudaErrorInvalidValue);
  EXPECT_EQ(launch_counted(split(8, 4), 4, 1025), cudaErrorInvalidValue);
  // Directly: more row tiles than counters, a row wider than a warp's registers hold, a shape
  // the tail is not compiled for (unroll 8).
  EXPECT_EQ(gpu::LaunchSkinnyGemmLayerNorm({8, 1, 4, 1}, nullptr, nullptr, nullptr, nullptr,
                                           nullptr, nullptr, nullptr, 1e-5f, nullptr, 17, 768, 768,
                                           ElemType::kBf16, counters, 2, false, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(gpu::LaunchSkinnyGemmLayerNorm({8, 1, 4, 1}, nullptr, nullptr, nullptr, nullptr,
                                           nullptr, nullptr, nullptr, 1e-5f, nullptr, 4, 1025, 768,
                                           ElemType::kBf16, counters, 16, false, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(gpu::LaunchSkinnyGemmLayerNorm({8, 1, 8, 1}, nullptr, nullptr, nullptr, nullptr,
                                           nullptr, nullptr, nullptr, 1e-5f, nullptr, 4, 768, 768,
                                           ElemType::kBf16, counters, 16, false, nullptr),
            cudaErrorInvalidValue);
  // Both steps' residuals: the plan never fuses such a pair (LayerNormFusableGemms), and which
  // one would be rounded into the stored sum is not for the launcher to guess. (Refused before
  // the pointers are used: any non-null one will do.)
  const void* some = counters;
  for (const NormGemmConfig& c : {good, split(8, 4)}) {
    EXPECT_EQ(gpu::LaunchNormGemm(c, some, some, nullptr, some, some, nullptr, nullptr, 1e-5f,
                                  counters, 4, 768, 768, ElemType::kBf16, counters, false, nullptr),
              cudaErrorInvalidValue)
        << c.Describe(768);
  }
}

// Which (GEMM, LayerNorm) step pairs the kernel may take, on hand-made steps: pure bookkeeping,
// so this runs anywhere. Values: 0 the input, 1 a GEMM's output, 2 the norm's, 3 a residual.
TEST(NormGemm, FusesOnlyAGemmThatOnlyItsLayerNormReads) {
  using gpu::GemmStep;
  using gpu::LayerNormStep;
  using gpu::Step;
  const auto gemm = [](plan::ValueId residual, Activation act) {
    GemmStep step;
    step.input = 0;
    step.output = 1;
    step.residual = residual;
    step.activation = act;
    return step;
  };
  const auto norm = [](plan::ValueId input, plan::ValueId residual) {
    LayerNormStep step;
    step.input = input;
    step.residual = residual;
    step.output = 2;
    return step;
  };
  const plan::ValueId out = 2;
  const auto fusable = [&](std::vector<Step> steps, plan::ValueId output = 2) {
    return gpu::LayerNormFusableGemms(steps, output);
  };
  // The residual in the GEMM, or in the LayerNorm (not both).
  EXPECT_EQ(fusable({gemm(3, Activation::kNone), norm(1, plan::kNoValue)}),
            std::vector<std::size_t>{0});
  EXPECT_EQ(fusable({gemm(plan::kNoValue, Activation::kNone), norm(1, 3)}),
            std::vector<std::size_t>{0});
  EXPECT_TRUE(fusable({gemm(3, Activation::kNone), norm(1, 3)}).empty());
  // An activation between them, a LayerNorm of something else, the GEMM's output as the
  // LayerNorm's residual, or the GEMM's output read again later or being the plan's output.
  EXPECT_TRUE(fusable({gemm(3, Activation::kGeluTanh), norm(1, plan::kNoValue)}).empty());
  EXPECT_TRUE(fusable({gemm(3, Activation::kNone), norm(0, plan::kNoValue)}).empty());
  EXPECT_TRUE(fusable({gemm(plan::kNoValue, Activation::kNone), norm(0, 1)}).empty());
  GemmStep reader = gemm(1, Activation::kNone);
  reader.input = out;
  reader.output = 4;
  EXPECT_TRUE(fusable({gemm(3, Activation::kNone), norm(1, plan::kNoValue), reader}).empty());
  EXPECT_TRUE(fusable({gemm(3, Activation::kNone), norm(1, plan::kNoValue)}, 1).empty());
  // Not adjacent: a step between them.
  gpu::PointwiseStep between;
  between.input = 1;
  between.output = 5;
  EXPECT_TRUE(fusable({gemm(3, Activation::kNone), between, norm(5, plan::kNoValue)}).empty());
}

}  // namespace
}  // namespace ltserve
