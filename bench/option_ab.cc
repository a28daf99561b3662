#include "option_ab.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <utility>
#include <vector>

#include "bench_timing.h"
#include "gpu/gpu_factory.h"
#include "gpu_forward_timer.h"

namespace ltserve_bench {

namespace {

// Each timer's median graph µs over kRounds at `batch` (rows, or with `seq` > 0 that many
// sequences of `seq` tokens), the timers taking turns round after round so that any drift of
// the machine reaches them alike.
ltserve::Result<std::vector<double>> AlternatingMedians(std::span<GpuForwardTimer* const> timers,
                                                        std::int64_t batch, std::int64_t seq) {
  const std::vector<std::int32_t> lengths(static_cast<std::size_t>(seq > 0 ? batch : 0),
                                          static_cast<std::int32_t>(seq));
  const int iterations = batch >= 32 ? 20 : 50;
  std::vector<std::vector<double>> times(timers.size());
  for (int r = 0; r < kRounds; ++r) {
    for (std::size_t t = 0; t < timers.size(); ++t) {
      auto us = seq > 0 ? timers[t]->TimeTokenForward(lengths, iterations)
                        : timers[t]->TimeForward(batch, iterations);
      if (!us.ok()) return us.status();
      times[t].push_back(us.value());
    }
  }
  std::vector<double> medians;
  for (const auto& t : times) medians.push_back(Median(t));
  return medians;
}

}  // namespace

OptionAB ProgrammaticLaunchAB() {
  using ltserve::ProgrammaticLaunch;
  return OptionAB{"programmatic dependent launch on and off", "on", "off",
                  [](ltserve::ModelOptions& o) { o.programmatic_launch = ProgrammaticLaunch::kOn; },
                  [](ltserve::ModelOptions& o) { o.programmatic_launch = ProgrammaticLaunch::kOff; }};
}

OptionAB ProgrammaticAutoAB() {
  using ltserve::ProgrammaticLaunch;
  OptionAB ab{"programmatic dependent launch chosen per bucket in the pass (auto) and always on (true)",
              "auto", "on",
              [](ltserve::ModelOptions& o) { o.programmatic_launch = ProgrammaticLaunch::kAuto; },
              [](ltserve::ModelOptions& o) { o.programmatic_launch = ProgrammaticLaunch::kOn; }};
  ab.print_logs = true;  // the load log lists each bucket's choice and the ratios timed
  return ab;
}

OptionAB SkinnyGemmAB() {
  return OptionAB{"the split-K kernel where it times faster (skinny_gemm_kernel auto) and never (off)",
                  "auto", "off",
                  [](ltserve::ModelOptions& o) { o.skinny_gemm = ltserve::OwnKernelMode::kAuto; },
                  [](ltserve::ModelOptions& o) { o.skinny_gemm = ltserve::OwnKernelMode::kOff; }};
}

OptionAB StagedGemmAB() {
  OptionAB ab{"the staged-weights kernel where it times faster (staged_gemm_kernel auto) and never (off)",
              "auto", "off",
              [](ltserve::ModelOptions& o) { o.staged_gemm = ltserve::OwnKernelMode::kAuto; },
              [](ltserve::ModelOptions& o) { o.staged_gemm = ltserve::OwnKernelMode::kOff; }};
  ab.print_logs = true;  // the load log says which GEMM buckets took it
  return ab;
}
OptionAB StagedEverywhereAB() {
  OptionAB ab{"every GEMM of up to 128 rows on the staged-weights kernel (staged_gemm_kernel always, skinny_gemm_kernel off) and the defaults",
              "staged", "defaults",
              [](ltserve::ModelOptions& o) {
                o.staged_gemm = ltserve::OwnKernelMode::kAlways;
                o.skinny_gemm = ltserve::OwnKernelMode::kOff;
              },
              [](ltserve::ModelOptions& o) {
                // Set, not left: B's options start as A set them.
                const ltserve::ModelOptions defaults;
                o.staged_gemm = defaults.staged_gemm;
                o.skinny_gemm = defaults.skinny_gemm;
              }};
  ab.print_logs = true;
  return ab;
}
OptionAB LayerChainAB() {
  return OptionAB{"the layer-chain kernel where it times faster (layer_chain_kernel auto) and never (off)",
                  "auto", "off",
                  [](ltserve::ModelOptions& o) { o.layer_chain = ltserve::OwnKernelMode::kAuto; },
                  [](ltserve::ModelOptions& o) { o.layer_chain = ltserve::OwnKernelMode::kOff; }};
}

OptionAB GemmLayerNormAB() {
  return OptionAB{"the GEMM + LayerNorm kernel where it times faster (gemm_layernorm_kernel auto) and never (off)",
                  "auto", "off",
                  [](ltserve::ModelOptions& o) { o.gemm_layernorm = ltserve::OwnKernelMode::kAuto; },
                  [](ltserve::ModelOptions& o) { o.gemm_layernorm = ltserve::OwnKernelMode::kOff; }};
}

OptionAB StreamingLayerNormAB() {
  return OptionAB{"LayerNorm's streaming schedule where it times faster (streaming_layernorm_kernel auto) and never (off)",
                  "auto", "off",
                  [](ltserve::ModelOptions& o) { o.streaming_layernorm = ltserve::OwnKernelMode::kAuto; },
                  [](ltserve::ModelOptions& o) { o.streaming_layernorm = ltserve::OwnKernelMode::kOff; }};
}

OptionAB TwoStreamHalvesAB() {
  return OptionAB{"row-local steps as two halves on two streams where they time faster (two_stream_halves auto) and never (off)",
                  "auto", "off",
                  [](ltserve::ModelOptions& o) { o.two_stream_halves = ltserve::OwnKernelMode::kAuto; },
                  [](ltserve::ModelOptions& o) { o.two_stream_halves = ltserve::OwnKernelMode::kOff; }};
}

OptionAB GemmLayerNormAlwaysAB() {
  OptionAB ab{"every Linear before a LayerNorm fused with it (gemm_layernorm_kernel always) and none (off)",
              "always", "off",
              [](ltserve::ModelOptions& o) { o.gemm_layernorm = ltserve::OwnKernelMode::kAlways; },
              [](ltserve::ModelOptions& o) { o.gemm_layernorm = ltserve::OwnKernelMode::kOff; }};
  ab.print_logs = true;
  return ab;
}

namespace {
// Every GEMM the own kernels take runs on them: the split-K kernel and, before a LayerNorm,
// the GEMM + LayerNorm kernel, so that every kernel boundary of a layer is between own kernels.
void OwnKernelsEverywhere(ltserve::ModelOptions& o) {
  o.skinny_gemm = ltserve::OwnKernelMode::kAlways;
  o.gemm_layernorm = ltserve::OwnKernelMode::kAlways;
}
}  // namespace

OptionAB OwnKernelsEverywhereAB() {
  OptionAB ab{"every GEMM on the own kernels where they run (skinny_gemm_kernel and gemm_layernorm_kernel always) and the defaults",
              "own", "defaults", OwnKernelsEverywhere, [](ltserve::ModelOptions& o) {
                // Set, not left: B's options start as A set them.
                const ltserve::ModelOptions defaults;
                o.skinny_gemm = defaults.skinny_gemm;
                o.gemm_layernorm = defaults.gemm_layernorm;
              }};
  ab.print_logs = true;
  return ab;
}

OptionAB ProgrammaticWithOwnKernelsAB() {
  return OptionAB{"programmatic dependent launch on and off, every GEMM on the own kernels where they run",
                  "on", "off",
                  [](ltserve::ModelOptions& o) {
                    OwnKernelsEverywhere(o);
                    o.programmatic_launch = ltserve::ProgrammaticLaunch::kOn;
                  },
                  [](ltserve::ModelOptions& o) {
                    OwnKernelsEverywhere(o);
                    o.programmatic_launch = ltserve::ProgrammaticLaunch::kOff;
                  }};
}

OptionAB KernelsInPassAB() {
  OptionAB ab{"own-kernel choices checked in the pass (check_kernels_in_pass true) and made one kernel at a time (false)",
              "checked", "per kernel",
              [](ltserve::ModelOptions& o) { o.check_kernels_in_pass = true; },
              [](ltserve::ModelOptions& o) { o.check_kernels_in_pass = false; }};
  ab.print_logs = true;
  return ab;
}

OptionAB GemmSearchAB() {
  OptionAB ab{"the wide cuBLASLt search (gemm_search wide) and the heuristic's candidates (heuristic)",
              "wide", "heuristic",
              [](ltserve::ModelOptions& o) { o.gemm_search = ltserve::GemmSearch::kWide; },
              [](ltserve::ModelOptions& o) { o.gemm_search = ltserve::GemmSearch::kHeuristic; }};
  ab.same_algorithms = false;
  return ab;
}

OptionAB WorkspaceAB() {
  OptionAB ab{"cuBLASLt's workspace at 32 MiB and at 1 byte (cublaslt_workspace_bytes)",
              "32 MiB", "1 byte",
              [](ltserve::ModelOptions& o) { o.workspace_bytes = std::size_t{32} << 20; },
              [](ltserve::ModelOptions& o) { o.workspace_bytes = 1; }};
  ab.same_algorithms = false;
  return ab;
}

OptionAB MemsetConsolidationAB() {
  return OptionAB{"cuBLASLt's counter memsets as one a pass (consolidate_cublaslt_memsets true) and one a GEMM (false)",
                  "one", "in place",
                  [](ltserve::ModelOptions& o) { o.consolidate_cublaslt_memsets = true; },
                  [](ltserve::ModelOptions& o) { o.consolidate_cublaslt_memsets = false; }};
}

OptionAB CutlassGemmAB() {
  return OptionAB{"CUTLASS's GEMMs wherever they apply (cutlass_gemm_kernel always) and off",
                  "CUTLASS", "off",
                  [](ltserve::ModelOptions& o) {
                    o.cutlass_gemm = ltserve::OwnKernelMode::kAlways;
                  },
                  [](ltserve::ModelOptions& o) { o.cutlass_gemm = ltserve::OwnKernelMode::kOff; }};
}

OptionAB CutlassGemmAutoAB() {
  return OptionAB{"CUTLASS's GEMMs where they time faster alone (cutlass_gemm_kernel auto) and off",
                  "auto", "off",
                  [](ltserve::ModelOptions& o) { o.cutlass_gemm = ltserve::OwnKernelMode::kAuto; },
                  [](ltserve::ModelOptions& o) { o.cutlass_gemm = ltserve::OwnKernelMode::kOff; }};
}

OptionAB AttentionOrderAB() {
  return OptionAB{"attention's work items last sequence first and first sequence first",
                  "last first", "in order",
                  [](ltserve::ModelOptions& o) { o.attention_last_sequence_first = true; },
                  [](ltserve::ModelOptions& o) { o.attention_last_sequence_first = false; }};
}

OptionAB ControlAB() {
  const auto unchanged = [](ltserve::ModelOptions&) {};
  return OptionAB{"the same options twice (a control)", "A", "A again", unchanged, unchanged};
}

OptionAB Swapped(OptionAB ab) {
  std::swap(ab.a_label, ab.b_label);
  std::swap(ab.set_a, ab.set_b);
  ab.title += ", the second side loaded first";
  ab.print_logs = true;
  return ab;
}

int PrintOptionAB(const std::string& name, const OptionAB& ab,
                  std::shared_ptr<const ltserve::plan::Plan> plan, ltserve::ModelSpec spec,
                  const std::optional<ltserve::TokenLayout>& tokens,
                  std::span<const std::int64_t> batches, std::int64_t seq) {
  const std::filesystem::path cache = std::filesystem::temp_directory_path() /
                                      ("ltserve_option_ab_" + std::to_string(std::random_device{}()));
  spec.options.algo_cache_file = cache.string();
  // Index 1 is A, 0 is B.
  std::unique_ptr<GpuForwardTimer> timers[2];
  for (int side = 1; side >= 0; --side) {
    (side == 1 ? ab.set_a : ab.set_b)(spec.options);
    const auto load_start = std::chrono::steady_clock::now();
    auto model = ltserve::gpu::LoadGpuModel(plan, spec, tokens);
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    auto timer = model.ok() ? GpuForwardTimer::Create(model.value())
                            : ltserve::Result<std::unique_ptr<GpuForwardTimer>>(model.status());
    const std::string& label = side == 1 ? ab.a_label : ab.b_label;
    if (!timer.ok()) {
      std::fprintf(stderr, "%s, %s: %s\n", name.c_str(), label.c_str(),
                   timer.status().ToString().c_str());
      std::filesystem::remove(cache);
      return 1;
    }
    if (!ab.same_algorithms || ab.print_logs) {
      std::fprintf(stderr, "%s, %s: loaded in %.1f s: %s\n", name.c_str(), label.c_str(), load_s,
                   ltserve::gpu::CreateGpuFactory(model.value())->Describe().c_str());
    }
    timers[side] = std::move(timer).value();
  }
  std::filesystem::remove(cache);
  std::printf("\n%s, %s (%s cuBLASLt algorithms), graph µs:\n\n", name.c_str(),
              ab.title.c_str(), ab.same_algorithms ? "same" : "each its own");
  std::printf("| batch | %s | %s | %s / %s |\n|---:|---:|---:|---:|\n", ab.a_label.c_str(),
              ab.b_label.c_str(), ab.a_label.c_str(), ab.b_label.c_str());
  for (const std::int64_t batch : batches) {
    GpuForwardTimer* const order[] = {timers[1].get(), timers[0].get()};
    auto medians = AlternatingMedians(order, batch, seq);
    if (!medians.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), medians.status().ToString().c_str());
      return 1;
    }
    const double a_us = medians.value()[0], b_us = medians.value()[1];
    std::printf("| %ld | %.1f | %.1f | %.3f |\n", static_cast<long>(batch), a_us, b_us,
                a_us / b_us);
    std::fflush(stdout);
  }
  return 0;
}

namespace {

// Timers for the whole pass (off), the halves one after the other on one stream and the
// halves side by side on two (`always`, one model, so the same kernels), loaded through one
// algorithm cache so that all three run the same cuBLASLt algorithms. Empty after printing
// why a load failed.
std::vector<std::unique_ptr<GpuForwardTimer>> HalvesTimers(
    const std::string& name, std::shared_ptr<const ltserve::plan::Plan> plan,
    ltserve::ModelSpec spec, const std::optional<ltserve::TokenLayout>& tokens) {
  const std::filesystem::path cache = std::filesystem::temp_directory_path() /
                                      ("ltserve_halves_" + std::to_string(std::random_device{}()));
  spec.options.algo_cache_file = cache.string();
  std::vector<std::unique_ptr<GpuForwardTimer>> timers(3);
  for (const ltserve::OwnKernelMode mode : {ltserve::OwnKernelMode::kAlways, ltserve::OwnKernelMode::kOff}) {
    spec.options.two_stream_halves = mode;
    auto model = ltserve::gpu::LoadGpuModel(plan, spec, tokens);
    if (!model.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), model.status().ToString().c_str());
      std::filesystem::remove(cache);
      return {};
    }
    for (const bool one_stream : {false, true}) {
      if (mode == ltserve::OwnKernelMode::kOff && one_stream) continue;
      auto timer = GpuForwardTimer::Create(model.value(), one_stream);
      if (!timer.ok()) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), timer.status().ToString().c_str());
        std::filesystem::remove(cache);
        return {};
      }
      timers[mode == ltserve::OwnKernelMode::kOff ? 0 : one_stream ? 1 : 2] = std::move(timer).value();
    }
  }
  std::filesystem::remove(cache);
  return timers;
}

}  // namespace

int PrintHalvesApart(const std::string& name, std::shared_ptr<const ltserve::plan::Plan> plan,
                     ltserve::ModelSpec spec, const std::optional<ltserve::TokenLayout>& tokens,
                     std::span<const std::int64_t> batches, std::int64_t seq) {
  const auto timers = HalvesTimers(name, std::move(plan), std::move(spec), tokens);
  if (timers.empty()) return 1;
  std::printf("\n%s, two_stream_halves taken apart (always and off, same cuBLASLt algorithms), "
              "graph µs:\n\n", name.c_str());
  std::printf("| batch | whole | halves, one stream | halves, two streams | one stream / whole | "
              "two streams / one stream |\n|---:|---:|---:|---:|---:|---:|\n");
  for (const std::int64_t batch : batches) {
    GpuForwardTimer* const order[] = {timers[0].get(), timers[1].get(), timers[2].get()};
    auto medians = AlternatingMedians(order, batch, seq);
    if (!medians.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), medians.status().ToString().c_str());
      return 1;
    }
    const double whole = medians.value()[0], one = medians.value()[1], two = medians.value()[2];
    std::printf("| %ld | %.1f | %.1f | %.1f | %.3f | %.3f |\n", static_cast<long>(batch), whole, one,
                two, one / whole, two / one);
    std::fflush(stdout);
  }
  return 0;
}

int PrintHalvesSustained(const std::string& name, std::shared_ptr<const ltserve::plan::Plan> plan,
                         ltserve::ModelSpec spec, const std::optional<ltserve::TokenLayout>& tokens,
                         std::int64_t batch, std::int64_t seq, int rounds, double round_seconds) {
  const auto timers = HalvesTimers(name, std::move(plan), std::move(spec), tokens);
  if (timers.empty()) return 1;
  const std::vector<std::int32_t> lengths(static_cast<std::size_t>(batch), static_cast<std::int32_t>(seq));
  // Iterations a round from one pass's time: about round_seconds of back-to-back passes.
  auto probe = timers[0]->TimeTokenForward(lengths, 5);
  if (!probe.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), probe.status().ToString().c_str());
    return 1;
  }
  const int iterations = std::max(1, static_cast<int>(round_seconds * 1e6 / probe.value()));
  std::printf("\n%s, %ld sequences: the whole pass and two halves on two streams (always and off, "
              "same cuBLASLt algorithms) in turns of %d passes (about %.1f s) each, graph µs a pass:\n\n",
              name.c_str(), static_cast<long>(batch), iterations, round_seconds);
  std::printf("| round | first | whole | halves | halves / whole |\n|---:|---|---:|---:|---:|\n");
  std::vector<double> ratios;
  for (int r = 0; r < rounds; ++r) {
    const bool whole_first = r % 2 == 0;  // each schedule goes first every other round
    double us[2] = {0, 0};               // whole, halves
    for (const int t : whole_first ? std::array{0, 1} : std::array{1, 0}) {
      auto time = timers[t == 0 ? 0 : 2]->TimeTokenForward(lengths, iterations);
      if (!time.ok()) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), time.status().ToString().c_str());
        return 1;
      }
      us[t] = time.value();
    }
    ratios.push_back(us[1] / us[0]);
    std::printf("| %d | %s | %.1f | %.1f | %.3f |\n", r + 1, whole_first ? "whole" : "halves",
                us[0], us[1], us[1] / us[0]);
    std::fflush(stdout);
  }
  std::printf("\nmedian halves / whole over the rounds: %.3f\n", Median(ratios));
  return 0;
}

}  // namespace ltserve_bench
