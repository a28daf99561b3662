// DeviceState's load-time half: choosing every GEMM's cuBLASLt algorithm and kernel, and the
// runs of layers the layer-chain kernel takes over, by timing them on a state of the model's
// own (device_state.h says what each chooser decides).
#include "gpu/device_state.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "gpu/algo_cache.h"
#include "gpu/cuda_check.h"
#include "gpu/cutlass_gemm.h"
#include "gpu/tuning_keys.h"

namespace ltserve::gpu {
namespace {

// gemm_search wide searches from this many rows up; below, the heuristic's algorithm stays. At
// 1-4 rows the searched configurations timed faster alone but ran the MLP's pass 1-6 % slower
// in two runs on the H200, while from 16 rows up the pass gained (bench/RESULTS.md).
constexpr std::int64_t kWideSearchMinRows = 16;

// The fastest of `candidates`, each run by `run(candidate)` and timed with the L2 emptied first
// (TimeColdOnStream); a candidate that fails to run is left out, the first failure kept in
// `first_failure` for the load log. nullopt when none ran.
template <typename Config, typename Run>
std::optional<std::pair<Config, float>> FastestCold(const std::vector<Config>& candidates,
                                                    Run&& run, const DeviceBuffer& flush,
                                                    cudaStream_t stream,
                                                    std::string& first_failure) {
  std::optional<std::pair<Config, float>> best;
  for (const Config& candidate : candidates) {
    Result<float> ms = TimeColdOnStream([&] { return run(candidate); }, flush, stream);
    if (!ms.ok()) {
      if (first_failure.empty()) first_failure = ms.status().ToString();
      continue;
    }
    if (!best.has_value() || ms.value() < best->second) best.emplace(candidate, ms.value());
  }
  return best;
}

// A GEMM shape's cache key: a wide search's algorithm is kept apart from the heuristic's, so
// that a heuristic load never takes it.
std::string ShapeKey(const GpuModelOptions& options, const GemmShape& shape, GemmSearch search) {
  return shape.Key(options.precision, options.workspace_bytes) +
         (search == GemmSearch::kWide ? ",search=wide" : "");
}

std::string Fingerprint(int device) {
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, device) != cudaSuccess) return "unknown device";
  return std::string(properties.name) + " sm_" + std::to_string(properties.major) +
         std::to_string(properties.minor) + " cublasLt " + std::to_string(cublasLtGetVersion());
}

// The load log's account of the executor's own kernels: how many (step, bucket) pairs run the
// small-batch, split-K, staged-weights, GEMM + LayerNorm and streaming LayerNorm kernels, and
// at which row counts (for split-K per layer shape, each shape once however many layers share
// it).
std::vector<std::string> OwnKernelNotes(const GpuModel& model, const GemmTuning& tuning) {
  int small_batch = 0;
  int skinny = 0;
  int staged = 0;
  DistinctRows staged_rows;
  int cutlass = 0;
  DistinctRows cutlass_rows;
  int norm = 0;
  int norm_split = 0;  // of them, the split-K schedule with the LayerNorm tail
  DistinctRows norm_rows;
  std::vector<std::pair<std::string, DistinctRows>> skinny_rows;  // by shape, in first use
  for (std::size_t s = 0; s < tuning.steps.size(); ++s) {
    const auto* step = std::get_if<GemmStep>(&tuning.steps[s]);
    if (step == nullptr) continue;
    const std::string shape = std::to_string(step->k) + "->" + std::to_string(step->n);
    for (std::size_t b = 0; b < tuning.kernels[s].size(); ++b) {
      const GemmKernel::Kind kind = tuning.kernels[s][b].kind;
      small_batch += kind == GemmKernel::Kind::kSmallBatch ? 1 : 0;
      if (kind == GemmKernel::Kind::kNormGemm) {
        ++norm;
        norm_split += tuning.kernels[s][b].norm.split_k.has_value() ? 1 : 0;
        norm_rows.Add(model.StepRows(s, b));
      }
      if (kind == GemmKernel::Kind::kStaged) {
        ++staged;
        staged_rows.Add(model.StepRows(s, b));
      }
      if (kind == GemmKernel::Kind::kCutlass) {
        ++cutlass;
        cutlass_rows.Add(model.StepRows(s, b));
      }
      if (kind != GemmKernel::Kind::kSkinny) continue;
      ++skinny;
      auto entry = std::find_if(skinny_rows.begin(), skinny_rows.end(),
                                [&](const auto& e) { return e.first == shape; });
      if (entry == skinny_rows.end()) entry = skinny_rows.insert(skinny_rows.end(), {shape, {}});
      entry->second.Add(model.StepRows(s, b));
    }
  }
  std::vector<std::string> notes;
  if (small_batch > 0) {
    notes.push_back("small-batch kernel for " + std::to_string(small_batch) + " GEMM buckets");
  }
  if (skinny > 0) {
    std::string note = "split-K kernel for " + std::to_string(skinny) + " GEMM buckets (";
    for (std::size_t i = 0; i < skinny_rows.size(); ++i) {
      note += (i > 0 ? "; linear " : "linear ") + skinny_rows[i].first + " " +
              skinny_rows[i].second.Text();
    }
    notes.push_back(note + ")");
  }
  if (staged > 0) {
    notes.push_back("staged-weights kernel for " + std::to_string(staged) + " GEMM buckets (" +
                    staged_rows.Text() + ")");
  }
  if (model.options().cutlass_gemm != OwnKernelMode::kOff && !CutlassGemmAvailable()) {
    notes.push_back(
        "no CUTLASS kernel in this build (cutlass_gemm_kernel): cuBLASLt runs its GEMMs");
  }
  if (cutlass > 0) {
    notes.push_back("CUTLASS kernel for " + std::to_string(cutlass) + " GEMM buckets (" +
                    cutlass_rows.Text() + ")");
  }
  if (norm > 0) {
    notes.push_back("GEMM + LayerNorm kernel for " + std::to_string(norm) + " GEMM buckets (" +
                    norm_rows.Text() + "; " + std::to_string(norm_split) +
                    " of them split-K with a LayerNorm tail)");
  }
  int streaming = 0;
  DistinctRows streaming_rows;
  for (std::size_t s = 0; s < tuning.layer_norm_schedules.size(); ++s) {
    for (std::size_t b = 0; b < tuning.layer_norm_schedules[s].size(); ++b) {
      if (tuning.layer_norm_schedules[s][b] != LayerNormSchedule::kStreaming) continue;
      ++streaming;
      streaming_rows.Add(model.StepRows(s, b));
    }
  }
  if (streaming > 0) {
    notes.push_back("streaming LayerNorm for " + std::to_string(streaming) +
                    " LayerNorm buckets (" + streaming_rows.Text() + ")");
  }
  return notes;
}

// The cache key of two_stream_halves' choice at `bucket` (halves of `half`): the precision,
// both row counts, the mode, and a digest (FNV-1a, 64 bits) of every step with the GEMM
// kernels chosen for it at both buckets: what decides the bits either way, so a file shared
// by several models, or kept across a change of kernels, never answers for another pass.
// Options that change timing but not bits (programmatic launch, LayerNorm's schedule, graphs)
// are left out: loads that differ only in them share the choice and so give the same bits.
std::string HalvesKey(const GpuModel& model, std::size_t bucket, std::size_t half) {
  const std::string text = StepsText(model, [&](std::size_t s) {
    return model.Kernel(s, bucket).ToText() + "," + model.Kernel(s, half).ToText();
  });
  const GpuModelOptions& options = model.options();
  return std::string("halves,") + PrecisionName(options.precision) +
         ",rows=" + std::to_string(model.buckets()[bucket]) +
         ",half=" + std::to_string(model.buckets()[half]) +
         (options.two_stream_halves == OwnKernelMode::kAlways ? ",always" : ",auto") +
         (options.gemm_search == GemmSearch::kWide ? ",search=wide" : "") +
         ",steps=" + Digest(text);
}

}  // namespace

// The algorithm for one GEMM step at one bucket, as `search` finds it: from the cache when it
// still applies, else timed; NOT_FOUND when cuBLASLt has none for this epilogue.
Result<cublasLtMatmulAlgo_t> DeviceState::ChooseAlgo(const GpuModel& model, const GemmStep& step,
                                                     std::int64_t rows, GemmSearch search,
                                                     AlgoCache& cache, int* from_cache) {
  const GpuModelOptions& options = model.options();
  const GemmShape shape = step.Shape(rows);
  LTSERVE_ASSIGN_OR_RETURN(Gemm gemm, Gemm::Create(options.precision, shape));
  const std::string key = ShapeKey(options, shape, search);
  const cublasLtMatmulAlgo_t* cached = cache.Find(key);
  if (cached != nullptr && gemm.Supports(handle_.get(), *cached, options.workspace_bytes)) {
    ++*from_cache;
    return *cached;
  }
  Result<cublasLtMatmulAlgo_t> algo = NotFound("");
  if (search == GemmSearch::kWide) {
    LTSERVE_RETURN_IF_ERROR(EnsureFlush());
    // Row counts between powers of two (an encoder's token buckets, every 512 rows) time the
    // finalists of the last two searches of the same widths instead of enumerating again:
    // enumerating and pre-screening is most of a search's time, longest at large row counts,
    // where most buckets are (BERT-base's wide load: 105 s enumerating at every bucket, 35-38 s
    // at powers of two only).
    GemmShape widths = shape;
    widths.m = 0;
    std::vector<std::vector<cublasLtMatmulAlgo_t>>& nearby =
        search_finalists_[widths.Key(options.precision, options.workspace_bytes)];
    std::vector<cublasLtMatmulAlgo_t> known;
    if ((rows & (rows - 1)) != 0) {
      for (const auto& finalists : nearby) known.insert(known.end(), finalists.begin(), finalists.end());
    }
    const auto started = std::chrono::steady_clock::now();
    Result<SearchedAlgo> searched =
        SearchGemm(gemm, handle_.get(), Operands(model, step), workspace_.data(),
                   options.workspace_bytes, options.algo_candidates, known, flush_, stream());
    search_tally_.seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (searched.ok()) {
      ++search_tally_.shapes;
      search_tally_.enumerated += searched.value().configurations > 0 ? 1 : 0;
      search_tally_.configurations += searched.value().configurations;
      search_tally_.beyond_heuristic += searched.value().beyond_heuristic ? 1 : 0;
      if (!searched.value().finalists.empty()) {
        nearby.push_back(std::move(searched.value().finalists));
        if (nearby.size() > 2) nearby.erase(nearby.begin());
      }
      algo = searched.value().algo;
    } else {
      algo = searched.status();
    }
  } else {
    algo = TuneGemm(gemm, handle_.get(), Operands(model, step), workspace_.data(),
                    options.workspace_bytes, options.algo_candidates, stream());
  }
  if (!algo.ok()) {
    if (algo.status().code() == StatusCode::kNotFound) return algo.status();
    return algo.status().WithContext("choosing a cuBLASLt algorithm for " + key + ": ");
  }
  cache.Put(key, algo.value());
  return algo;
}

// The kernel for one fused GEMM step at `rows`: cuBLASLt with `algo`, or one of the executor's
// own kernels where the options allow one and it times clearly faster, each timed with the L2
// cache emptied before every run (TimeColdOnStream says why). kAlways takes an own kernel
// wherever one applies; an own kernel that fails to launch is left out, not fatal. The choice
// is kept in `cache` under the shape's key: a cached choice the options still allow is taken
// without timing (repeated layers, and restarts with an algorithm cache file). `alternative`
// is set to the runner-up of the other side, for ChoosePassKernels: the fastest own kernel
// that ran where cuBLASLt won, cuBLASLt where an own kernel won; left empty where there is
// none (nothing competed, or an `always` mode).
Result<GemmKernel> DeviceState::ChooseKernel(const GemmStep& step, std::int64_t rows,
                                             const cublasLtMatmulAlgo_t& algo, AlgoCache& cache,
                                             int* from_cache,
                                             std::optional<GemmKernel>* alternative) {
  const GpuModelOptions& options = model_->options();
  const ElemType storage = StorageType(options.precision);
  GemmKernel cublaslt;
  alternative->reset();
  if (!step.fused) return cublaslt;
  const bool small_batch = options.small_batch != OwnKernelMode::kOff &&
                           SmallBatchLinearSupports(storage, rows, step.k);
  if (small_batch && options.small_batch == OwnKernelMode::kAlways) {
    return GemmKernel::SmallBatch();
  }
  std::vector<GemmKernel> challengers;
  if (small_batch && rows <= kSmallBatchAutoMaxRows) {
    challengers.push_back(GemmKernel::SmallBatch());
  }
  const bool skinny_runs = options.skinny_gemm != OwnKernelMode::kOff &&
                          SkinnyGemmSupports(sm_major_, storage, rows, step.k);
  const bool staged_runs = options.staged_gemm != OwnKernelMode::kOff &&
                           StagedGemmSupports(sm_major_, storage, rows, step.k);
  // `always` for one of the tensor-core kernels means that kernel wherever it runs: cuBLASLt,
  // and the other one left on `auto`, do not compete then.
  const bool skinny_always = skinny_runs && options.skinny_gemm == OwnKernelMode::kAlways;
  const bool staged_always = staged_runs && options.staged_gemm == OwnKernelMode::kAlways;
  const plan::Activation act = step.Effective(options.gelu);
  const bool cutlass_runs = options.cutlass_gemm != OwnKernelMode::kOff &&
                            CutlassGemmSupports(sm_major_, storage, step.n, step.k, act);
  const bool cutlass_always = cutlass_runs && options.cutlass_gemm == OwnKernelMode::kAlways;
  const bool replace = skinny_always || staged_always || cutlass_always;
  const bool skinny = skinny_runs && (!replace || skinny_always);
  // On `auto` the staged-weights kernel competes only where whole passes measured it faster.
  const bool staged_offered =
      staged_runs && (staged_always || (!replace && rows <= kStagedGemmAutoMaxRows));
  if (skinny) {
    for (const SkinnyGemmConfig& config : SkinnyGemmCandidates(rows, step.n, step.k)) {
      challengers.push_back(GemmKernel::Skinny(config));
    }
  }
  const std::vector<StagedGemmConfig> staged_configs =
      staged_offered ? StagedGemmCandidates(rows, step.n, step.k) : std::vector<StagedGemmConfig>{};
  const bool staged = !staged_configs.empty();
  for (const StagedGemmConfig& config : staged_configs) {
    challengers.push_back(GemmKernel::Staged(config));
  }
  const bool cutlass =
      cutlass_runs && (cutlass_always || (!replace && rows >= kCutlassGemmAutoMinRows));
  if (cutlass) {
    for (const CutlassGemmConfig& config : CutlassGemmCandidates(rows, step.n, step.k)) {
      challengers.push_back(GemmKernel::Cutlass(config));
    }
  }
  if (challengers.empty()) return cublaslt;
  // What the choice depends on: the GEMM's shape, epilogue and what runs after it, and which
  // kernels the options let compete (a choice made with the split-K kernel off must not
  // keep it off once it is allowed). Without the staged-weights kernel the words are those
  // of the files written before it existed.
  std::string competing =
      !staged ? (skinny ? (replace ? "skinny-only" : "skinny") : "cublaslt")
              : std::string(replace ? "" : "cublaslt+") + (skinny ? "skinny+" : "") + "staged";
  if (cutlass) {
    competing = cutlass_always && !skinny && !staged ? "cutlass-only" : competing + "+cutlass";
  }
  const std::string key =
      "own," + ShapeKey(options, step.Shape(rows), GemmSearch::kHeuristic) +
      ",then=" + std::to_string(static_cast<int>(step.after)) + ",competing=" +
      (challengers.front().kind == GemmKernel::Kind::kSmallBatch ? "small-batch+" : "") +
      competing;
  const auto allowed = [&](const GemmKernel& kernel) {
    return (kernel == cublaslt && !replace) ||
           std::find(challengers.begin(), challengers.end(), kernel) != challengers.end();
  };
  // The runner-up is kept under a key of its own; a file written before it existed has
  // none, and then the pass has nothing to flip this step to.
  const std::string alternative_key = key + ",runner-up";
  if (const GemmKernel* cached = cache.FindKernel(key); cached != nullptr && allowed(*cached)) {
    ++*from_cache;
    if (const GemmKernel* runner_up = cache.FindKernel(alternative_key);
        runner_up != nullptr && allowed(*runner_up) && !(*runner_up == *cached)) {
      *alternative = *runner_up;
    }
    return *cached;
  }
  LTSERVE_RETURN_IF_ERROR(EnsureFlush());
  GemmKernel best = cublaslt;
  float best_ms = std::numeric_limits<float>::infinity();
  std::optional<GemmKernel> fastest_own;
  float fastest_own_ms = std::numeric_limits<float>::infinity();
  if (!replace) {
    LTSERVE_ASSIGN_OR_RETURN(Gemm gemm, Gemm::Create(options.precision, step.Shape(rows)));
    LTSERVE_ASSIGN_OR_RETURN(best_ms, TimeColdOnStream([&] {
      return RunCublasLt(step, rows, MainLane(), [&](const GemmOperands& operands) {
        return gemm.RunWith(algo, handle_.get(), operands, workspace_.data(),
                            workspace_.bytes(), stream());
      });
    }, flush_, stream()));
  }
  for (const GemmKernel& challenger : challengers) {
    Result<float> ms = TimeColdOnStream([&] { return RunOwnKernel(challenger, step, rows, MainLane()); },
                                        flush_, stream());
    if (!ms.ok()) {
      if (own_kernel_failure_.empty()) own_kernel_failure_ = ms.status().ToString();
      continue;
    }
    if (ms.value() < fastest_own_ms) {
      fastest_own = challenger;
      fastest_own_ms = ms.value();
    }
    const bool wins = best.kind == GemmKernel::Kind::kCublasLt && !replace
                          ? ClearlyFaster(ms.value(), best_ms)
                          : ms.value() < best_ms;
    if (wins) {
      best = challenger;
      best_ms = ms.value();
    }
  }
  cache.PutKernel(key, best);
  if (!replace) {
    if (best == cublaslt) {
      *alternative = fastest_own;
    } else {
      *alternative = cublaslt;
    }
    if (alternative->has_value()) cache.PutKernel(alternative_key, **alternative);
  }
  return best;
}

Status DeviceState::EnsureFlush() {
  if (flush_.data() != nullptr) return Status::Ok();
  int l2_bytes = 0;
  LTSERVE_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, model_->options().gpu_device));
  LTSERVE_ASSIGN_OR_RETURN(
      flush_, DeviceBuffer::Create(2 * static_cast<std::size_t>(std::max(l2_bytes, 1 << 20)),
                                   "L2 flush while timing GEMM kernels"));
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(flush_.data(), 0, flush_.bytes(), stream()));
  return Status::Ok();
}

// Per bucket of up to kChainMaxRows rows and chainable run: the run's steps with the kernels
// just chosen for them, and the layer-chain kernel in each configuration, each timed with the
// L2 emptied first (a pass's weights are not in the L2 when it starts). kAlways takes the
// fastest configuration wherever the kernel applies; kAuto only one clearly faster than the
// steps. The choice is cached under the layers' shapes, the rows and the steps' own kernels.
Status DeviceState::ChooseChains(GemmTuning& tuning, AlgoCache& cache, int* from_cache) {
  const GpuModelOptions& options = model_->options();
  const ElemType storage = StorageType(options.precision);
  const std::size_t buckets = model_->buckets().size();
  tuning.chains.assign(buckets, {});
  if (options.layer_chain == OwnKernelMode::kOff || chain_scratch_.data() == nullptr) {
    return Status::Ok();
  }
  LTSERVE_RETURN_IF_ERROR(EnsureFlush());
  const bool always = options.layer_chain == OwnKernelMode::kAlways;
  std::string rows_note;
  for (const auto& [first, last] : ChainableRuns(tuning.steps)) {
    std::array<ChainLayer, kChainMaxLayers> layers{};
    if (!ChainLayers(tuning.steps, first, last, layers)) continue;
    std::string taken;
    for (std::size_t b = 0; b < buckets; ++b) {
      const std::int64_t rows = model_->StepRows(first, b);
      if (!ChainGemmSupports(sm_major_, storage, rows, layers.data(), last - first + 1)) continue;
      std::string key = "chain," + std::string(PrecisionName(options.precision)) + ",rows=" +
                        std::to_string(rows) + (always ? ",always" : ",auto");
      for (std::size_t s = first; s <= last; ++s) {
        const auto& step = std::get<GemmStep>(tuning.steps[s]);
        key += ";" + std::to_string(step.k) + "->" + std::to_string(step.n) + ",act=" +
               std::to_string(static_cast<int>(step.Effective(options.gelu))) +
               (step.bias_offset != kNoOffset ? ",bias" : "") +
               (step.residual != plan::kNoValue ? ",residual" : "") + ",";
        std::string kernel = tuning.kernels[s][b].ToText();
        std::replace(kernel.begin(), kernel.end(), ' ', '_');  // a key is one word in the file
        key += kernel;
      }
      std::optional<ChainRun> best;
      // A cached configuration this bucket's rows are not offered (a file from a build with
      // other candidates) would fail to launch: such an entry is timed again.
      const GemmKernel* cached = cache.FindKernel(key);
      if (cached != nullptr && cached->kind == GemmKernel::Kind::kChain) {
        const std::vector<ChainGemmConfig> offered = ChainGemmCandidates(rows);
        if (std::find(offered.begin(), offered.end(), cached->chain) == offered.end()) {
          cached = nullptr;
        }
      }
      if (cached != nullptr) {
        ++*from_cache;
        if (cached->kind == GemmKernel::Kind::kChain) best = ChainRun{first, last, cached->chain};
      } else {
        LTSERVE_ASSIGN_OR_RETURN(best, TimeChain(tuning, first, last, b, always));
        cache.PutKernel(key, best.has_value() ? GemmKernel::Chain(best->config)
                                              : GemmKernel{});
      }
      if (!best.has_value()) continue;
      tuning.chains[b].push_back(*best);
      taken += (taken.empty() ? " at " : ", ") + std::to_string(rows) + " rows (" +
               best->config.Describe() + ")";
    }
    if (!taken.empty()) {
      rows_note += (rows_note.empty() ? "" : "; ") + std::string("steps ") + std::to_string(first) +
                   "-" + std::to_string(last) + taken;
    }
  }
  if (!rows_note.empty()) tuning.notes.push_back("layer-chain kernel for " + rows_note);
  return Status::Ok();
}

// Per GEMM + LayerNorm pair and bucket the kernel takes (and no layer chain covers): the GEMM
// with its chosen kernel followed by the LayerNorm kernel, against every configuration of the
// GEMM + LayerNorm kernel, each timed with the L2 emptied first.
Status DeviceState::ChooseNormGemms(GemmTuning& tuning, AlgoCache& cache, int* from_cache) {
  const GpuModelOptions& options = model_->options();
  if (options.gemm_layernorm == OwnKernelMode::kOff) return Status::Ok();
  const ElemType storage = StorageType(options.precision);
  const bool always = options.gemm_layernorm == OwnKernelMode::kAlways;
  const plan::Plan& plan = model_->plan();
  for (const std::size_t s : LayerNormFusableGemms(tuning.steps, plan.output())) {
    const auto& gemm = std::get<GemmStep>(tuning.steps[s]);
    const auto& norm = std::get<LayerNormStep>(tuning.steps[s + 1]);
    for (std::size_t b = 0; b < model_->buckets().size(); ++b) {
      const std::int64_t rows = model_->StepRows(s, b);
      if (!NormGemmSupports(sm_major_, storage, rows, gemm.n, gemm.k)) continue;
      const std::vector<ChainRun>& chains = tuning.chains[b];  // ChooseChains sized it
      if (std::any_of(chains.begin(), chains.end(), [s](const ChainRun& run) {
            return run.first_step <= s && s <= run.last_step;
          })) {
        continue;
      }
      // "split-k-tiles": the candidates include the split-K schedule at every X tile up to the
      // rows', so an answer cached before they did is timed again rather than taken.
      std::string alone_text = tuning.kernels[s][b].ToText();
      std::replace(alone_text.begin(), alone_text.end(), ' ', '_');  // a key is one word in the file
      const std::string key = "norm," + std::string(PrecisionName(options.precision)) +
                              ",rows=" + std::to_string(rows) + "," + std::to_string(gemm.k) +
                              "->" + std::to_string(gemm.n) +
                              (gemm.bias_offset != kNoOffset ? ",bias" : "") +
                              (gemm.residual != plan::kNoValue ? ",residual" : "") +
                              (norm.residual != plan::kNoValue ? ",norm-residual" : "") +
                              ",split-k-tiles,then=" +
                              alone_text + (always ? ",always" : ",auto");
      const std::vector<NormGemmConfig> candidates = NormGemmCandidates(rows, gemm.n, gemm.k);
      // A cached configuration this build no longer offers is timed again, not run.
      const auto offered = [&](const GemmKernel& kernel) {
        return kernel.kind != GemmKernel::Kind::kNormGemm ||
               std::find(candidates.begin(), candidates.end(), kernel.norm) != candidates.end();
      };
      if (const GemmKernel* cached = cache.FindKernel(key); cached != nullptr && offered(*cached)) {
        ++*from_cache;
        if (cached->kind == GemmKernel::Kind::kNormGemm) tuning.kernels[s][b] = *cached;
        continue;
      }
      LTSERVE_RETURN_IF_ERROR(EnsureFlush());
      float alone_ms = std::numeric_limits<float>::infinity();
      if (!always) {
        LTSERVE_ASSIGN_OR_RETURN(Gemm cublaslt, Gemm::Create(options.precision, gemm.Shape(rows)));
        LTSERVE_ASSIGN_OR_RETURN(alone_ms, TimeColdOnStream([&]() -> Status {
          LTSERVE_RETURN_IF_ERROR(RunTunedStep(tuning, s, b, cublaslt, rows));
          LTSERVE_CUDA_RETURN_IF_ERROR(LaunchLayerNorm(
              Value(gemm.output),
              norm.residual == plan::kNoValue ? nullptr : Value(norm.residual),
              static_cast<const float*>(model_->Weight(norm.gamma_offset)),
              static_cast<const float*>(model_->Weight(norm.beta_offset)), Value(norm.output), rows,
              gemm.n, norm.eps, storage, programmatic_, stream()));
          return Status::Ok();
        }, flush_, stream()));
      }
      const auto best = FastestCold(
          candidates,
          [&](const NormGemmConfig& config) {
            return RunNormGemm(config, s, rows, programmatic_);
          },
          flush_, stream(), own_kernel_failure_);
      const bool wins = best.has_value() && (always || ClearlyFaster(best->second, alone_ms));
      cache.PutKernel(key, wins ? GemmKernel::NormGemm(best->first) : GemmKernel{});
      if (wins) tuning.kernels[s][b] = GemmKernel::NormGemm(best->first);
    }
  }
  return Status::Ok();
}

// The run's steps with their chosen kernels against every configuration of the layer-chain
// kernel at bucket `b`, each timed with the L2 emptied; the fastest configuration if it is
// clearly faster than the steps (kAlways: if it runs at all), else nullopt.
Result<std::optional<ChainRun>> DeviceState::TimeChain(const GemmTuning& tuning, std::size_t first,
                                                       std::size_t last, std::size_t b,
                                                       bool always) {
  const GpuModelOptions& options = model_->options();
  const std::int64_t rows = model_->StepRows(first, b);
  float steps_ms = std::numeric_limits<float>::infinity();
  if (!always) {
    std::vector<Gemm> gemms;  // the cuBLASLt steps' descriptors, made before timing
    for (std::size_t s = first; s <= last; ++s) {
      const auto& step = std::get<GemmStep>(tuning.steps[s]);
      LTSERVE_ASSIGN_OR_RETURN(Gemm gemm, Gemm::Create(options.precision, step.Shape(rows)));
      gemms.push_back(std::move(gemm));
    }
    LTSERVE_ASSIGN_OR_RETURN(steps_ms, TimeColdOnStream([&]() -> Status {
      for (std::size_t s = first; s <= last; ++s) {
        LTSERVE_RETURN_IF_ERROR(RunTunedStep(tuning, s, b, gemms[s - first], rows));
      }
      return Status::Ok();
    }, flush_, stream()));
  }
  const auto best = FastestCold(
      ChainGemmCandidates(rows),
      [&](const ChainGemmConfig& config) {
        return RunChain(tuning.steps, ChainRun{first, last, config}, rows, programmatic_);
      },
      flush_, stream(), own_kernel_failure_);
  if (!best.has_value() || !(always || ClearlyFaster(best->second, steps_ms))) {
    return std::optional<ChainRun>();
  }
  return std::optional<ChainRun>(ChainRun{first, last, best->first});
}

Status DeviceState::RunTunedStep(const GemmTuning& tuning, std::size_t s, std::size_t b,
                                 const Gemm& gemm, std::int64_t rows) {
  const auto& step = std::get<GemmStep>(tuning.steps[s]);
  const GemmKernel& kernel = tuning.kernels[s][b];
  if (kernel.kind != GemmKernel::Kind::kCublasLt) return RunOwnKernel(kernel, step, rows, MainLane());
  return RunCublasLt(step, rows, MainLane(), [&](const GemmOperands& operands) {
    return gemm.RunWith(tuning.algos[s][b], handle_.get(), operands, workspace_.data(),
                        workspace_.bytes(), stream());
  });
}

// The two schedules are timed back to back (TimeOnStream), not with the L2 emptied: a
// LayerNorm reads what the kernel just before it wrote, in the L2 as far as it fits, and on
// the H200 the cold ranking at 128 and 1,024 rows is the reverse of the warm one
// (bench/RESULTS.md). Both give the same bits, so the choice is not kept in the cache file: a
// restart may choose differently without changing a result.
Status DeviceState::ChooseLayerNormSchedules(GemmTuning& tuning) {
  const GpuModelOptions& options = model_->options();
  tuning.layer_norm_schedules.assign(tuning.steps.size(), {});
  if (options.streaming_layernorm == OwnKernelMode::kOff) return Status::Ok();
  const ElemType storage = StorageType(options.precision);
  const bool always = options.streaming_layernorm == OwnKernelMode::kAlways;
  const plan::Plan& plan = model_->plan();
  const std::size_t buckets = model_->buckets().size();
  std::map<std::string, LayerNormSchedule> timed;  // an encoder's layers repeat their shapes
  for (std::size_t s = 0; s < tuning.steps.size(); ++s) {
    const auto* norm = std::get_if<LayerNormStep>(&tuning.steps[s]);
    if (norm == nullptr) continue;
    const std::int64_t width = plan.values()[norm->output].width;
    if (!StreamingLayerNormSupports(storage, width)) continue;
    tuning.layer_norm_schedules[s].assign(buckets, LayerNormSchedule::kRowPerWarp);
    for (std::size_t b = 0; b < buckets; ++b) {
      if (s > 0 && tuning.kernels[s - 1][b].kind == GemmKernel::Kind::kNormGemm) continue;
      const std::int64_t rows = model_->StepRows(s, b);
      const auto launch = [&](LayerNormSchedule schedule) -> Status {
        LTSERVE_CUDA_RETURN_IF_ERROR(LaunchLayerNorm(
            Value(norm->input), norm->residual == plan::kNoValue ? nullptr : Value(norm->residual),
            static_cast<const float*>(model_->Weight(norm->gamma_offset)),
            static_cast<const float*>(model_->Weight(norm->beta_offset)), Value(norm->output),
            rows, width, norm->eps, storage, programmatic_, stream(), schedule));
        return Status::Ok();
      };
      if (always) {
        // Run once, so that a launch error is a load error rather than a request's.
        LTSERVE_RETURN_IF_ERROR(launch(LayerNormSchedule::kStreaming));
        tuning.layer_norm_schedules[s][b] = LayerNormSchedule::kStreaming;
        continue;
      }
      const std::string key = std::to_string(rows) + "x" + std::to_string(width) +
                              (norm->residual == plan::kNoValue ? "" : "+residual");
      auto choice = timed.find(key);
      if (choice == timed.end()) {
        LTSERVE_ASSIGN_OR_RETURN(
            const float row_per_warp_ms,
            TimeOnStream([&] { return launch(LayerNormSchedule::kRowPerWarp); }, stream()));
        LTSERVE_ASSIGN_OR_RETURN(
            const float streaming_ms,
            TimeOnStream([&] { return launch(LayerNormSchedule::kStreaming); }, stream()));
        choice = timed
                     .emplace(key, ClearlyFaster(streaming_ms, row_per_warp_ms)
                                       ? LayerNormSchedule::kStreaming
                                       : LayerNormSchedule::kRowPerWarp)
                     .first;
      }
      tuning.layer_norm_schedules[s][b] = choice->second;
    }
  }
  return Status::Ok();
}

// Whole passes, back to back (TimeOnStream): what the halves change is how one kernel's tail
// meets the next kernels, which no single step's timing shows. Attention needs sequences to
// read; any split of the rows serves, so sequences of up to 128 tokens (fewer and longer
// where a pooled plan holds fewer sequences). The choice changes which algorithms compute a
// row (the half bucket's), so like a kernel choice it is kept in the cache file, under a key
// naming the bucket and a digest of every step and of the kernels chosen at both buckets: a
// restart with the same file runs the same schedule, bit for bit.
Status DeviceState::ChooseHalves(std::shared_ptr<const GpuModel> tuned, GemmTuning& tuning,
                                 AlgoCache& cache, int* from_cache) {
  const GpuModelOptions& options = tuned->options();
  const std::size_t buckets = tuned->buckets().size();
  tuning.half_buckets.assign(buckets, kNoHalf);
  if (options.two_stream_halves == OwnKernelMode::kOff) return Status::Ok();
  std::vector<std::size_t> candidates(buckets, kNoHalf);
  bool any = false;
  for (std::size_t b = 0; b < buckets; ++b) {
    candidates[b] = tuned->HalfBucketCandidate(b);
    any = any || candidates[b] != kNoHalf;
  }
  if (!any) return Status::Ok();
  model_ = std::move(tuned);
  LTSERVE_RETURN_IF_ERROR(CreateGemms());  // the tuned steps' descriptors and algorithms
  LTSERVE_RETURN_IF_ERROR(EnsureSideLane());
  const bool always = options.two_stream_halves == OwnKernelMode::kAlways;
  DistinctRows chosen;
  int count = 0;
  // "<rows> rows <ratio>" of every bucket timed here: the choice sits on a few percent, and the load
  // log is where an operator sees why a bucket runs whole.
  std::string timed;
  for (std::size_t b = 0; b < buckets; ++b) {
    if (candidates[b] == kNoHalf) continue;
    const std::int64_t rows = model_->buckets()[b];
    const std::string key = HalvesKey(*model_, b, candidates[b]);
    if (const std::string* cached = cache.FindChoice(key); cached != nullptr) {
      ++*from_cache;
      if (*cached == "halves") {
        tuning.half_buckets[b] = candidates[b];
        ++count;
        chosen.Add(rows);
      }
      continue;
    }
    LTSERVE_RETURN_IF_ERROR(SetTimingSequences(rows));
    const auto pass = [&](std::size_t half) { return RunStepsSplit(b, half, {}); };
    bool halves = always;
    if (always) {
      // Run once, so that a launch error is a load error rather than a request's.
      LTSERVE_RETURN_IF_ERROR(pass(candidates[b]));
    } else {
      LTSERVE_ASSIGN_OR_RETURN(const float whole_ms,
                               TimeOnStream([&] { return pass(kNoHalf); }, stream()));
      LTSERVE_ASSIGN_OR_RETURN(const float halves_ms,
                               TimeOnStream([&] { return pass(candidates[b]); }, stream()));
      halves = ClearlyFaster(halves_ms, whole_ms);
      char ratio[32];
      std::snprintf(ratio, sizeof(ratio), "%s%lld rows %.3f", timed.empty() ? "" : ", ",
                    static_cast<long long>(rows), static_cast<double>(halves_ms / whole_ms));
      timed += ratio;
    }
    cache.PutChoice(key, halves ? "halves" : "whole");
    if (!halves) continue;
    tuning.half_buckets[b] = candidates[b];
    ++count;
    chosen.Add(rows);
  }
  LTSERVE_RETURN_IF_ERROR(SetSequences({}));
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
  if (count > 0 || !timed.empty()) {
    tuning.notes.push_back("two-stream halves for " + std::to_string(count) + " buckets (" +
                           (count > 0 ? chosen.Text() : std::string("none")) +
                           (timed.empty() ? "" : "; halves / whole as timed: " + timed) +
                           ")");
  }
  return Status::Ok();
}

Result<std::shared_ptr<const GpuModel>> DeviceState::Tune(std::shared_ptr<const GpuModel> model) {
  if (model == nullptr || model->tuned()) return InvalidArgument("Tune takes an untuned model");
  const GpuModelOptions& options = model->options();
  AlgoCache cache(Fingerprint(options.gpu_device));
  if (!options.algo_cache_file.empty()) LTSERVE_RETURN_IF_ERROR(cache.Load(options.algo_cache_file));
  const std::size_t cached_before = cache.size();
  // Buffers of instance size, so candidates are timed on the real shapes and alignments, and
  // on random values: zeros run faster than real data and would skew the ranking.
  LTSERVE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceState> state, Create(model));
  const ElemType storage = StorageType(options.precision);
  for (std::size_t v = 0; v < state->values_.size(); ++v) {
    LTSERVE_CUDA_RETURN_IF_ERROR(LaunchFillRandom(
        state->values_[v].data(), storage, state->values_[v].bytes() / ElemSize(storage),
        static_cast<std::uint32_t>(v + 1), state->stream()));
  }
  const std::size_t buckets = model->buckets().size();
  GemmTuning tuning;
  tuning.steps = model->steps();
  tuning.algos.assign(tuning.steps.size(), {});
  tuning.kernels.assign(tuning.steps.size(), std::vector<GemmKernel>(buckets));
  int from_cache = 0;
  int kernels_from_cache = 0;
  // [step][bucket]: each own-kernel choice's runner-up of the other side, for ChoosePassKernels.
  std::vector<std::vector<std::optional<GemmKernel>>> runner_ups(
      tuning.steps.size(), std::vector<std::optional<GemmKernel>>(buckets));
  const bool wide = options.gemm_search == GemmSearch::kWide;
  for (std::size_t s = 0; s < tuning.steps.size(); ++s) {
    auto* step = std::get_if<GemmStep>(&tuning.steps[s]);
    if (step == nullptr) continue;
    for (std::size_t b = 0; b < buckets; ++b) {
      const std::int64_t rows = model->StepRows(s, b);
      // Whether one of the executor's own kernels runs the step is decided against the
      // heuristic's algorithm in either mode: with the wide search's, the own kernels lost at
      // 1-16 rows on the H200 and the MLP's pass then ran up to 20 % slower (bench/RESULTS.md):
      // the kernel-by-kernel timing with the L2 emptied does not see the overlap programmatic
      // launch gives the own kernels in a pass. The search then only replaces the algorithm
      // of the steps that run cuBLASLt.
      int heuristic_from_cache = 0;
      Result<cublasLtMatmulAlgo_t> algo = state->ChooseAlgo(
          *model, *step, rows, GemmSearch::kHeuristic, cache,
          wide ? &heuristic_from_cache : &from_cache);
      if (!algo.ok() && algo.status().code() == StatusCode::kNotFound && step->fused) {
        tuning.notes.push_back("linear " + std::to_string(step->k) + "->" +
                               std::to_string(step->n) + " (plan op " + std::to_string(s) +
                               "): cuBLASLt has no fused algorithm at " +
                               std::to_string(rows) +
                               " rows; running matmul + separate bias/activation kernel");
        step->fused = false;
        ChooseEpilogue(*step, options.gelu);
        tuning.algos[s].clear();
        tuning.kernels[s].assign(buckets, GemmKernel{});
        runner_ups[s].assign(buckets, std::nullopt);
        b = static_cast<std::size_t>(-1);  // every bucket again, unfused (the loop's ++b wraps)
        continue;
      }
      if (!algo.ok()) return algo.status();
      LTSERVE_ASSIGN_OR_RETURN(
          tuning.kernels[s][b],
          state->ChooseKernel(*step, rows, algo.value(), cache, &kernels_from_cache,
                              &runner_ups[s][b]));
      if (wide && rows >= kWideSearchMinRows &&
          tuning.kernels[s][b].kind == GemmKernel::Kind::kCublasLt) {
        LTSERVE_ASSIGN_OR_RETURN(
            algo, state->ChooseAlgo(*model, *step, rows, GemmSearch::kWide, cache, &from_cache));
      }
      tuning.algos[s].push_back(algo.value());
    }
  }
  LTSERVE_RETURN_IF_ERROR(state->ChooseChains(tuning, cache, &kernels_from_cache));
  LTSERVE_RETURN_IF_ERROR(state->ChooseNormGemms(tuning, cache, &kernels_from_cache));
  LTSERVE_RETURN_IF_ERROR(state->ChooseLayerNormSchedules(tuning));
  LTSERVE_RETURN_IF_ERROR(
      state->ChoosePassKernels(model, tuning, runner_ups, cache, &kernels_from_cache));
  if (from_cache + kernels_from_cache > 0) {
    // Repeated shapes (the layers of an encoder) hit the cache too, file or not.
    tuning.notes.push_back(std::to_string(from_cache) + " GEMM algorithms " +
                           (kernels_from_cache > 0
                                ? "and " + std::to_string(kernels_from_cache) + " kernel choices "
                                : std::string()) +
                           "from the cache" +
                           (options.algo_cache_file.empty() ? std::string(" (shapes timed earlier in this load)")
                                                            : " (" + options.algo_cache_file + ")"));
  }
  if (const SearchTally& tally = state->search_tally_; tally.shapes > 0) {
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.1f", tally.seconds);
    tuning.notes.push_back(
        "wide cuBLASLt search: " + std::to_string(tally.shapes) + " GEMM shapes (" +
        std::to_string(tally.enumerated) + " enumerated, " +
        std::to_string(tally.enumerated > 0 ? tally.configurations / tally.enumerated : 0) +
        " configurations each on average; the rest timed nearby row counts' finalists), " +
        std::to_string(tally.beyond_heuristic) + " beyond the heuristic's candidates, " +
        seconds + " s");
  }
  for (std::string& note : OwnKernelNotes(*model, tuning)) tuning.notes.push_back(std::move(note));
  if (!state->own_kernel_failure_.empty()) {
    tuning.notes.push_back("an own GEMM kernel failed to run and was left out (first failure: " +
                           state->own_kernel_failure_ + ")");
  }
  // After every kernel choice: it times whole passes.
  int halves_from_cache = 0;
  LTSERVE_RETURN_IF_ERROR(
      state->ChooseHalves(model->WithTuning(tuning), tuning, cache, &halves_from_cache));
  if (halves_from_cache > 0) {
    tuning.notes.push_back(std::to_string(halves_from_cache) +
                           " two-stream halves choices from the cache");
  }
  // After the halves: it times each bucket's pass as it will be served.
  int launch_from_cache = 0;
  LTSERVE_RETURN_IF_ERROR(
      state->ChooseProgrammaticLaunch(model, tuning, cache, &launch_from_cache));
  if (launch_from_cache > 0) {
    tuning.notes.push_back(std::to_string(launch_from_cache) +
                           " programmatic launch choices from the cache");
  }
  if (!options.algo_cache_file.empty() && cache.size() != cached_before) {
    LTSERVE_RETURN_IF_ERROR(cache.Save(options.algo_cache_file));
  }
  return model->WithTuning(std::move(tuning));
}

}  // namespace ltserve::gpu
