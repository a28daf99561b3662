// CUTLASS's Hopper GEMM (server/gpu/cutlass_gemm.h) launched directly: every compiled tile and
// schedule against a double-precision reference, in bf16 and fp16, at sizes off every tile
// (rows off 128 and 256 and fewer than one tile, N off 128, 192 and 256, K from 8 to
// several k-tiles and off the 64-element k-tile), into poisoned outputs with a guard band; bias
// and residual present or not; bit-equal reruns, programmatic or not; and what the launcher
// refuses.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include "gpu/cutlass_gemm.h"
#include "gpu/gemm_kernel.h"
#include "linear_case.h"

namespace ltserve {
namespace {

using gpu::CutlassGemmConfig;
using gpu::CutlassTile;
using gpu::ElemType;
using plan::Activation;

using Problem = testing::LinearProblem;
using Case = testing::LinearCase;

constexpr CutlassTile kTiles[] = {CutlassTile::k128x192, CutlassTile::k128x256,
                                  CutlassTile::k256x128, CutlassTile::k128x128Pingpong};
static_assert(std::size(kTiles) == gpu::kCutlassTileCount, "every compiled tile is tested");
// A cluster pair along M or N where the problem has one tile there: the second block of the
// pair has nothing of its own (1 row; N = 8), and K = 8 is one partial k-tile.
const Problem kProblems[] = {
    {1, 8, 8, true, false, Activation::kNone},
    {77, 200, 40, false, true, Activation::kRelu},
    {129, 264, 776, true, true, Activation::kGeluErf},
    {300, 776, 264, true, false, Activation::kGeluTanh},
    {513, 392, 1000, false, false, Activation::kNone},
    {1000, 768, 768, true, true, Activation::kNone},
};

#define SKIP_WITHOUT_CUTLASS()                                                   \
  do {                                                                           \
    SKIP_WITHOUT_HOPPER("CUTLASS's Hopper GEMM");                                \
    if (!gpu::CutlassGemmAvailable()) GTEST_SKIP() << "built without CUTLASS";   \
  } while (false)

int SmCount() {
  int device = 0;
  int count = 0;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  return count;
}

struct DeviceCase : testing::DeviceLinearCase {
  using DeviceLinearCase::DeviceLinearCase;
  std::vector<std::uint16_t> Run(const Case& c, const CutlassGemmConfig& config, bool programmatic,
                                 int sm_count) {
    return DeviceLinearCase::Run(c, config.Describe(),
                                 [&](void* x, void* w, void* bias, void* residual, void* y) {
      return gpu::LaunchCutlassGemm(config, x, w, bias, residual, y, c.p.rows, c.p.n, c.p.k,
                                    c.p.act, c.type, sm_count, programmatic, nullptr);
    });
  }
};

TEST(CutlassGemm, EveryTileMatchesReference) {
  SKIP_WITHOUT_CUTLASS();
  const int sm_count = SmCount();
  for (const ElemType type : {ElemType::kBf16, ElemType::kFp16}) {
    for (const Problem& p : kProblems) {
      const Case c(p, type);
      DeviceCase device(c);
      for (const CutlassTile tile : kTiles) {
        const CutlassGemmConfig config{tile};
        c.ExpectMatches(device.Run(c, config, /*programmatic=*/false, sm_count),
                        c.Name() + ", " + config.Describe());
      }
    }
  }
}

// Fewer SMs than tiles: the persistent blocks take several tiles each.
TEST(CutlassGemm, FewSmsTakeEveryTile) {
  SKIP_WITHOUT_CUTLASS();
  const Case c(kProblems[5], ElemType::kBf16);
  DeviceCase device(c);
  for (const CutlassTile tile : kTiles) {
    const CutlassGemmConfig config{tile};
    c.ExpectMatches(device.Run(c, config, false, /*sm_count=*/4),
                    c.Name() + ", 4 SMs, " + config.Describe());
  }
}

// Each output is one tile's sum over K in a fixed order: reruns give the same bits,
// programmatic or not.
TEST(CutlassGemm, RerunsAreBitEqual) {
  SKIP_WITHOUT_CUTLASS();
  const int sm_count = SmCount();
  const Case c(kProblems[2], ElemType::kBf16);
  DeviceCase device(c);
  for (const CutlassTile tile : kTiles) {
    const CutlassGemmConfig config{tile};
    const auto first = device.Run(c, config, false, sm_count);
    const auto second = device.Run(c, config, true, sm_count);
    EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * 2), 0) << config.Describe();
  }
}

TEST(CutlassGemm, RefusesWhatItDoesNotTake) {
  SKIP_WITHOUT_CUTLASS();
  const Case c(kProblems[1], ElemType::kBf16);
  DeviceCase device(c);
  const CutlassGemmConfig config{CutlassTile::k128x256};
  const auto launch = [&](const void* x, std::int64_t n, std::int64_t k, Activation act,
                          ElemType type, int sm_count) {
    return gpu::LaunchCutlassGemm(config, x, device.w.data(), nullptr, nullptr, device.y.data(),
                                  c.p.rows, n, k, act, type, sm_count, false, nullptr);
  };
  EXPECT_EQ(launch(device.x.data(), 200, 40, Activation::kSilu, ElemType::kBf16, 132),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch(device.x.data(), 200, 36, Activation::kNone, ElemType::kBf16, 132),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch(device.x.data(), 196, 40, Activation::kNone, ElemType::kBf16, 132),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch(device.x.data(), 200, 40, Activation::kNone, ElemType::kFp32, 132),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch(device.x.data(), 200, 40, Activation::kNone, ElemType::kBf16, 0),
            cudaErrorInvalidValue);
  // X 2 bytes off its 16-byte alignment (CUTLASS itself would launch it), and no X.
  EXPECT_EQ(launch(static_cast<const std::uint16_t*>(device.x.data()) + 1, 200, 40,
                   Activation::kNone, ElemType::kBf16, 132),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch(nullptr, 200, 40, Activation::kNone, ElemType::kBf16, 132),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// No GPU needed from here on.

// What is refused before anything reaches CUDA: operands that are null or off 16-byte
// alignment (CUTLASS itself launches a misaligned X, into an illegal instruction that ends the
// context), shapes, types and activations the kernels do not take, no SMs. The pointers are
// never dereferenced.
TEST(CutlassGemm, RefusesBadOperandsBeforeLaunching) {
  auto* base = reinterpret_cast<std::uint16_t*>(std::uintptr_t{1} << 20);
  struct Launch {
    const std::uint16_t* x;
    const std::uint16_t* w;
    const std::uint16_t* bias = nullptr;
    const std::uint16_t* residual = nullptr;
    std::uint16_t* y;
    std::int64_t n = 64, k = 64;
    Activation act = Activation::kNone;
    ElemType type = ElemType::kBf16;
    int sm_count = 132;
  };
  const Launch good{base, base + 4096, nullptr, nullptr, base + 8192};
  std::vector<Launch> bad(12, good);
  bad[0].x = base + 1;
  bad[1].w = base + 4100;
  bad[2].bias = base + 2;
  bad[3].residual = base + 6;
  bad[4].y = base + 8195;
  bad[5].x = nullptr;
  bad[6].y = nullptr;
  bad[7].act = Activation::kSilu;
  bad[8].n = 60;
  bad[9].k = 60;
  bad[10].type = ElemType::kFp32;
  bad[11].sm_count = 0;
  const cudaError_t refused =
      gpu::CutlassGemmAvailable() ? cudaErrorInvalidValue : cudaErrorNotSupported;
  for (std::size_t i = 0; i < bad.size(); ++i) {
    const Launch& l = bad[i];
    EXPECT_EQ(gpu::LaunchCutlassGemm({CutlassTile::k128x192}, l.x, l.w, l.bias, l.residual, l.y,
                                     64, l.n, l.k, l.act, l.type, l.sm_count, false, nullptr),
              refused)
        << "case " << i;
  }
}

TEST(CutlassGemm, SupportsHopperSixteenBitAndItsActivationsOnly) {
  const bool built = gpu::CutlassGemmAvailable();
  EXPECT_EQ(gpu::CutlassGemmSupports(9, ElemType::kBf16, 768, 3072, Activation::kGeluErf), built);
  EXPECT_EQ(gpu::CutlassGemmSupports(9, ElemType::kFp16, 2304, 768, Activation::kRelu), built);
  EXPECT_FALSE(gpu::CutlassGemmSupports(8, ElemType::kBf16, 768, 768, Activation::kNone));
  EXPECT_FALSE(gpu::CutlassGemmSupports(10, ElemType::kBf16, 768, 768, Activation::kNone));
  EXPECT_FALSE(gpu::CutlassGemmSupports(9, ElemType::kFp32, 768, 768, Activation::kNone));
  EXPECT_FALSE(gpu::CutlassGemmSupports(9, ElemType::kBf16, 768, 768, Activation::kSigmoid));
  EXPECT_FALSE(gpu::CutlassGemmSupports(9, ElemType::kBf16, 770, 768, Activation::kNone));
  EXPECT_FALSE(gpu::CutlassGemmSupports(9, ElemType::kBf16, 768, 1001, Activation::kNone));
  EXPECT_EQ(gpu::CutlassGemmCandidates(4096, 768, 768).size(),
            static_cast<std::size_t>(gpu::kCutlassTileCount));
  EXPECT_TRUE(gpu::CutlassGemmCandidates(4096, 768, 100).empty());
}

TEST(CutlassGemm, ConfigNumbersRoundTrip) {
  for (const CutlassTile tile : kTiles) {
    const CutlassGemmConfig config{tile};
    CutlassGemmConfig read;
    ASSERT_TRUE(CutlassGemmConfig::FromNumber(config.Number(), &read));
    EXPECT_EQ(read, config);
    EXPECT_NE(config.Describe().find("CUTLASS"), std::string::npos);
  }
  CutlassGemmConfig unused;
  EXPECT_FALSE(CutlassGemmConfig::FromNumber(-1, &unused));
  // The dropped tiles' numbers (cutlass_gemm.h) and one past the last.
  for (const int number : {3, 5, 6}) {
    EXPECT_FALSE(CutlassGemmConfig::FromNumber(number, &unused)) << number;
  }
  const gpu::GemmKernel kernel = gpu::GemmKernel::Cutlass({CutlassTile::k256x128});
  EXPECT_EQ(kernel.ToText(), "cutlass 2");
  const auto back = gpu::GemmKernel::FromText("cutlass 2");
  // A cache file's CUTLASS choice is no choice for a build without the kernels.
  ASSERT_EQ(back.has_value(), gpu::CutlassGemmAvailable());
  if (back.has_value()) {
    EXPECT_TRUE(*back == kernel);
  }
  EXPECT_FALSE(gpu::GemmKernel::FromText("cutlass 3").has_value());
  EXPECT_FALSE(gpu::GemmKernel::FromText("cutlass 6").has_value());
  EXPECT_FALSE(gpu::GemmKernel::FromText("cutlass").has_value());
  EXPECT_FALSE(gpu::GemmKernel::FromText("cutlass 1 2").has_value());
  EXPECT_FALSE(kernel == gpu::GemmKernel::Cutlass({CutlassTile::k128x256}));
}

}  // namespace
}  // namespace ltserve
