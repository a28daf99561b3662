#include "skinny_gemm_table.h"

#include <cuda_profiler_api.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <limits>
#include <string>
#include <vector>

#include "gemm_table_device.h"
#include "gpu/cuda_check.h"
#include "gpu/cuda_resources.h"
#include "gpu/gemm.h"
#include "gpu/kernels.h"
#include "gpu/skinny_gemm.h"
#include "gpu/staged_gemm.h"
#include "gpu/streamed_gemm.h"

namespace ltserve_bench {
namespace {

using namespace ltserve::gpu;

struct Layer {
  const char* model;
  std::int64_t k, n;
};

// Enqueues the cuBLASLt matmul (bias epilogue, the heuristic's first algorithm) or fails.
struct CublasLtRun {
  Gemm gemm;
  cublasLtMatmulAlgo_t algo;
};

int Fail(const std::string& what, const ltserve::Status& status) {
  std::fprintf(stderr, "skinny GEMM table: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

// A device copy of W [n, k] (bf16) in the streamed kernel's packed layout.
ltserve::Result<DeviceBuffer> PackedCopy(const void* w, std::int64_t n, std::int64_t k) {
  std::vector<std::uint16_t> host(static_cast<std::size_t>(n * k));
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpy(host.data(), w, host.size() * 2, cudaMemcpyDeviceToHost));
  const std::vector<std::uint16_t> packed = PackStreamedGemmWeights(host.data(), n, k);
  LTSERVE_ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Create(packed.size() * 2, "packed"));
  LTSERVE_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(buffer.data(), packed.data(), packed.size() * 2, cudaMemcpyHostToDevice));
  return buffer;
}

std::vector<StreamedGemmConfig> PackedCandidates(std::int64_t rows, std::int64_t n, std::int64_t k,
                                                 int sms) {
  std::vector<StreamedGemmConfig> candidates;
  for (const StreamedGemmConfig& c : StreamedGemmCandidates(rows, n, k, sms)) {
    if (StreamedGemmTakesPacked(c, k)) candidates.push_back(c);
  }
  return candidates;
}

std::string Us(const std::optional<float>& ms) {
  if (!ms.has_value()) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", 1000.0 * *ms);
  return text;
}

std::string Ratio(double ratio) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", ratio);
  return text;
}

// BERT-base's four GEMMs of a layer (QKV, output projection, FFN up, FFN down; bias
// epilogue, bf16) at 128 rows as one captured graph, the L2 emptied before each replay:
// cuBLASLt against the split-K and staged-weights kernels, each GEMM at the configuration
// timed fastest alone. Under a programmatic launch the staged kernel copies its W slice while
// the GEMM ahead drains, which one GEMM at a time cannot show. Returns 0, or 1 after printing
// what failed.
int PrintBertGemmChainTable() {
  struct Step {
    std::int64_t k, n;
    int in, out;  // activation buffers
  };
  constexpr std::int64_t kRows = 128;
  // Buffers: 0 the layer's input (768), 1 QKV (2304), 2 the projection's output (768), 3 the
  // FFN's hidden (3072), 4 the layer's output (768). The projection reads the input again,
  // standing in for attention's output.
  const std::int64_t widths[] = {768, 2304, 768, 3072, 768};
  const Step steps[] = {{768, 2304, 0, 1}, {768, 768, 0, 2}, {768, 3072, 2, 3}, {3072, 768, 3, 4}};
  auto timing = TableDevice::Create();
  if (!timing.ok()) return Fail("stream, handle or buffers", timing.status());
  cudaStream_t s = timing.value().stream.get();
  cublasLtHandle_t handle = timing.value().handle.get();
  const DeviceBuffer& flush = timing.value().flush;
  void* workspace = timing.value().workspace.data();
  std::vector<DeviceBuffer> activations, weights, biases;
  for (std::size_t i = 0; i < std::size(widths); ++i) {
    auto a = DeviceBuffer::Create(static_cast<std::size_t>(kRows * widths[i]) * 2, "activations");
    if (!a.ok()) return Fail("buffers", a.status());
    LaunchFillRandom(a.value().data(), ElemType::kBf16, kRows * widths[i], 40 + i, s);
    activations.push_back(std::move(a).value());
  }
  for (std::size_t i = 0; i < std::size(steps); ++i) {
    auto w = DeviceBuffer::Create(static_cast<std::size_t>(steps[i].k * steps[i].n) * 2, "weights");
    auto b = DeviceBuffer::Create(static_cast<std::size_t>(steps[i].n) * 2, "bias");
    if (!w.ok() || !b.ok()) return Fail("buffers", w.ok() ? b.status() : w.status());
    LaunchFillRandom(w.value().data(), ElemType::kBf16, steps[i].k * steps[i].n, 50 + i, s);
    LaunchFillRandom(b.value().data(), ElemType::kBf16, steps[i].n, 60 + i, s);
    weights.push_back(std::move(w).value());
    biases.push_back(std::move(b).value());
  }
  const auto none = ltserve::plan::Activation::kNone;
  std::vector<Gemm> gemms;
  std::vector<cublasLtMatmulAlgo_t> algos;
  std::vector<PassStep> cublas, skinny, staged;
  std::string staged_configs;
  for (std::size_t i = 0; i < std::size(steps); ++i) {
    const Step& step = steps[i];
    auto gemm = Gemm::Create(ltserve::Precision::kBf16,
                             GemmShape{kRows, step.n, step.k, CUBLASLT_EPILOGUE_BIAS, false});
    if (!gemm.ok()) return Fail("Gemm::Create", gemm.status());
    auto candidates = gemm.value().Candidates(handle, kTableWorkspace, 1);
    if (!candidates.ok() || candidates.value().empty()) return Fail("heuristic", candidates.status());
    gemms.push_back(std::move(gemm).value());
    algos.push_back(candidates.value().front());
  }
  for (std::size_t i = 0; i < std::size(steps); ++i) {
    const std::int64_t n = steps[i].n;
    const std::int64_t k = steps[i].k;
    void* x = activations[steps[i].in].data();
    void* y = activations[steps[i].out].data();
    void* w = weights[i].data();
    void* b = biases[i].data();
    cublas.push_back([&, i, x, y, w, b](bool) {
      return gemms[i].RunWith(algos[i], handle, GemmOperands{w, x, b, nullptr, y}, workspace,
                              kTableWorkspace, s);
    });
    auto split = TimeEach(SkinnyGemmCandidates(kRows, n, k), [&](const SkinnyGemmConfig& c) {
      return LaunchSkinnyGemm(c, x, w, b, nullptr, y, kRows, n, k, none, ElemType::kBf16, false, s);
    }, flush, s);
    auto stage = TimeEach(StagedGemmCandidates(kRows, n, k), [&](const StagedGemmConfig& c) {
      return LaunchStagedGemm(c, x, w, b, nullptr, y, kRows, n, k, none, ElemType::kBf16, false, s);
    }, flush, s);
    if (!split.ok() || !split.value().best) return Fail("split-K candidates", split.status());
    if (!stage.ok() || !stage.value().best) return Fail("staged candidates", stage.status());
    const SkinnyGemmConfig split_config = *split.value().best;
    const StagedGemmConfig staged_config = *stage.value().best;
    staged_configs += (i == 0 ? "" : "; ") + staged_config.Describe();
    skinny.push_back([=](bool programmatic) {
      return Launched(LaunchSkinnyGemm(split_config, x, w, b, nullptr, y, kRows, n, k, none,
                                       ElemType::kBf16, programmatic, s), "split-K");
    });
    staged.push_back([=](bool programmatic) {
      return Launched(LaunchStagedGemm(staged_config, x, w, b, nullptr, y, kRows, n, k, none,
                                       ElemType::kBf16, programmatic, s), "staged");
    });
  }
  const auto pass_ms = [&](const std::vector<PassStep>& pass, bool programmatic) {
    return TimePassCold(pass, programmatic, flush, s);
  };
  auto cublas_ms = pass_ms(cublas, false);
  auto skinny_ms = pass_ms(skinny, true);
  auto staged_ms = pass_ms(staged, true);
  auto staged_plain_ms = pass_ms(staged, false);
  for (const auto* ms : {&cublas_ms, &skinny_ms, &staged_ms, &staged_plain_ms}) {
    if (!ms->ok()) return Fail("pass", ms->status());
  }
  std::printf("\nBERT-base's four GEMMs of a layer at %ld rows as one CUDA graph, bf16, bias "
              "epilogue, the L2 emptied before each replay (median of 9); own kernels at the "
              "configuration timed fastest alone (staged: %s), launched programmatically "
              "unless said.\n\n", static_cast<long>(kRows), staged_configs.c_str());
  std::printf("| cuBLASLt µs | split-K µs | staged µs | staged, plain launches µs | staged / cuBLASLt | "
              "split-K / cuBLASLt |\n|---:|---:|---:|---:|---:|---:|\n");
  std::printf("| %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |\n", 1000.0 * cublas_ms.value(),
              1000.0 * skinny_ms.value(), 1000.0 * staged_ms.value(),
              1000.0 * staged_plain_ms.value(), staged_ms.value() / cublas_ms.value(),
              skinny_ms.value() / cublas_ms.value());
  std::fflush(stdout);
  return 0;
}

// The MLP's three layers as one captured graph, each layer one kernel of a kind, at the
// configuration that timed fastest alone at these rows; the L2 emptied before each replay.
int PrintMlpPassTable(double copy_tbps) {
  struct MlpLayer {
    std::int64_t k, n;
  };
  const MlpLayer layers[] = {{1024, 4096}, {4096, 4096}, {4096, 1024}};
  const std::int64_t row_counts[] = {1, 2, 4, 8, 16, 32};
  auto timing = TableDevice::Create();
  if (!timing.ok()) return Fail("stream, handle or buffers", timing.status());
  cudaStream_t s = timing.value().stream.get();
  cublasLtHandle_t handle = timing.value().handle.get();
  const DeviceBuffer& flush = timing.value().flush;
  void* workspace = timing.value().workspace.data();
  std::vector<DeviceBuffer> weights, biases, activations;
  std::size_t weight_bytes = 0;
  for (std::size_t i = 0; i <= std::size(layers); ++i) {
    const std::int64_t width = i == 0 ? layers[0].k : layers[i - 1].n;
    auto a = DeviceBuffer::Create(static_cast<std::size_t>(32 * width) * 2, "activations");
    if (!a.ok()) return Fail("buffers", a.status());
    LaunchFillRandom(a.value().data(), ElemType::kBf16, 32 * width, 10 + i, s);
    activations.push_back(std::move(a).value());
    if (i == std::size(layers)) break;
    auto w = DeviceBuffer::Create(static_cast<std::size_t>(layers[i].k * layers[i].n) * 2, "weights");
    auto b = DeviceBuffer::Create(static_cast<std::size_t>(layers[i].n) * 2, "bias");
    if (!w.ok() || !b.ok()) return Fail("buffers", w.status());
    LaunchFillRandom(w.value().data(), ElemType::kBf16, layers[i].k * layers[i].n, 20 + i, s);
    LaunchFillRandom(b.value().data(), ElemType::kBf16, layers[i].n, 30 + i, s);
    weight_bytes += w.value().bytes();
    weights.push_back(std::move(w).value());
    biases.push_back(std::move(b).value());
  }
  const int sms = SmCount();
  const auto none = ltserve::plan::Activation::kNone;
  std::printf("\nThe MLP 1024-4096-4096-1024's three layers as one CUDA graph, bf16, bias "
              "epilogue, the L2 emptied before each replay (median of 9): each layer one kernel "
              "of a kind, at the configuration timed fastest alone at these rows; own kernels "
              "launched programmatically unless said; floor = %.1f MB / %.2f TB/s.\n\n",
              weight_bytes / 1e6, copy_tbps);
  std::printf("| rows | floor µs | three read-only kernels µs | cuBLASLt µs | split-K µs | "
              "streamed µs | streamed, plain launches µs | streamed, packed weights µs | "
              "streamed / split-K | packed / split-K | packed / floor |\n"
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::vector<DeviceBuffer> packed_weights;
  for (std::size_t i = 0; i < std::size(layers); ++i) {
    auto packed = PackedCopy(weights[i].data(), layers[i].n, layers[i].k);
    if (!packed.ok()) return Fail("packing", packed.status());
    packed_weights.push_back(std::move(packed).value());
  }
  // The three layers' weights read by three plain streaming kernels (LaunchReadAll) in a
  // graph: what three kernel boundaries cost with no GEMM in them.
  std::vector<PassStep> reads;
  for (std::size_t i = 0; i < std::size(layers); ++i) {
    reads.push_back([&, i](bool) {
      return Launched(LaunchReadAll(weights[i].data(), weights[i].bytes(), s), "read");
    });
  }
  for (const std::int64_t rows : row_counts) {
    std::vector<PassStep> cublas, skinny, streamed, packed;
    std::vector<Gemm> gemms;
    std::vector<cublasLtMatmulAlgo_t> algos;
    for (std::size_t i = 0; i < std::size(layers); ++i) {
      const MlpLayer& layer = layers[i];
      const GemmShape shape{rows, layer.n, layer.k, CUBLASLT_EPILOGUE_BIAS, false};
      auto gemm = Gemm::Create(ltserve::Precision::kBf16, shape);
      if (!gemm.ok()) return Fail("Gemm::Create", gemm.status());
      auto candidates = gemm.value().Candidates(handle, kTableWorkspace, 1);
      if (!candidates.ok() || candidates.value().empty()) return Fail("heuristic", candidates.status());
      gemms.push_back(std::move(gemm).value());
      algos.push_back(candidates.value().front());
    }
    for (std::size_t i = 0; i < std::size(layers); ++i) {
      const MlpLayer& layer = layers[i];
      void* x = activations[i].data();
      void* y = activations[i + 1].data();
      void* w = weights[i].data();
      void* b = biases[i].data();
      cublas.push_back([&, i, x, y, w, b](bool) {
        return gemms[i].RunWith(algos[i], handle, GemmOperands{w, x, b, nullptr, y},
                                workspace, kTableWorkspace, s);
      });
      auto split = TimeEach(SkinnyGemmCandidates(rows, layer.n, layer.k), [&](const SkinnyGemmConfig& c) {
        return LaunchSkinnyGemm(c, x, w, b, nullptr, y, rows, layer.n, layer.k, none,
                                ElemType::kBf16, false, s);
      }, flush, s);
      auto stream_k = TimeEach(StreamedGemmCandidates(rows, layer.n, layer.k, sms), [&](const StreamedGemmConfig& c) {
        return LaunchStreamedGemm(c, x, w, b, nullptr, y, rows, layer.n, layer.k, none,
                                  ElemType::kBf16, false, s);
      }, flush, s);
      void* wp = packed_weights[i].data();
      auto packed_k = TimeEach(PackedCandidates(rows, layer.n, layer.k, sms), [&](const StreamedGemmConfig& c) {
        return LaunchStreamedGemm(c, x, wp, b, nullptr, y, rows, layer.n, layer.k, none,
                                  ElemType::kBf16, false, s, StreamedWeights::kPacked);
      }, flush, s);
      if (!split.ok()) return Fail("split-K run", split.status());
      if (!stream_k.ok()) return Fail("streamed run", stream_k.status());
      if (!packed_k.ok()) return Fail("packed run", packed_k.status());
      if (!split.value().best || !stream_k.value().best || !packed_k.value().best) {
        return Fail("candidates", ltserve::Internal("no candidate ran"));
      }
      const StreamedGemmConfig packed_config = *packed_k.value().best;
      const SkinnyGemmConfig split_config = *split.value().best;
      const StreamedGemmConfig stream_config = *stream_k.value().best;
      const std::int64_t n = layer.n;
      const std::int64_t k = layer.k;
      skinny.push_back([=](bool programmatic) {
        return Launched(LaunchSkinnyGemm(split_config, x, w, b, nullptr, y, rows, n, k, none,
                                         ElemType::kBf16, programmatic, s), "split-K");
      });
      streamed.push_back([=](bool programmatic) {
        return Launched(LaunchStreamedGemm(stream_config, x, w, b, nullptr, y, rows, n, k, none,
                                           ElemType::kBf16, programmatic, s), "streamed");
      });
      packed.push_back([=](bool programmatic) {
        return Launched(LaunchStreamedGemm(packed_config, x, wp, b, nullptr, y, rows, n, k, none,
                                           ElemType::kBf16, programmatic, s,
                                           StreamedWeights::kPacked), "packed");
      });
    }
    const auto pass_ms = [&](const std::vector<PassStep>& steps, bool programmatic) {
      return TimePassCold(steps, programmatic, flush, s);
    };
    auto reads_ms = pass_ms(reads, false);
    if (!reads_ms.ok()) return Fail("reads", reads_ms.status());
    auto cublas_ms = pass_ms(cublas, false);
    auto skinny_ms = pass_ms(skinny, true);
    auto streamed_ms = pass_ms(streamed, true);
    auto plain_ms = pass_ms(streamed, false);
    auto packed_ms = pass_ms(packed, true);
    if (!packed_ms.ok()) return Fail("packed pass", packed_ms.status());
    if (!cublas_ms.ok() || !skinny_ms.ok() || !streamed_ms.ok() || !plain_ms.ok()) {
      return Fail("pass", !cublas_ms.ok()   ? cublas_ms.status()
                          : !skinny_ms.ok() ? skinny_ms.status()
                          : !streamed_ms.ok() ? streamed_ms.status()
                                              : plain_ms.status());
    }
    const double floor_us = weight_bytes / (copy_tbps * 1e6);
    std::printf("| %ld | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f |\n",
                static_cast<long>(rows), floor_us, 1000.0 * reads_ms.value(),
                1000.0 * cublas_ms.value(), 1000.0 * skinny_ms.value(),
                1000.0 * streamed_ms.value(), 1000.0 * plain_ms.value(),
                1000.0 * packed_ms.value(), streamed_ms.value() / skinny_ms.value(),
                packed_ms.value() / skinny_ms.value(), 1000.0 * packed_ms.value() / floor_us);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int PrintSkinnyGemmTable(double copy_tbps) {
  const Layer layers[] = {{"MLP", 1024, 4096}, {"MLP", 4096, 4096}, {"MLP", 4096, 1024},
                          {"BERT", 768, 2304}, {"BERT", 768, 768},  {"BERT", 768, 3072},
                          {"BERT", 3072, 768}};
  const std::int64_t row_counts[] = {1, 8, 32, 128};
  auto timing = TableDevice::Create();
  if (!timing.ok()) return Fail("stream, handle or buffers", timing.status());
  cudaStream_t s = timing.value().stream.get();
  cublasLtHandle_t handle = timing.value().handle.get();
  const DeviceBuffer& flush = timing.value().flush;
  void* workspace = timing.value().workspace.data();
  auto w = DeviceBuffer::Create(std::size_t{4096} * 4096 * 2, "weights");
  auto x = DeviceBuffer::Create(std::size_t{128} * 4096 * 2, "x");
  auto bias = DeviceBuffer::Create(std::size_t{4096} * 2, "bias");
  auto y = DeviceBuffer::Create(std::size_t{128} * 4096 * 2, "y");
  if (!w.ok() || !x.ok() || !bias.ok() || !y.ok()) {
    return Fail("buffers", w.status());
  }
  LaunchFillRandom(w.value().data(), ElemType::kBf16, w.value().bytes() / 2, 1, s);
  LaunchFillRandom(x.value().data(), ElemType::kBf16, x.value().bytes() / 2, 2, s);
  LaunchFillRandom(bias.value().data(), ElemType::kBf16, bias.value().bytes() / 2, 3, s);

  std::printf("\nOne GEMM at a time, bf16, bias epilogue, L2 emptied before each run (median of "
              "9): cuBLASLt's first heuristic algorithm against every split-K and every streamed "
              "candidate (streamed: up to %ld rows); floor = weight bytes / %.2f TB/s.\n\n",
              static_cast<long>(kStreamedGemmMaxRows), copy_tbps);
  std::printf("| layer | rows | floor µs | weights read alone µs | cuBLASLt µs | best split-K µs | "
              "its configuration | worst split-K µs | best / cuBLASLt | best streamed µs | its "
              "configuration | streamed / cuBLASLt | best streamed, packed weights µs | best staged µs | "
              "its configuration | staged / cuBLASLt |\n"
              "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---|---:|\n");
  const int sms = SmCount();
  for (const Layer& layer : layers) {
    // The weights' bytes read by a plain streaming kernel (LaunchReadAll), nothing computed:
    // what one kernel of this size costs before any GEMM is done in it.
    auto read_ms = TimeColdOnStream([&] {
      return Launched(LaunchReadAll(w.value().data(), 2 * layer.k * layer.n, s), "read");
    }, flush, s);
    if (!read_ms.ok()) return Fail("read", read_ms.status());
    auto packed = PackedCopy(w.value().data(), layer.n, layer.k);
    if (!packed.ok()) return Fail("packing", packed.status());
    for (const std::int64_t rows : row_counts) {
      const GemmShape shape{rows, layer.n, layer.k, CUBLASLT_EPILOGUE_BIAS, false};
      auto gemm = Gemm::Create(ltserve::Precision::kBf16, shape);
      if (!gemm.ok()) return Fail("Gemm::Create", gemm.status());
      auto algos = gemm.value().Candidates(handle, kTableWorkspace, 1);
      if (!algos.ok() || algos.value().empty()) return Fail("heuristic", algos.status());
      const GemmOperands operands{w.value().data(), x.value().data(), bias.value().data(),
                                  nullptr, y.value().data()};
      auto cublas_ms = TimeColdOnStream([&] {
        return gemm.value().RunWith(algos.value().front(), handle, operands,
                                    workspace, kTableWorkspace, s);
      }, flush, s);
      if (!cublas_ms.ok()) return Fail("cuBLASLt run", cublas_ms.status());
      float best = std::numeric_limits<float>::infinity();
      float worst = 0;
      std::string best_config = "none ran";
      for (const SkinnyGemmConfig& config : SkinnyGemmCandidates(rows, layer.n, layer.k)) {
        auto ms = TimeColdOnStream([&]() -> ltserve::Status {
          const cudaError_t error = LaunchSkinnyGemm(
              config, x.value().data(), w.value().data(), bias.value().data(), nullptr,
              y.value().data(), rows, layer.n, layer.k, ltserve::plan::Activation::kNone,
              ElemType::kBf16, /*programmatic=*/false, s);
          if (error != cudaSuccess) {
            return ltserve::Internal(config.Describe() + ": " + cudaGetErrorString(error));
          }
          return ltserve::Status::Ok();
        }, flush, s);
        if (!ms.ok()) return Fail("split-K run", ms.status());
        if (ms.value() < best) {
          best = ms.value();
          best_config = config.Describe();
        }
        worst = std::max(worst, ms.value());
      }
      auto streamed = TimeEach(StreamedGemmCandidates(rows, layer.n, layer.k, sms),
                               [&](const StreamedGemmConfig& config) {
        return LaunchStreamedGemm(config, x.value().data(), w.value().data(), bias.value().data(),
                                  nullptr, y.value().data(), rows, layer.n, layer.k,
                                  ltserve::plan::Activation::kNone, ElemType::kBf16, false, s);
      }, flush, s);
      if (!streamed.ok()) return Fail("streamed run", streamed.status());
      const Timed<StreamedGemmConfig>& st = streamed.value();
      auto packed_run = TimeEach(PackedCandidates(rows, layer.n, layer.k, sms),
                                 [&](const StreamedGemmConfig& config) {
        return LaunchStreamedGemm(config, x.value().data(), packed.value().data(),
                                  bias.value().data(), nullptr, y.value().data(), rows, layer.n,
                                  layer.k, ltserve::plan::Activation::kNone, ElemType::kBf16,
                                  false, s, StreamedWeights::kPacked);
      }, flush, s);
      if (!packed_run.ok()) return Fail("packed run", packed_run.status());
      auto staged = TimeEach(StagedGemmCandidates(rows, layer.n, layer.k),
                             [&](const StagedGemmConfig& config) {
        return LaunchStagedGemm(config, x.value().data(), w.value().data(), bias.value().data(),
                                nullptr, y.value().data(), rows, layer.n, layer.k,
                                ltserve::plan::Activation::kNone, ElemType::kBf16, false, s);
      }, flush, s);
      if (!staged.ok()) return Fail("staged run", staged.status());
      const Timed<StagedGemmConfig>& sg = staged.value();
      const double floor_us = 2.0 * layer.k * layer.n / (copy_tbps * 1e6);
      std::printf("| %s %ld->%ld | %ld | %.1f | %.1f | %.1f | %.1f | %s | %.1f | %.2f | %s | %s | %s | %s | %s | %s | %s |\n",
                  layer.model, static_cast<long>(layer.k), static_cast<long>(layer.n),
                  static_cast<long>(rows), floor_us, 1000.0 * read_ms.value(),
                  1000.0 * cublas_ms.value(), 1000.0 * best,
                  best_config.c_str(), 1000.0 * worst, best / cublas_ms.value(),
                  st.best ? Us(st.best_ms).c_str() : "-",
                  st.best ? st.best->Describe().c_str() : "not offered",
                  st.best ? Ratio(st.best_ms / cublas_ms.value()).c_str() : "-",
                  packed_run.value().best ? Us(packed_run.value().best_ms).c_str() : "-",
                  sg.best ? Us(sg.best_ms).c_str() : "-",
                  sg.best ? sg.best->Describe().c_str() : "not offered",
                  sg.best ? Ratio(sg.best_ms / cublas_ms.value()).c_str() : "-");
      std::fflush(stdout);
    }
  }
  if (const int failed = PrintBertGemmChainTable(); failed != 0) return failed;
  return PrintMlpPassTable(copy_tbps);
}

int ProfileFewRowGemms() {
  constexpr std::int64_t kN = 4096;
  constexpr std::int64_t kK = 4096;
  auto stream = CreateStream();
  auto w = DeviceBuffer::Create(std::size_t{kN} * kK * 2, "weights");
  auto x = DeviceBuffer::Create(std::size_t{32} * kK * 2, "x");
  auto bias = DeviceBuffer::Create(std::size_t{kN} * 2, "bias");
  auto y = DeviceBuffer::Create(std::size_t{32} * kN * 2, "y");
  if (!stream.ok() || !w.ok() || !x.ok() || !bias.ok() || !y.ok()) {
    return Fail("buffers", stream.status());
  }
  cudaStream_t s = stream.value().get();
  LaunchFillRandom(w.value().data(), ElemType::kBf16, kN * kK, 1, s);
  LaunchFillRandom(x.value().data(), ElemType::kBf16, 32 * kK, 2, s);
  LaunchFillRandom(bias.value().data(), ElemType::kBf16, kN, 3, s);
  const auto none = ltserve::plan::Activation::kNone;
  const int sms = SmCount();
  cudaStreamSynchronize(s);
  cudaProfilerStart();
  for (const std::int64_t rows : {1, 8}) {
    for (const SkinnyGemmConfig& c : SkinnyGemmCandidates(rows, kN, kK)) {
      if (c.cluster != 8) continue;
      std::fprintf(stderr, "profiled: %ld rows, %s\n", static_cast<long>(rows), c.Describe().c_str());
      LaunchSkinnyGemm(c, x.value().data(), w.value().data(), bias.value().data(), nullptr,
                       y.value().data(), rows, kN, kK, none, ElemType::kBf16, false, s);
    }
    for (const StreamedGemmConfig& c : StreamedGemmCandidates(rows, kN, kK, sms)) {
      std::fprintf(stderr, "profiled: %ld rows, %s\n", static_cast<long>(rows), c.Describe().c_str());
      LaunchStreamedGemm(c, x.value().data(), w.value().data(), bias.value().data(), nullptr,
                         y.value().data(), rows, kN, kK, none, ElemType::kBf16, false, s);
    }
  }
  cudaProfilerStop();
  return cudaStreamSynchronize(s) == cudaSuccess ? 0 : 1;
}


int ProfileWideGemms() {
  // BERT-base's QKV projection (short K, many outputs) and FFN down projection (long K, few
  // outputs): the split-K kernel's gap to cuBLASLt at 128 rows is 1.3-1.9x on these.
  const Layer layers[] = {{"BERT", 768, 2304}, {"BERT", 3072, 768}};
  constexpr std::int64_t kRows = 128;
  auto timing = TableDevice::Create();
  if (!timing.ok()) return Fail("stream, handle or buffers", timing.status());
  cudaStream_t s = timing.value().stream.get();
  cublasLtHandle_t handle = timing.value().handle.get();
  void* workspace = timing.value().workspace.data();
  auto w = DeviceBuffer::Create(std::size_t{3072} * 2304 * 2, "weights");
  auto x = DeviceBuffer::Create(std::size_t{kRows} * 3072 * 2, "x");
  auto bias = DeviceBuffer::Create(std::size_t{3072} * 2, "bias");
  auto y = DeviceBuffer::Create(std::size_t{kRows} * 3072 * 2, "y");
  if (!w.ok() || !x.ok() || !bias.ok() || !y.ok()) return Fail("buffers", w.status());
  LaunchFillRandom(w.value().data(), ElemType::kBf16, w.value().bytes() / 2, 1, s);
  LaunchFillRandom(x.value().data(), ElemType::kBf16, x.value().bytes() / 2, 2, s);
  LaunchFillRandom(bias.value().data(), ElemType::kBf16, bias.value().bytes() / 2, 3, s);
  const auto none = ltserve::plan::Activation::kNone;
  struct Chosen {
    Layer layer;
    Gemm gemm;
    cublasLtMatmulAlgo_t algo;
    SkinnyGemmConfig split;
    StagedGemmConfig staged;
  };
  // Chosen before the profiler starts, so that only the launches below are profiled.
  std::vector<Chosen> chosen;
  for (const Layer& layer : layers) {
    auto gemm = Gemm::Create(ltserve::Precision::kBf16,
                             GemmShape{kRows, layer.n, layer.k, CUBLASLT_EPILOGUE_BIAS, false});
    if (!gemm.ok()) return Fail("Gemm::Create", gemm.status());
    auto algos = gemm.value().Candidates(handle, kTableWorkspace, 1);
    if (!algos.ok() || algos.value().empty()) return Fail("heuristic", algos.status());
    auto split = TimeEach(SkinnyGemmCandidates(kRows, layer.n, layer.k), [&](const SkinnyGemmConfig& c) {
      return LaunchSkinnyGemm(c, x.value().data(), w.value().data(), bias.value().data(), nullptr,
                              y.value().data(), kRows, layer.n, layer.k, none, ElemType::kBf16,
                              false, s);
    }, timing.value().flush, s);
    if (!split.ok() || !split.value().best) return Fail("split-K candidates", split.status());
    auto staged = TimeEach(StagedGemmCandidates(kRows, layer.n, layer.k), [&](const StagedGemmConfig& c) {
      return LaunchStagedGemm(c, x.value().data(), w.value().data(), bias.value().data(), nullptr,
                              y.value().data(), kRows, layer.n, layer.k, none, ElemType::kBf16,
                              false, s);
    }, timing.value().flush, s);
    if (!staged.ok() || !staged.value().best) return Fail("staged candidates", staged.status());
    chosen.push_back(Chosen{layer, std::move(gemm).value(), algos.value().front(),
                            *split.value().best, *staged.value().best});
  }
  if (cudaStreamSynchronize(s) != cudaSuccess) return 1;
  cudaProfilerStart();
  for (const Chosen& c : chosen) {
    std::fprintf(stderr, "profiled: %s %ld->%ld, %ld rows, cuBLASLt (its kernels, then the split-K\n"
                 "          reduction if it uses one), then %s, then %s\n", c.layer.model,
                 static_cast<long>(c.layer.k), static_cast<long>(c.layer.n),
                 static_cast<long>(kRows), c.split.Describe().c_str(), c.staged.Describe().c_str());
    const ltserve::Status run = c.gemm.RunWith(
        c.algo, handle, GemmOperands{w.value().data(), x.value().data(), bias.value().data(),
                                     nullptr, y.value().data()},
        workspace, kTableWorkspace, s);
    if (!run.ok()) return Fail("cuBLASLt run", run);
    const cudaError_t error = LaunchSkinnyGemm(c.split, x.value().data(), w.value().data(),
                                               bias.value().data(), nullptr, y.value().data(),
                                               kRows, c.layer.n, c.layer.k, none,
                                               ElemType::kBf16, false, s);
    if (error != cudaSuccess) return Fail("split-K run", Launched(error, c.split.Describe()));
    const cudaError_t staged_error = LaunchStagedGemm(
        c.staged, x.value().data(), w.value().data(), bias.value().data(), nullptr,
        y.value().data(), kRows, c.layer.n, c.layer.k, none, ElemType::kBf16, false, s);
    if (staged_error != cudaSuccess) {
      return Fail("staged run", Launched(staged_error, c.staged.Describe()));
    }
  }
  cudaProfilerStop();
  return cudaStreamSynchronize(s) == cudaSuccess ? 0 : 1;
}

}  // namespace ltserve_bench
