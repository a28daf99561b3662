// The persistent layer-chain kernel (server/gpu/chain_gemm.h) launched directly, both its
// schedules (warps loading their own weights; a producer warp a block streaming them through
// a shared-memory ring): chains of 2 to 8 layers at odd sizes (rows off the 8-row tiles,
// outputs off the 16-output groups, K off the 128- and 512-wide chunks, K sliced over many
// blocks and not at all), every layer's output against
// a double-precision reference computed from the kernel's own input to that layer, into
// poisoned outputs with guard bands; every configuration in bf16 and fp16; bit-equal reruns,
// programmatic launches and graph replays (which also show that a launch leaves its counters
// and flags zeroed for the next); and what it refuses. The refusal tests need no GPU; the
// others skip where no Hopper GPU is usable.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gpu/chain_gemm.h"
#include "reference.h"
#include "sixteen_bit.h"
#include "test_support.h"

namespace ltserve {
namespace {

using gpu::ChainGemmConfig;
using gpu::ChainLayer;
using gpu::ElemType;
using plan::Activation;
using testing::DeviceHalves;
using testing::FromBits;
using testing::kGuard;
using testing::RoundToBits;
using testing::Random;
using testing::SmCount;

struct LayerSpec {
  std::int64_t out;
  bool bias;
  bool residual;  // from a buffer of its own, written before the launch
  Activation act;
};

struct ChainSpec {
  std::int64_t rows;
  std::int64_t in;
  std::vector<LayerSpec> layers;
};

const ChainSpec kChains[] = {
    // Tiny: outputs below one group, K inside one chunk.
    {1, 64, {{200, true, false, Activation::kRelu}, {136, false, true, Activation::kGeluTanh},
             {61, true, false, Activation::kNone}}},
    // The benchmark MLP: K sliced over many blocks, partial sums reduced.
    {3, 1024, {{4096, true, false, Activation::kRelu}, {4096, true, false, Activation::kRelu},
               {1024, true, false, Activation::kNone}}},
    // Rows off the tiles, K off the chunks, an 8-wide output.
    {13, 520, {{1000, true, false, Activation::kSilu}, {264, false, false, Activation::kTanh},
               {8, true, true, Activation::kSigmoid}}},
    // BERT-base's FFN with its residual, the largest tile.
    {32, 768, {{3072, true, false, Activation::kGeluErf}, {768, true, true, Activation::kNone}}},
    // Eight layers, the last one output wide.
    {17, 8, {{296, true, false, Activation::kRelu}, {40, true, false, Activation::kGeluErf},
             {16, false, false, Activation::kNone}, {8, true, false, Activation::kTanh},
             {136, true, true, Activation::kRelu}, {2056, true, false, Activation::kSilu},
             {24, true, false, Activation::kNone}, {1, true, false, Activation::kSigmoid}}},
};

// A chain's inputs in the storage type on host and device, its outputs (with guard bands) and
// scratch on the device.
class ChainCase {
 public:
  ChainCase(const ChainSpec& spec, ElemType type) : spec_(spec), type_(type) {
    x_host_ = RoundToBits(Random(spec.rows * spec.in, 1.0f), type);
    x_ = std::make_unique<DeviceHalves>(x_host_.size());
    x_->Upload(x_host_);
    std::int64_t in = spec.in;
    for (const LayerSpec& l : spec.layers) {
      Layer layer;
      layer.w_host = RoundToBits(Random(l.out * in, 1.0f / std::sqrt(static_cast<float>(in))), type);
      layer.w = std::make_unique<DeviceHalves>(layer.w_host.size());
      layer.w->Upload(layer.w_host);
      if (l.bias) {
        layer.bias_host = RoundToBits(Random(l.out, 0.5f), type);
        layer.bias = std::make_unique<DeviceHalves>(layer.bias_host.size());
        layer.bias->Upload(layer.bias_host);
      }
      if (l.residual) {
        layer.residual_host = RoundToBits(Random(spec.rows * l.out, 1.0f), type);
        layer.residual = std::make_unique<DeviceHalves>(layer.residual_host.size());
        layer.residual->Upload(layer.residual_host);
      }
      layer.y = std::make_unique<DeviceHalves>(static_cast<std::size_t>(spec.rows * l.out) + kGuard);
      ChainLayer chain_layer;
      chain_layer.weight = layer.w->data();
      chain_layer.bias = l.bias ? layer.bias->data() : nullptr;
      chain_layer.residual = l.residual ? layer.residual->data() : nullptr;
      chain_layer.output = layer.y->data();
      chain_layer.out_features = l.out;
      chain_layer.in_features = in;
      chain_layer.act = l.act;
      chain_.push_back(chain_layer);
      layers_.push_back(std::move(layer));
      in = l.out;
    }
    sm_count_ = SmCount();
    scratch_bytes_ = gpu::ChainGemmScratchBytes(chain_.data(), chain_.size(), sm_count_);
    EXPECT_EQ(cudaMalloc(&scratch_, scratch_bytes_), cudaSuccess);
    EXPECT_EQ(cudaMemset(scratch_, 0, scratch_bytes_), cudaSuccess);
  }
  ~ChainCase() { cudaFree(scratch_); }

  cudaError_t Launch(const ChainGemmConfig& config, bool programmatic, cudaStream_t stream) {
    return gpu::LaunchChainGemm(config, x_->data(), chain_.data(), chain_.size(), spec_.rows,
                                type_, scratch_, scratch_bytes_, sm_count_, programmatic, stream);
  }

  void PoisonOutputs() {
    for (Layer& layer : layers_) layer.y->Poison();
  }

  // Every layer's output (guard band included), one after another.
  std::vector<std::vector<std::uint16_t>> Outputs() const {
    std::vector<std::vector<std::uint16_t>> outputs;
    for (const Layer& layer : layers_) outputs.push_back(layer.y->Download());
    return outputs;
  }

  // Each layer against the reference computed from what the kernel gave the layer as input.
  void ExpectMatches(const std::vector<std::vector<std::uint16_t>>& outputs,
                     const std::string& what) const {
    const std::vector<std::uint16_t>* input = &x_host_;
    std::int64_t in = spec_.in;
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const LayerSpec& s = spec_.layers[l];
      const Layer& layer = layers_[l];
      std::vector<double> reference(spec_.rows * s.out);
      for (std::int64_t m = 0; m < spec_.rows; ++m) {
        for (std::int64_t n = 0; n < s.out; ++n) {
          double sum = 0;
          for (std::int64_t k = 0; k < in; ++k) {
            sum += static_cast<double>(FromBits((*input)[m * in + k], type_)) *
                   FromBits(layer.w_host[n * in + k], type_);
          }
          if (s.bias) sum += FromBits(layer.bias_host[n], type_);
          if (s.residual) sum += FromBits(layer.residual_host[m * s.out + n], type_);
          reference[m * s.out + n] = testing::Activate(s.act, sum);
        }
      }
      testing::ExpectMatches(outputs[l], reference, type_, s.out,
                             what + ", layer " + std::to_string(l));
      input = &outputs[l];
      in = s.out;
    }
  }

  std::string Name() const {
    std::string name = std::string(type_ == ElemType::kBf16 ? "bf16 " : "fp16 ") +
                       std::to_string(spec_.rows) + " rows, " + std::to_string(spec_.in);
    for (const LayerSpec& l : spec_.layers) name += "->" + std::to_string(l.out);
    return name;
  }

 private:
  struct Layer {
    std::vector<std::uint16_t> w_host, bias_host, residual_host;
    std::unique_ptr<DeviceHalves> w, bias, residual, y;
  };
  ChainSpec spec_;
  ElemType type_;
  std::vector<std::uint16_t> x_host_;
  std::unique_ptr<DeviceHalves> x_;
  std::vector<Layer> layers_;
  std::vector<ChainLayer> chain_;
  int sm_count_ = 0;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
};

std::vector<std::vector<std::uint16_t>> RunPoisoned(ChainCase& c, const ChainGemmConfig& config,
                                                    bool programmatic) {
  c.PoisonOutputs();
  EXPECT_EQ(c.Launch(config, programmatic, nullptr), cudaSuccess) << config.Describe();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << config.Describe();
  return c.Outputs();
}

TEST(ChainGemm, EveryConfigurationMatchesReference) {
  SKIP_WITHOUT_HOPPER("the layer-chain kernel");
  for (const ElemType type : {ElemType::kBf16, ElemType::kFp16}) {
    for (const ChainSpec& spec : kChains) {
      ChainCase c(spec, type);
      for (const ChainGemmConfig& config : gpu::ChainGemmCandidates(spec.rows)) {
        c.ExpectMatches(RunPoisoned(c, config, false), c.Name() + ", " + config.Describe());
      }
    }
  }
}

// Partial sums are added in slice order whichever block finishes a group last, so the same
// launch gives the same bits, again and again: which also shows each launch left the
// counters and flags zeroed (a flag left set lets the next launch read an input before it is
// written).
TEST(ChainGemm, RerunsAreBitEqual) {
  SKIP_WITHOUT_HOPPER("the layer-chain kernel");
  ChainCase c(kChains[1], ElemType::kBf16);
  for (const ChainGemmConfig& config : gpu::ChainGemmCandidates(kChains[1].rows)) {
    const auto first = RunPoisoned(c, config, false);
    c.ExpectMatches(first, c.Name() + ", " + config.Describe());
    for (int run = 0; run < 3; ++run) {
      EXPECT_TRUE(RunPoisoned(c, config, run % 2 == 1) == first)
          << config.Describe() << ", run " << run;
    }
  }
}

// The ring schedule alone on the tiny chain (K below one stage, outputs below one group), twice
// per configuration: small enough to run under compute-sanitizer (scripts/gpu.sh).
TEST(ChainGemm, RingOnATinyChainMatchesAndReruns) {
  SKIP_WITHOUT_HOPPER("the layer-chain kernel");
  ChainCase c(kChains[0], ElemType::kBf16);
  int rings = 0;
  for (const ChainGemmConfig& config : gpu::ChainGemmCandidates(kChains[0].rows)) {
    if (!config.ring()) continue;
    ++rings;
    const auto first = RunPoisoned(c, config, false);
    c.ExpectMatches(first, c.Name() + ", " + config.Describe());
    EXPECT_TRUE(RunPoisoned(c, config, true) == first) << config.Describe();
  }
  EXPECT_EQ(rings, 6);
}

// Captured with a programmatic launch between two kernels of its own kind, then replayed:
// every replay's outputs are the direct launch's. Both schedules.
TEST(ChainGemm, GraphReplaysMatchTheDirectLaunch) {
  SKIP_WITHOUT_HOPPER("the layer-chain kernel");
  ChainCase c(kChains[3], ElemType::kBf16);
  for (const ChainGemmConfig& config : {ChainGemmConfig{2, true, 1}, ChainGemmConfig{2, false, 2, 4}}) {
    const auto direct = RunPoisoned(c, config, false);
    c.ExpectMatches(direct, c.Name() + ", " + config.Describe());
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(c.Launch(config, i > 0, stream), cudaSuccess) << i;
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int replay = 0; replay < 5; ++replay) {
      c.PoisonOutputs();
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      EXPECT_TRUE(c.Outputs() == direct) << config.Describe() << ", replay " << replay;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

std::vector<ChainLayer> Shapes(std::int64_t in, std::vector<std::int64_t> outs) {
  std::vector<ChainLayer> layers;
  for (std::int64_t out : outs) {
    ChainLayer layer;
    layer.in_features = in;
    layer.out_features = out;
    layers.push_back(layer);
    in = out;
  }
  return layers;
}

TEST(ChainGemm, SupportsHopperSixteenBitChainsOfWholeVectors) {
  const auto mlp = Shapes(1024, {4096, 4096, 1024});
  EXPECT_TRUE(gpu::ChainGemmSupports(9, ElemType::kBf16, 1, mlp.data(), mlp.size()));
  EXPECT_TRUE(gpu::ChainGemmSupports(10, ElemType::kFp16, 32, mlp.data(), mlp.size()));
  EXPECT_FALSE(gpu::ChainGemmSupports(8, ElemType::kBf16, 1, mlp.data(), mlp.size()));
  EXPECT_FALSE(gpu::ChainGemmSupports(9, ElemType::kFp32, 1, mlp.data(), mlp.size()));
  EXPECT_FALSE(gpu::ChainGemmSupports(9, ElemType::kBf16, 0, mlp.data(), mlp.size()));
  EXPECT_FALSE(gpu::ChainGemmSupports(9, ElemType::kBf16, 33, mlp.data(), mlp.size()));
  EXPECT_FALSE(gpu::ChainGemmSupports(9, ElemType::kBf16, 1, mlp.data(), 1));  // one layer
  const auto nine = Shapes(64, {64, 64, 64, 64, 64, 64, 64, 64, 64});
  EXPECT_FALSE(gpu::ChainGemmSupports(9, ElemType::kBf16, 1, nine.data(), nine.size()));
  EXPECT_TRUE(gpu::ChainGemmSupports(9, ElemType::kBf16, 1, nine.data(), 8));
  const auto odd_k = Shapes(1024, {4092, 1024});  // the second layer's K is not a multiple of 8
  EXPECT_FALSE(gpu::ChainGemmSupports(9, ElemType::kBf16, 1, odd_k.data(), odd_k.size()));
  auto broken = mlp;
  broken[2].in_features = 2048;  // not the previous layer's output
  EXPECT_FALSE(gpu::ChainGemmSupports(9, ElemType::kBf16, 1, broken.data(), broken.size()));
}

// Refused before anything reaches the GPU, so these run anywhere.
TEST(ChainGemm, LauncherRefusesWhatItCannotRun) {
  auto layers = Shapes(64, {128, 64});
  int dummy = 0;
  for (ChainLayer& layer : layers) {
    layer.weight = &dummy;
    layer.output = &dummy;
  }
  const std::size_t bytes = gpu::ChainGemmScratchBytes(layers.data(), layers.size(), 132);
  EXPECT_GT(bytes, 0u);
  const auto launch = [&](const ChainGemmConfig& config, const void* input, std::size_t scratch,
                          std::int64_t rows, ElemType type, int sm_count) {
    return gpu::LaunchChainGemm(config, input, layers.data(), layers.size(), rows, type, &dummy,
                                scratch, sm_count, false, nullptr);
  };
  const ChainGemmConfig good{2, true, 1};
  EXPECT_EQ(launch(good, &dummy, bytes - 1, 4, ElemType::kBf16, 132), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, nullptr, bytes, 4, ElemType::kBf16, 132), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, &dummy, bytes, 4, ElemType::kFp32, 132), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, &dummy, bytes, 33, ElemType::kBf16, 132), cudaErrorInvalidValue);
  EXPECT_EQ(launch(good, &dummy, bytes, 4, ElemType::kBf16, 0), cudaErrorInvalidValue);
  EXPECT_EQ(launch({3, true, 1}, &dummy, bytes, 4, ElemType::kBf16, 132), cudaErrorInvalidValue);
  EXPECT_EQ(launch({2, true, 3}, &dummy, bytes, 4, ElemType::kBf16, 132), cudaErrorInvalidValue);
  EXPECT_EQ(launch({2, true, 2}, &dummy, bytes, 17, ElemType::kBf16, 132), cudaErrorInvalidValue);
  // The ring: no L2 prefetch, 2 or 4 stages, 2 or 3 blocks an SM where they fit, 1 or 2 units.
  EXPECT_EQ(launch({1, true, 2, 2}, &dummy, bytes, 4, ElemType::kBf16, 132), cudaErrorInvalidValue);
  EXPECT_EQ(launch({1, false, 2, 3}, &dummy, bytes, 4, ElemType::kBf16, 132), cudaErrorInvalidValue);
  EXPECT_EQ(launch({1, false, 1, 2}, &dummy, bytes, 4, ElemType::kBf16, 132), cudaErrorInvalidValue);
  EXPECT_EQ(launch({1, false, 3, 4}, &dummy, bytes, 4, ElemType::kBf16, 132), cudaErrorInvalidValue);
  EXPECT_EQ(launch({1, false, 3, 2}, &dummy, bytes, 17, ElemType::kBf16, 132), cudaErrorInvalidValue);
  EXPECT_EQ(launch({4, false, 2, 2}, &dummy, bytes, 4, ElemType::kBf16, 132), cudaErrorInvalidValue);
  EXPECT_EQ(launch({1, false, 2, 2}, &dummy, bytes - 1, 4, ElemType::kBf16, 132),
            cudaErrorInvalidValue);
  layers[1].weight = nullptr;
  EXPECT_EQ(launch(good, &dummy, bytes, 4, ElemType::kBf16, 132), cudaErrorInvalidValue);
}

TEST(ChainGemm, CandidatesOfferTwoBlocksAnSmOnlyWhereTheyFit) {
  // The warp schedule: 3 unit counts × L2 prefetch or not × 1 or 2 blocks an SM (1 past 16
  // rows); the ring: 1 or 2 units × (2 blocks, 2 stages), (2 blocks, 4 stages), (3 blocks, 2
  // stages), the last not at 32-row tiles (shared memory and registers for 2 blocks only).
  EXPECT_EQ(gpu::ChainGemmCandidates(1).size(), 12u + 6u);
  EXPECT_EQ(gpu::ChainGemmCandidates(16).size(), 12u + 6u);
  EXPECT_EQ(gpu::ChainGemmCandidates(17).size(), 6u + 4u);
  for (const ChainGemmConfig& config : gpu::ChainGemmCandidates(32)) {
    EXPECT_EQ(config.blocks_per_sm, config.ring() ? 2 : 1) << config.Describe();
  }
  for (const ChainGemmConfig& config : gpu::ChainGemmCandidates(1)) {
    EXPECT_FALSE(config.ring() && config.prefetch) << config.Describe();
  }
}

TEST(ChainGemm, ScratchGrowsWithTheSlicesItMustHold) {
  // One group and one chunk a layer: no partial sums, only counters and flags.
  const auto small = Shapes(64, {64, 64});
  const auto mlp = Shapes(1024, {4096, 4096, 1024});
  const std::size_t small_bytes = gpu::ChainGemmScratchBytes(small.data(), small.size(), 132);
  EXPECT_EQ(small_bytes, 256u);
  // The MLP's layers are sliced: partial sums for 32 rows of every output, per slice.
  EXPECT_GE(gpu::ChainGemmScratchBytes(mlp.data(), mlp.size(), 132),
            std::size_t{2} * 32 * (4096 + 4096 + 1024) * sizeof(float));
}

}  // namespace
}  // namespace ltserve
