#include "cutlass_gemm_table.h"

#include <cstdio>
#include <string>
#include <vector>

#include "gemm_table_device.h"
#include "gpu/cutlass_gemm.h"
#include "gpu/kernels.h"

namespace ltserve_bench {
namespace {

using namespace ltserve::gpu;
using ltserve::plan::Activation;

int Fail(const std::string& what, const ltserve::Status& status) {
  std::fprintf(stderr, "CUTLASS GEMM table: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

// One GEMM of a BERT-base layer as the executor runs it in bf16: bias always, the residual
// after the output projection and FFN down, GELU in its tanh form (the bf16 default, fused by
// cuBLASLt too) after FFN up. `in` and `out` index the layer's activation buffers.
struct Step {
  const char* name;
  std::int64_t k, n;
  bool residual;
  Activation act;
  int in, out;
};
// Buffers: 0 the layer's input (768), 1 QKV (2304), 2 the projection's output (768), 3 the
// FFN's hidden (3072), 4 the layer's output (768). The projection reads the input again,
// standing in for attention's output, and so do the residuals.
constexpr std::int64_t kWidths[] = {768, 2304, 768, 3072, 768};
constexpr Step kSteps[] = {
    {"QKV 768->2304", 768, 2304, false, Activation::kNone, 0, 1},
    {"output 768->768 + residual", 768, 768, true, Activation::kNone, 0, 2},
    {"FFN up 768->3072 + GELU", 768, 3072, false, Activation::kGeluTanh, 2, 3},
    {"FFN down 3072->768 + residual", 3072, 768, true, Activation::kNone, 3, 4},
};
constexpr std::int64_t kRowCounts[] = {128, 1024, 4096, 16384};
constexpr std::int64_t kMaxRows = 16384;

struct Layer {
  std::vector<DeviceBuffer> activations, weights, biases;
};

ltserve::Result<Layer> CreateLayer(cudaStream_t s) {
  Layer layer;
  for (std::size_t i = 0; i < std::size(kWidths); ++i) {
    LTSERVE_ASSIGN_OR_RETURN(
        DeviceBuffer a,
        DeviceBuffer::Create(static_cast<std::size_t>(kMaxRows * kWidths[i]) * 2, "activations"));
    LaunchFillRandom(a.data(), ElemType::kBf16, kMaxRows * kWidths[i], 70 + i, s);
    layer.activations.push_back(std::move(a));
  }
  for (std::size_t i = 0; i < std::size(kSteps); ++i) {
    const Step& step = kSteps[i];
    LTSERVE_ASSIGN_OR_RETURN(
        DeviceBuffer w, DeviceBuffer::Create(static_cast<std::size_t>(step.k * step.n) * 2, "W"));
    LTSERVE_ASSIGN_OR_RETURN(DeviceBuffer b,
                             DeviceBuffer::Create(static_cast<std::size_t>(step.n) * 2, "bias"));
    LaunchFillRandom(w.data(), ElemType::kBf16, step.k * step.n, 80 + i, s);
    LaunchFillRandom(b.data(), ElemType::kBf16, step.n, 90 + i, s);
    layer.weights.push_back(std::move(w));
    layer.biases.push_back(std::move(b));
  }
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  return layer;
}

// Step i's buffers in `layer`.
struct StepBuffers {
  void* x;
  void* y;
  const void* w;
  const void* bias;
  const void* residual;  // null where the step has none
};

StepBuffers BuffersOf(const Layer& layer, std::size_t i) {
  const Step& step = kSteps[i];
  return {layer.activations[step.in].data(), layer.activations[step.out].data(),
          layer.weights[i].data(), layer.biases[i].data(),
          step.residual ? layer.activations[0].data() : nullptr};
}

// cuBLASLt's run of `step` at `rows` with its first heuristic algorithm.
struct CublasLtStep {
  Gemm gemm;
  cublasLtMatmulAlgo_t algo;
};

ltserve::Result<CublasLtStep> CreateCublasLtStep(const Step& step, std::int64_t rows,
                                                 cublasLtHandle_t handle) {
  const cublasLtEpilogue_t epilogue =
      step.act == Activation::kGeluTanh ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  LTSERVE_ASSIGN_OR_RETURN(Gemm gemm, Gemm::Create(ltserve::Precision::kBf16,
                                                   GemmShape{rows, step.n, step.k, epilogue,
                                                             step.residual}));
  LTSERVE_ASSIGN_OR_RETURN(auto algos, gemm.Candidates(handle, kTableWorkspace, 1));
  if (algos.empty()) return ltserve::NotFound("cuBLASLt's heuristic offers no algorithm");
  return CublasLtStep{std::move(gemm), algos.front()};
}

}  // namespace

int PrintCutlassGemmTable() {
  if (!CutlassGemmAvailable()) {
    std::printf("\nCUTLASS GEMM table: this build has no CUTLASS kernels.\n");
    return 0;
  }
  auto device = TableDevice::Create();
  if (!device.ok()) return Fail("stream, handle or buffers", device.status());
  cudaStream_t s = device.value().stream.get();
  cublasLtHandle_t handle = device.value().handle.get();
  const DeviceBuffer& flush = device.value().flush;
  void* workspace = device.value().workspace.data();
  auto created = CreateLayer(s);
  if (!created.ok()) return Fail("buffers", created.status());
  Layer& layer = created.value();
  const int sms = SmCount();
  const std::vector<CutlassGemmConfig> tiles = CutlassGemmCandidates(kMaxRows, 768, 768);

  std::printf("\nBERT-base's GEMMs one at a time, bf16, bias (and residual, GELU tanh) in the "
              "epilogue, the L2 emptied before each run (median of 9), µs: cuBLASLt's first "
              "heuristic algorithm and each CUTLASS tile.\n\n| GEMM | rows | cuBLASLt |");
  for (const CutlassGemmConfig& tile : tiles) {
    std::string name = tile.Describe();
    if (name.rfind("CUTLASS ", 0) == 0) name.erase(0, 8);
    std::printf(" %s |", name.c_str());
  }
  std::printf(" best CUTLASS / cuBLASLt |\n|---|---:|---:|");
  for (std::size_t i = 0; i < tiles.size(); ++i) std::printf("---:|");
  std::printf("---:|\n");
  // The fastest tile of each step at each row count, for the graphs below.
  std::vector<std::vector<CutlassGemmConfig>> fastest(std::size(kRowCounts));
  for (std::size_t r = 0; r < std::size(kRowCounts); ++r) {
    const std::int64_t rows = kRowCounts[r];
    for (std::size_t i = 0; i < std::size(kSteps); ++i) {
      const Step& step = kSteps[i];
      const auto [x, y, w, b, residual] = BuffersOf(layer, i);
      auto cublas = CreateCublasLtStep(step, rows, handle);
      if (!cublas.ok()) return Fail(step.name, cublas.status());
      auto cublas_ms = TimeColdOnStream([&] {
        return cublas.value().gemm.RunWith(cublas.value().algo, handle,
                                           GemmOperands{w, x, b, residual, y}, workspace,
                                           kTableWorkspace, s);
      }, flush, s);
      if (!cublas_ms.ok()) return Fail(step.name, cublas_ms.status());
      std::printf("| %s | %lld | %.1f |", step.name, static_cast<long long>(rows),
                  1000.0 * cublas_ms.value());
      auto timed = TimeEach(tiles, [&](const CutlassGemmConfig& tile) {
        return LaunchCutlassGemm(tile, x, w, b, residual, y, rows, step.n, step.k, step.act,
                                 ElemType::kBf16, sms, false, s);
      }, flush, s);
      if (!timed.ok()) return Fail(step.name, timed.status());
      if (!timed.value().best) return Fail(step.name, ltserve::Internal("no CUTLASS tile"));
      for (const float ms : timed.value().each_ms) std::printf(" %.1f |", 1000.0 * ms);
      fastest[r].push_back(*timed.value().best);
      std::printf(" %.3f |\n", timed.value().best_ms / cublas_ms.value());
      std::fflush(stdout);
    }
  }

  std::printf("\nThe four as one CUDA graph (the L2 emptied before each replay, median of 9), "
              "µs: cuBLASLt's first heuristic algorithms against CUTLASS at each GEMM's fastest "
              "tile above, with programmatic launches (each kernel's copies wait for the one "
              "ahead; cuBLASLt's kernels take no part) and without.\n\n"
              "| rows | cuBLASLt | CUTLASS, programmatic | CUTLASS, plain | programmatic / "
              "cuBLASLt |\n|---:|---:|---:|---:|---:|\n");
  for (std::size_t r = 0; r < std::size(kRowCounts); ++r) {
    const std::int64_t rows = kRowCounts[r];
    if (rows < 4096) continue;
    std::vector<CublasLtStep> cublas_steps;
    for (const Step& step : kSteps) {
      auto cublas = CreateCublasLtStep(step, rows, handle);
      if (!cublas.ok()) return Fail(step.name, cublas.status());
      cublas_steps.push_back(std::move(cublas).value());
    }
    std::vector<PassStep> cublas_pass, cutlass_pass;
    for (std::size_t i = 0; i < std::size(kSteps); ++i) {
      const Step& step = kSteps[i];
      const auto [x, y, w, b, residual] = BuffersOf(layer, i);
      const CutlassGemmConfig tile = fastest[r][i];
      cublas_pass.push_back([&, i, x, y, w, b, residual](bool) {
        return cublas_steps[i].gemm.RunWith(cublas_steps[i].algo, handle,
                                            GemmOperands{w, x, b, residual, y}, workspace,
                                            kTableWorkspace, s);
      });
      cutlass_pass.push_back([=, &step](bool programmatic) {
        return Launched(LaunchCutlassGemm(tile, x, w, b, residual, y, rows, step.n, step.k,
                                          step.act, ElemType::kBf16, sms, programmatic, s),
                        tile.Describe());
      });
    }
    auto cublas_ms = TimePassCold(cublas_pass, false, flush, s);
    auto programmatic_ms = TimePassCold(cutlass_pass, true, flush, s);
    auto plain_ms = TimePassCold(cutlass_pass, false, flush, s);
    for (const auto* ms : {&cublas_ms, &programmatic_ms, &plain_ms}) {
      if (!ms->ok()) return Fail("graph", ms->status());
    }
    std::printf("| %lld | %.1f | %.1f | %.1f | %.3f |\n", static_cast<long long>(rows),
                1000.0 * cublas_ms.value(), 1000.0 * programmatic_ms.value(),
                1000.0 * plain_ms.value(), programmatic_ms.value() / cublas_ms.value());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace ltserve_bench
