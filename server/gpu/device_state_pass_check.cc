// DeviceState's check of the own-kernel choices in whole passes (check_kernels_in_pass).
//
// ChooseKernel decides, one GEMM at a time with the L2 emptied, whether cuBLASLt or one of
// the executor's own kernels runs a step. Inside a pass the kernels meet differently: an own
// kernel after another own kernel starts early (programmatic launch) while one after cuBLASLt
// does not, and a layer's inputs come from the L2 where the step before left them. Timed one
// at a time, close candidates also flipped between identical loads and moved the MLP's pass
// at 4 rows between 24.2 and 29.6 µs on the H200 (bench/RESULTS.md). So at each bucket where
// a step has a runner-up of the other side, this times the bucket's whole pass as captured
// graphs, as chosen and with one layer shape's steps flipped to their runner-up, shape after
// shape, and keeps each flip the pass replays clearly faster; then, where two or more shapes
// are left on cuBLASLt with CUTLASS's kernel as their runner-up, those all at once.
//
// Layer chains (layer_chain_kernel auto) are checked the same way first, each run against the
// pass with its steps' own kernels: ChooseChains times a chain alone with the L2 emptied, and
// in served graphs BERT-base at 4 sequences of 8 ran 1.06x slower with the chain one load and
// 0.95x the next (bench/RESULTS.md, "the ring's L2 prefetch, gated").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gpu/cuda_check.h"
#include "gpu/device_state.h"
#include "gpu/tuning_keys.h"

namespace ltserve::gpu {
namespace {

// Replays before a timing, replays timed (their mean is one sample), and the rounds in which
// the two graphs being compared take turns (each keeps its median), so that a clock drifting
// during the load reaches both alike. A BERT-base pass of one sequence is ~0.5 ms: a
// comparison costs ~70 ms.
constexpr int kWarmupReplays = 3;
constexpr int kTimedReplays = 20;
constexpr int kRounds = 3;

Result<float> MeanRunMs(const std::function<Status()>& run, cudaStream_t stream,
                        const Event& start, const Event& stop) {
  for (int i = 0; i < kWarmupReplays; ++i) LTSERVE_RETURN_IF_ERROR(run());
  return MeanOfRuns(run, kTimedReplays, start, stop, stream);
}

// The median of each run's mean over rounds in which the two take turns: first `a`'s, then
// `b`'s.
Result<std::pair<float, float>> TimeInTurns(const std::function<Status()>& a,
                                            const std::function<Status()>& b, cudaStream_t stream,
                                            const Event& start, const Event& stop) {
  std::vector<float> a_ms;
  std::vector<float> b_ms;
  for (int r = 0; r < kRounds; ++r) {
    LTSERVE_ASSIGN_OR_RETURN(const float a_mean, MeanRunMs(a, stream, start, stop));
    LTSERVE_ASSIGN_OR_RETURN(const float b_mean, MeanRunMs(b, stream, start, stop));
    a_ms.push_back(a_mean);
    b_ms.push_back(b_mean);
  }
  return std::pair{MedianMs(std::move(a_ms)), MedianMs(std::move(b_ms))};
}

std::function<Status()> Replay(cudaGraphExec_t graph, cudaStream_t stream) {
  return [graph, stream]() -> Status {
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph, stream));
    return Status::Ok();
  };
}

const char* KindName(const GemmKernel& kernel) {
  switch (kernel.kind) {
    case GemmKernel::Kind::kSmallBatch: return "small-batch";
    case GemmKernel::Kind::kSkinny: return "split-K";
    case GemmKernel::Kind::kStaged: return "staged-weights";
    case GemmKernel::Kind::kCutlass: return "CUTLASS";
    default: return "cuBLASLt";
  }
}

// A cached choice's word: "none", or `verb` ("flip", "drop"), a colon and the steps'
// indices, comma-separated (flipped steps; a dropped chain's first step).
std::string StepsWord(const std::vector<std::size_t>& steps, const std::string& verb = "flip") {
  if (steps.empty()) return "none";
  std::string word = verb + ":";
  for (std::size_t i = 0; i < steps.size(); ++i) {
    word += (i > 0 ? "," : "") + std::to_string(steps[i]);
  }
  return word;
}

// The steps a cached word names; nullopt when it is not a word StepsWord writes for `verb`.
std::optional<std::vector<std::size_t>> ParseStepsWord(const std::string& word,
                                                       const std::string& verb = "flip") {
  if (word == "none") return std::vector<std::size_t>{};
  if (word.rfind(verb + ":", 0) != 0) return std::nullopt;
  std::vector<std::size_t> steps;
  std::size_t at = verb.size() + 1;
  while (at < word.size()) {
    const std::size_t comma = std::min(word.find(',', at), word.size());
    const std::string number = word.substr(at, comma - at);
    if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos ||
        number.size() > 9) {
      return std::nullopt;
    }
    steps.push_back(static_cast<std::size_t>(std::stoul(number)));
    at = comma + 1;
  }
  if (steps.empty()) return std::nullopt;
  return steps;
}

}  // namespace

Status DeviceState::SetTimingSequences(std::int64_t rows) {
  if (!attention_batch_.has_value()) return Status::Ok();
  const GpuModelOptions& options = model_->options();
  std::int64_t length = std::min<std::int64_t>(rows, 128);
  if (options.capacity_sequences > 0) {
    length = std::max(length, (rows + options.capacity_sequences - 1) / options.capacity_sequences);
  }
  std::vector<std::int32_t> lengths(static_cast<std::size_t>(rows / length),
                                    static_cast<std::int32_t>(length));
  if (rows % length != 0) lengths.push_back(static_cast<std::int32_t>(rows % length));
  return SetSequences(lengths);
}

Result<GraphExec> DeviceState::CapturePass(std::size_t bucket) {
  return Capture([&] { return RunStepsSplit(bucket, kNoHalf, {}); });
}

Status DeviceState::ChoosePassKernels(
    const std::shared_ptr<const GpuModel>& model, GemmTuning& tuning,
    const std::vector<std::vector<std::optional<GemmKernel>>>& runner_ups, AlgoCache& cache,
    int* from_cache) {
  const GpuModelOptions& options = model->options();
  if (!options.check_kernels_in_pass) return Status::Ok();
  const std::size_t buckets = model->buckets().size();
  // A step may flip where it has a runner-up and runs alone: not inside a layer chain and not
  // fused with its LayerNorm (those launches were chosen against the step's kernel as it is).
  const auto flippable = [&](std::size_t s, std::size_t b) {
    if (s >= runner_ups.size() || !runner_ups[s][b].has_value()) return false;
    const GemmKernel::Kind kind = tuning.kernels[s][b].kind;
    if (kind == GemmKernel::Kind::kNormGemm || kind == GemmKernel::Kind::kChain) return false;
    if (b < tuning.chains.size()) {
      for (const ChainRun& run : tuning.chains[b]) {
        if (s >= run.first_step && s <= run.last_step) return false;
      }
    }
    return true;
  };
  // kAlways keeps its chains wherever they run; kAuto's are checked.
  const bool check_chains = options.layer_chain == OwnKernelMode::kAuto;
  const auto has_chains = [&](std::size_t b) {
    return check_chains && b < tuning.chains.size() && !tuning.chains[b].empty();
  };
  std::vector<std::size_t> to_check;
  for (std::size_t b = 0; b < buckets; ++b) {
    bool check = has_chains(b);
    for (std::size_t s = 0; s < tuning.steps.size() && !check; ++s) check = flippable(s, b);
    if (check) to_check.push_back(b);
  }
  if (to_check.empty()) return Status::Ok();

  // The model as ChooseKernel left it names the cache keys, so that a restart that makes the
  // same choices one kernel at a time finds the same flips.
  const std::shared_ptr<const GpuModel> chosen = model->WithTuning(tuning);
  model_ = chosen;
  LTSERVE_RETURN_IF_ERROR(CreateGemms());  // the tuned algorithms, for every bucket
  LTSERVE_ASSIGN_OR_RETURN(Event start, CreateEvent(/*timing=*/true));
  LTSERVE_ASSIGN_OR_RETURN(Event stop, CreateEvent(/*timing=*/true));
  const auto started = std::chrono::steady_clock::now();
  int checked = 0;
  int chains_checked = 0;
  std::vector<std::string> dropped;  // "steps F-L at R rows", for the load log
  std::string chains_timed;  // "R rows: steps F-L ratio, ...; ...", every chain comparison timed
  std::vector<std::string> flipped;  // "linear K->N at R rows to KIND", for the load log
  std::string timed;  // "R rows: K->N ratio, ...; R rows: ...", every comparison timed
  const auto time_both = [&](cudaGraphExec_t as_chosen, cudaGraphExec_t other) {
    return TimeInTurns(Replay(as_chosen, stream()), Replay(other, stream()), stream(), start, stop);
  };
  // A pass of `trial` at bucket `b` captured; nullopt where one of its kernels cannot run here,
  // which then stays out of the pass as it did in ChooseKernel (the failure kept for the log).
  const auto capture_trial = [&](const GemmTuning& trial,
                                 std::size_t b) -> Result<std::optional<GraphExec>> {
    model_ = model->WithTuning(trial);
    Result<GraphExec> graph = CapturePass(b);
    if (graph.ok()) return std::optional<GraphExec>(std::move(graph).value());
    if (own_kernel_failure_.empty()) own_kernel_failure_ = graph.status().ToString();
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
    return std::optional<GraphExec>();
  };
  for (const std::size_t b : to_check) {
    const std::int64_t rows = chosen->buckets()[b];
    const std::string key =
        std::string("pass,") + PrecisionName(options.precision) + ",rows=" +
        std::to_string(rows) + (options.gemm_search == GemmSearch::kWide ? ",search=wide" : "") +
        ",steps=" + Digest(StepsText(*chosen, [&](std::size_t s) {
          return chosen->Kernel(s, b).ToText() + "," +
                 (runner_ups[s][b].has_value() ? runner_ups[s][b]->ToText() : "-");
        }));
    const auto note_flip = [&](std::size_t s) {
      const auto& gemm = std::get<GemmStep>(tuning.steps[s]);
      const std::string text = "linear " + std::to_string(gemm.k) + "->" + std::to_string(gemm.n) +
                               " at " + std::to_string(rows) + " rows to " +
                               KindName(tuning.kernels[s][b]);
      if (std::find(flipped.begin(), flipped.end(), text) == flipped.end()) flipped.push_back(text);
    };
    if (has_chains(b)) {
      // Each run against the pass without it, in step order; a drop kept becomes the base.
      std::string runs_text;
      for (const ChainRun& run : tuning.chains[b]) {
        runs_text += std::to_string(run.first_step) + "-" + std::to_string(run.last_step) + ":" +
                     GemmKernel::Chain(run.config).ToText() + ";";
      }
      const std::string chain_key = key + ",chains=" + Digest(runs_text);
      const auto drop = [&](std::vector<ChainRun>& runs, std::size_t first) {
        const auto at = std::find_if(runs.begin(), runs.end(),
                                     [&](const ChainRun& run) { return run.first_step == first; });
        if (at == runs.end()) return false;
        dropped.push_back("steps " + std::to_string(at->first_step) + "-" +
                          std::to_string(at->last_step) + " at " + std::to_string(rows) + " rows");
        runs.erase(at);
        return true;
      };
      std::optional<std::vector<std::size_t>> cached_drops;
      if (const std::string* word = cache.FindChoice(chain_key); word != nullptr) {
        cached_drops = ParseStepsWord(*word, "drop");
        // Every step named must start one of the runs, or the word is timed again, not applied
        // in part.
        if (cached_drops.has_value() &&
            !std::all_of(cached_drops->begin(), cached_drops->end(), [&](std::size_t first) {
              return std::any_of(tuning.chains[b].begin(), tuning.chains[b].end(),
                                 [&](const ChainRun& run) { return run.first_step == first; });
            })) {
          cached_drops.reset();
        }
      }
      if (cached_drops.has_value()) {
        ++*from_cache;
        for (const std::size_t first : *cached_drops) drop(tuning.chains[b], first);
      } else {
        LTSERVE_RETURN_IF_ERROR(SetTimingSequences(rows));
        model_ = model->WithTuning(tuning);
        LTSERVE_ASSIGN_OR_RETURN(GraphExec base, CapturePass(b));
        std::vector<std::size_t> drops;
        chains_timed += (chains_timed.empty() ? "" : "; ") + std::to_string(rows) + " rows:";
        const std::vector<ChainRun> runs = tuning.chains[b];
        for (const ChainRun& run : runs) {
          GemmTuning trial = tuning;
          std::vector<ChainRun>& trial_runs = trial.chains[b];
          trial_runs.erase(std::find_if(trial_runs.begin(), trial_runs.end(),
                                        [&](const ChainRun& r) { return r.first_step == run.first_step; }));
          LTSERVE_ASSIGN_OR_RETURN(std::optional<GraphExec> without, capture_trial(trial, b));
          if (!without.has_value()) continue;  // the chain stays
          LTSERVE_ASSIGN_OR_RETURN(const auto ms, time_both(base.get(), without->get()));
          char ratio[96];
          std::snprintf(ratio, sizeof(ratio), "%s steps %zu-%zu %.3f",
                        chains_timed.back() == ':' ? "" : ",", run.first_step, run.last_step,
                        static_cast<double>(ms.second / ms.first));
          chains_timed += ratio;
          if (!ClearlyFaster(ms.second, ms.first)) continue;
          drop(tuning.chains[b], run.first_step);
          drops.push_back(run.first_step);
          base = std::move(*without);
        }
        cache.PutChoice(chain_key, StepsWord(drops, "drop"));
      }
      ++chains_checked;
    }
    bool any_flippable = false;
    for (std::size_t s = 0; s < tuning.steps.size() && !any_flippable; ++s) {
      any_flippable = flippable(s, b);
    }
    if (!any_flippable) continue;  // a bucket checked for its chains alone
    if (const std::string* word = cache.FindChoice(key); word != nullptr) {
      const std::optional<std::vector<std::size_t>> steps = ParseStepsWord(*word);
      const bool valid =
          steps.has_value() && std::all_of(steps->begin(), steps->end(), [&](std::size_t s) {
            return s < tuning.steps.size() && flippable(s, b);
          });
      if (valid) {
        ++*from_cache;
        ++checked;
        for (const std::size_t s : *steps) {
          tuning.kernels[s][b] = *runner_ups[s][b];
          note_flip(s);
        }
        continue;
      }
    }
    // Layer shapes: steps of the same widths, epilogue, neighbours and choices flip together
    // (an encoder's twelve layers are one shape each of QKV, output, FFN up and down).
    std::vector<std::vector<std::size_t>> shapes;
    std::vector<std::string> shape_keys;
    for (std::size_t s = 0; s < tuning.steps.size(); ++s) {
      if (!flippable(s, b)) continue;
      const auto& gemm = std::get<GemmStep>(tuning.steps[s]);
      const std::string shape_key =
          std::to_string(gemm.k) + ">" + std::to_string(gemm.n) + "," +
          std::to_string(static_cast<int>(gemm.Effective(options.gelu))) +
          (gemm.residual != plan::kNoValue ? ",r" : "") + ",then=" +
          std::to_string(static_cast<int>(gemm.after)) + "," + tuning.kernels[s][b].ToText() +
          "," + runner_ups[s][b]->ToText();
      const auto at = std::find(shape_keys.begin(), shape_keys.end(), shape_key);
      if (at == shape_keys.end()) {
        shape_keys.push_back(shape_key);
        shapes.push_back({s});
      } else {
        shapes[static_cast<std::size_t>(at - shape_keys.begin())].push_back(s);
      }
    }
    LTSERVE_RETURN_IF_ERROR(SetTimingSequences(rows));
    model_ = model->WithTuning(tuning);
    LTSERVE_ASSIGN_OR_RETURN(GraphExec base, CapturePass(b));
    std::vector<std::size_t> flips;
    timed += (timed.empty() ? "" : "; ") + std::to_string(rows) + " rows:";
    // Flips `steps` to their runner-ups and times the pass against `base`, its ratio into the
    // log as `label`; kept (the new base) where clearly faster.
    const auto try_flip = [&](const std::vector<std::size_t>& steps,
                              const std::string& label) -> Status {
      GemmTuning trial = tuning;
      for (const std::size_t s : steps) trial.kernels[s][b] = *runner_ups[s][b];
      LTSERVE_ASSIGN_OR_RETURN(std::optional<GraphExec> flipped_graph, capture_trial(trial, b));
      if (!flipped_graph.has_value()) return Status::Ok();
      LTSERVE_ASSIGN_OR_RETURN(const auto ms, time_both(base.get(), flipped_graph->get()));
      char ratio[32];
      std::snprintf(ratio, sizeof(ratio), " %.3f", static_cast<double>(ms.second / ms.first));
      timed += (timed.back() == ':' ? " " : ", ") + label + ratio;
      if (!ClearlyFaster(ms.second, ms.first)) return Status::Ok();
      tuning.kernels = std::move(trial.kernels);
      base = std::move(flipped_graph.value());
      for (const std::size_t s : steps) {
        flips.push_back(s);
        note_flip(s);
      }
      return Status::Ok();
    };
    // Shape after shape, each flip kept becoming the next one's base. Flipping every shape no
    // single flip took all at once (an own kernel starts early only after another own kernel)
    // was tried and never won: 1.08-2.27x slower at every bucket of the MLP and BERT-base on
    // the H200 (bench/RESULTS.md).
    for (const std::vector<std::size_t>& shape : shapes) {
      const auto& gemm = std::get<GemmStep>(tuning.steps[shape.front()]);
      LTSERVE_RETURN_IF_ERROR(
          try_flip(shape, std::to_string(gemm.k) + "->" + std::to_string(gemm.n)));
    }
    // Then every step still on cuBLASLt whose runner-up is CUTLASS's, all at once: the
    // exception to the above. CUTLASS's kernels wait for the kernel ahead and release the one
    // after programmatically, which cuBLASLt's do not: one layer shape flipped alone overlaps
    // only with its neighbours, so the shape-by-shape check sees little of what a pass of them
    // gains (one flip of 136 kept on BERT-base, bench/RESULTS.md, 2026-12-07).
    std::vector<std::size_t> cutlass_steps;
    std::size_t cutlass_shapes = 0;
    for (const std::vector<std::size_t>& shape : shapes) {
      const std::size_t first = shape.front();
      if (std::find(flips.begin(), flips.end(), first) != flips.end() ||
          runner_ups[first][b]->kind != GemmKernel::Kind::kCutlass ||
          tuning.kernels[first][b].kind != GemmKernel::Kind::kCublasLt) {
        continue;
      }
      ++cutlass_shapes;
      cutlass_steps.insert(cutlass_steps.end(), shape.begin(), shape.end());
    }
    if (cutlass_shapes >= 2) {
      LTSERVE_RETURN_IF_ERROR(
          try_flip(cutlass_steps, std::to_string(cutlass_shapes) + " shapes on CUTLASS"));
    }
    std::sort(flips.begin(), flips.end());
    cache.PutChoice(key, StepsWord(flips));
    ++checked;
  }
  LTSERVE_RETURN_IF_ERROR(SetSequences({}));
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
  model_ = model->WithTuning(tuning);
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  if (chains_checked > 0) {
    std::string note = "layer chains checked in the pass at " + std::to_string(chains_checked) +
                       " buckets: " + std::to_string(dropped.size()) + " dropped";
    for (std::size_t i = 0; i < dropped.size(); ++i) note += (i > 0 ? "; " : " (") + dropped[i];
    if (!dropped.empty()) note += ")";
    if (!chains_timed.empty()) note += "; pass without the chain / with it at " + chains_timed;
    tuning.notes.push_back(note);
  }
  if (checked > 0) {
    std::string note = "own-kernel choices checked in the pass at " + std::to_string(checked) +
                       " buckets: " + std::to_string(flipped.size()) + " flipped";
    for (std::size_t i = 0; i < flipped.size(); ++i) note += (i > 0 ? "; " : " (") + flipped[i];
    if (!flipped.empty()) note += ")";
    note += std::string(", ") + seconds + " s";
    if (!timed.empty()) note += "; pass with the shape flipped / as chosen at " + timed;
    tuning.notes.push_back(note);
  }
  return Status::Ok();
}

namespace {

// The cache key of programmatic_launch auto's choice at `bucket`: the precision, the rows,
// graphs or not, and a digest of every step with the kernels that run it (at the half bucket
// too where the bucket runs as halves) and the layer chains. The choice changes no bits, only
// how the pass's kernels meet; the key keeps one pass's answer from standing for another's.
std::string ProgrammaticKey(const GpuModel& model, std::size_t bucket) {
  const std::size_t half = model.HalfBucket(bucket);
  std::string text = StepsText(model, [&](std::size_t s) {
    return model.Kernel(s, bucket).ToText() +
           (half != kNoHalf ? "," + model.Kernel(s, half).ToText() : std::string());
  });
  for (const ChainRun& run : model.Chains(bucket)) {
    text += "chain " + std::to_string(run.first_step) + "-" + std::to_string(run.last_step) + ":" +
            GemmKernel::Chain(run.config).ToText() + ";";
  }
  const GpuModelOptions& options = model.options();
  return std::string("programmatic,") + PrecisionName(options.precision) +
         ",rows=" + std::to_string(model.buckets()[bucket]) +
         (half != kNoHalf ? ",half=" + std::to_string(model.buckets()[half]) : std::string()) +
         (options.cuda_graphs ? ",graphs" : ",eager") + ",steps=" + Digest(text);
}

}  // namespace

Status DeviceState::ChooseProgrammaticLaunch(const std::shared_ptr<const GpuModel>& model,
                                             GemmTuning& tuning, AlgoCache& cache,
                                             int* from_cache) {
  const GpuModelOptions& options = model->options();
  if (options.programmatic_launch != ProgrammaticLaunch::kAuto || !programmatic_) {
    return Status::Ok();
  }
  const std::size_t buckets = model->buckets().size();
  tuning.ordinary_launch.assign(buckets, false);
  GemmTuning ordinary = tuning;
  ordinary.ordinary_launch.assign(buckets, true);
  // Each bucket is timed as its requests run it (the graph of Forward replayed, or Forward
  // enqueued without graphs; a small bucket's copies inside its graph aside), once as tuned
  // (launched programmatically) and once with every launch ordinary.
  const std::shared_ptr<const GpuModel> as_tuned = model->WithTuning(tuning);
  const std::shared_ptr<const GpuModel> as_ordinary = model->WithTuning(ordinary);
  model_ = as_tuned;
  LTSERVE_RETURN_IF_ERROR(CreateGemms());
  for (std::size_t b = 0; b < buckets; ++b) {
    if (as_tuned->HalfBucket(b) != kNoHalf) LTSERVE_RETURN_IF_ERROR(EnsureSideLane());
  }
  LTSERVE_ASSIGN_OR_RETURN(Event start, CreateEvent(/*timing=*/true));
  LTSERVE_ASSIGN_OR_RETURN(Event stop, CreateEvent(/*timing=*/true));
  const auto started = std::chrono::steady_clock::now();
  int checked = 0;
  DistinctRows ordinary_rows;
  std::string timed;  // "R rows R.RRR, ...": every bucket timed, ordinary / programmatic
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::int64_t rows = as_tuned->buckets()[b];
    if (rows > kProgrammaticCheckMaxRows) continue;
    ++checked;
    const std::string key = ProgrammaticKey(*as_tuned, b);
    bool ordinary_wins = false;
    if (const std::string* word = cache.FindChoice(key);
        word != nullptr && (*word == "programmatic" || *word == "ordinary")) {
      ++*from_cache;
      ordinary_wins = *word == "ordinary";
    } else {
      LTSERVE_RETURN_IF_ERROR(SetTimingSequences(rows));
      std::pair<float, float> ms;
      if (options.cuda_graphs) {
        model_ = as_tuned;
        LTSERVE_ASSIGN_OR_RETURN(GraphExec programmatic_graph,
                                 Capture([&] { return Forward(b); }));
        model_ = as_ordinary;
        LTSERVE_ASSIGN_OR_RETURN(GraphExec ordinary_graph,
                                 Capture([&] { return Forward(b); }));
        LTSERVE_ASSIGN_OR_RETURN(ms, TimeInTurns(Replay(programmatic_graph.get(), stream()),
                                                 Replay(ordinary_graph.get(), stream()), stream(),
                                                 start, stop));
      } else {
        LTSERVE_ASSIGN_OR_RETURN(ms, TimeInTurns(
                                         [&] {
                                           model_ = as_tuned;
                                           return Forward(b);
                                         },
                                         [&] {
                                           model_ = as_ordinary;
                                           return Forward(b);
                                         },
                                         stream(), start, stop));
      }
      ordinary_wins = ClearlyFaster(ms.second, ms.first);
      cache.PutChoice(key, ordinary_wins ? "ordinary" : "programmatic");
      char ratio[48];
      std::snprintf(ratio, sizeof(ratio), "%s%lld rows %.3f", timed.empty() ? "" : ", ",
                    static_cast<long long>(rows), static_cast<double>(ms.second / ms.first));
      timed += ratio;
    }
    if (ordinary_wins) {
      tuning.ordinary_launch[b] = true;
      ordinary_rows.Add(rows);
    }
  }
  model_ = as_tuned;
  LTSERVE_RETURN_IF_ERROR(SetSequences({}));
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
  if (checked > 0) {
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.1f",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    tuning.notes.push_back(
        "programmatic launch checked in the pass at " + std::to_string(checked) +
        " buckets: ordinary launches " +
        (ordinary_rows.empty() ? std::string("nowhere") : ordinary_rows.Text()) + ", " + seconds +
        " s" + (timed.empty() ? "" : "; pass with ordinary / programmatic launches at " + timed));
  }
  return Status::Ok();
}

}  // namespace ltserve::gpu
