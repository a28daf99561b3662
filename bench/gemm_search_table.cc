#include "gemm_search_table.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu/cuda_resources.h"
#include "gpu/gemm.h"
#include "gpu/kernels.h"

namespace ltserve_bench {
namespace {

using namespace ltserve::gpu;

struct Layer {
  const char* name;
  std::int64_t n, k;
  cublasLtEpilogue_t epilogue;
  bool residual;
};

// How many configurations the search enumerates at most, how many of the fastest it times
// again, and in how many interleaved rounds (the median is reported): one pass over thousands
// of configurations ranks them, the rounds separate the few that are a few percent apart.
constexpr std::size_t kSearchLimit = 60000;
constexpr std::size_t kFinalists = 8;
constexpr int kFinalRounds = 7;
constexpr int kHeuristicCandidates = 32;
constexpr std::size_t kWorkspace = std::size_t{32} << 20;

int Fail(const std::string& what, const ltserve::Status& status) {
  std::fprintf(stderr, "GEMM search table: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

struct Timed {
  cublasLtMatmulAlgo_t algo;
  float ms;
};

}  // namespace

int PrintGemmSearchTable(double peak_tflops) {
  const Layer layers[] = {
      {"QKV 768->2304", 2304, 768, CUBLASLT_EPILOGUE_BIAS, false},
      {"output projection 768->768 (+residual)", 768, 768, CUBLASLT_EPILOGUE_BIAS, true},
      {"FFN up 768->3072 (GELU)", 3072, 768, CUBLASLT_EPILOGUE_GELU_BIAS, false},
      {"FFN down 3072->768 (+residual)", 768, 3072, CUBLASLT_EPILOGUE_BIAS, true}};
  const std::int64_t row_counts[] = {128, 4096, 16384};
  constexpr std::int64_t kMaxRows = 16384;
  auto stream = CreateStream();
  auto handle = CreateLtHandle();
  if (!stream.ok() || !handle.ok()) return Fail("stream or handle", stream.status());
  auto workspace = DeviceBuffer::Create(kWorkspace, "workspace");
  auto w = DeviceBuffer::Create(std::size_t{3072} * 768 * 2, "weights");
  auto x = DeviceBuffer::Create(std::size_t{kMaxRows} * 3072 * 2, "x");
  auto bias = DeviceBuffer::Create(std::size_t{3072} * 2, "bias");
  auto residual = DeviceBuffer::Create(std::size_t{kMaxRows} * 3072 * 2, "residual");
  auto y = DeviceBuffer::Create(std::size_t{kMaxRows} * 3072 * 2, "y");
  if (!workspace.ok() || !w.ok() || !x.ok() || !bias.ok() || !residual.ok() || !y.ok()) {
    return Fail("buffers", w.status());
  }
  cudaStream_t s = stream.value().get();
  LaunchFillRandom(w.value().data(), ElemType::kBf16, w.value().bytes() / 2, 1, s);
  LaunchFillRandom(x.value().data(), ElemType::kBf16, x.value().bytes() / 2, 2, s);
  LaunchFillRandom(bias.value().data(), ElemType::kBf16, bias.value().bytes() / 2, 3, s);
  LaunchFillRandom(residual.value().data(), ElemType::kBf16, residual.value().bytes() / 2, 4, s);

  std::printf("\nBERT-base's GEMMs one at a time, bf16, timed warm (as the tuner times cuBLASLt; "
              "medians of %d interleaved rounds): the heuristic's first algorithm and the best "
              "of its first %d against the best of every configuration cuBLASLt accepts "
              "(algorithm × tile × stages × cluster × swizzle × custom option, no split-K); "
              "%% of the run's bf16 matmul peak, %.0f TFLOP/s.\n\n",
              kFinalRounds, kHeuristicCandidates, peak_tflops);
  std::printf("| GEMM | rows | heuristic first µs | best of heuristic µs | search best µs | "
              "its configuration | search / heuristic best | configurations | heuristic best "
              "%% peak | search best %% peak |\n"
              "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|\n");
  for (const Layer& layer : layers) {
    for (const std::int64_t rows : row_counts) {
      const auto started = std::chrono::steady_clock::now();
      const GemmShape shape{rows, layer.n, layer.k, layer.epilogue, layer.residual};
      auto gemm = Gemm::Create(ltserve::Precision::kBf16, shape);
      if (!gemm.ok()) return Fail("Gemm::Create", gemm.status());
      const GemmOperands operands{w.value().data(), x.value().data(),
                                  bias.value().data(),
                                  layer.residual ? residual.value().data() : nullptr,
                                  y.value().data()};
      const auto time = [&](const cublasLtMatmulAlgo_t& algo) {
        return TimeOnStream([&] {
          return gemm.value().RunWith(algo, handle.value().get(), operands,
                                      workspace.value().data(), kWorkspace, s);
        }, s);
      };
      auto offered = gemm.value().Candidates(handle.value().get(), kWorkspace,
                                             kHeuristicCandidates);
      if (!offered.ok() || offered.value().empty()) return Fail("heuristic", offered.status());
      auto all = gemm.value().AllConfigurations(handle.value().get(), kWorkspace, kSearchLimit,
                                                ltserve::gpu::ConfigurationSpace::kEverything);
      if (!all.ok()) return Fail("enumeration", all.status());

      // One pass ranks each list; the fastest few of each are timed again below.
      const auto rank = [&](const std::vector<cublasLtMatmulAlgo_t>& algos) {
        std::vector<Timed> timed;
        for (const cublasLtMatmulAlgo_t& algo : algos) {
          ltserve::Result<float> ms = time(algo);
          if (ms.ok()) timed.push_back({algo, ms.value()});
        }
        std::sort(timed.begin(), timed.end(),
                  [](const Timed& a, const Timed& b) { return a.ms < b.ms; });
        if (timed.size() > kFinalists) timed.resize(kFinalists);
        return timed;
      };
      std::vector<Timed> finalists = rank(offered.value());
      const std::size_t heuristic_count = finalists.size();
      std::vector<Timed> searched = rank(all.value());
      finalists.push_back({offered.value().front(), 0});  // the heuristic's first, last
      finalists.insert(finalists.end() - 1, searched.begin(), searched.end());
      std::vector<std::vector<float>> rounds(finalists.size());
      for (int round = 0; round < kFinalRounds; ++round) {
        for (std::size_t i = 0; i < finalists.size(); ++i) {
          ltserve::Result<float> ms = time(finalists[i].algo);
          if (!ms.ok()) return Fail("timing a finalist", ms.status());
          rounds[i].push_back(ms.value());
        }
      }
      for (std::size_t i = 0; i < finalists.size(); ++i) {
        std::nth_element(rounds[i].begin(), rounds[i].begin() + kFinalRounds / 2,
                         rounds[i].end());
        finalists[i].ms = rounds[i][kFinalRounds / 2];
      }
      const auto fastest = [&](std::size_t begin, std::size_t end) {
        std::size_t best = begin;
        for (std::size_t i = begin; i < end; ++i) {
          if (finalists[i].ms < finalists[best].ms) best = i;
        }
        return best;
      };
      const std::size_t heuristic_best = fastest(0, heuristic_count);
      const std::size_t search_best = fastest(heuristic_count, finalists.size() - 1);
      const double flops = 2.0 * rows * layer.n * layer.k;
      const auto percent = [&](float ms) { return 100.0 * flops / (ms * 1e9) / peak_tflops; };
      const Timed& first = finalists.back();
      std::printf("| %s | %ld | %.1f | %.1f | %.1f | %s | %.3f | %zu | %.0f | %.0f |\n",
                  layer.name, static_cast<long>(rows), 1000.0 * first.ms,
                  1000.0 * finalists[heuristic_best].ms, 1000.0 * finalists[search_best].ms,
                  DescribeAlgo(finalists[search_best].algo).c_str(),
                  finalists[search_best].ms / finalists[heuristic_best].ms, all.value().size(),
                  percent(finalists[heuristic_best].ms), percent(finalists[search_best].ms));
      std::fflush(stdout);
      std::fprintf(stderr, "%s at %ld rows (%.1f s): heuristic first %s\n", layer.name,
                   static_cast<long>(rows),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
                       .count(),
                   DescribeAlgo(first.algo).c_str());
      for (std::size_t i = 0; i + 1 < finalists.size(); ++i) {
        std::fprintf(stderr, "  %s %.2f µs  %s\n", i < heuristic_count ? "heuristic" : "search   ",
                     1000.0 * finalists[i].ms, DescribeAlgo(finalists[i].algo).c_str());
      }
    }
  }
  return 0;
}

}  // namespace ltserve_bench
