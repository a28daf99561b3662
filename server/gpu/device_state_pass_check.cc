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
// shape, and keeps each flip the pass replays clearly faster.
#include <algorithm>
#include <chrono>
#include <cstdio>
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

Result<float> MeanReplayMs(cudaGraphExec_t graph, cudaStream_t stream, const Event& start,
                           const Event& stop) {
  const auto replay = [&]() -> Status {
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph, stream));
    return Status::Ok();
  };
  for (int i = 0; i < kWarmupReplays; ++i) LTSERVE_RETURN_IF_ERROR(replay());
  return MeanOfRuns(replay, kTimedReplays, start, stop, stream);
}

const char* KindName(const GemmKernel& kernel) {
  switch (kernel.kind) {
    case GemmKernel::Kind::kSmallBatch: return "small-batch";
    case GemmKernel::Kind::kSkinny: return "split-K";
    default: return "cuBLASLt";
  }
}

// A cached choice's word: "none", or "flip:" and the flipped steps' indices, comma-separated.
std::string FlipWord(const std::vector<std::size_t>& steps) {
  if (steps.empty()) return "none";
  std::string word = "flip:";
  for (std::size_t i = 0; i < steps.size(); ++i) {
    word += (i > 0 ? "," : "") + std::to_string(steps[i]);
  }
  return word;
}

// The steps a cached word flips; nullopt when it is not a word FlipWord writes.
std::optional<std::vector<std::size_t>> ParseFlipWord(const std::string& word) {
  if (word == "none") return std::vector<std::size_t>{};
  if (word.rfind("flip:", 0) != 0) return std::nullopt;
  std::vector<std::size_t> steps;
  std::size_t at = 5;
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
  return CaptureGraph(stream(), [&] { return RunStepsSplit(bucket, kNoHalf, {}); });
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
  std::vector<std::size_t> to_check;
  for (std::size_t b = 0; b < buckets; ++b) {
    for (std::size_t s = 0; s < tuning.steps.size(); ++s) {
      if (flippable(s, b)) {
        to_check.push_back(b);
        break;
      }
    }
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
  std::vector<std::string> flipped;  // "linear K->N at R rows to KIND", for the load log
  std::string timed;  // "R rows: K->N ratio, ...; R rows: ...", every comparison timed
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
    if (const std::string* word = cache.FindChoice(key); word != nullptr) {
      const std::optional<std::vector<std::size_t>> steps = ParseFlipWord(*word);
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
    // Shape after shape, each flip kept becoming the next one's base. Flipping every shape no
    // single flip took all at once (an own kernel starts early only after another own kernel)
    // was tried and never won: 1.08-2.27x slower at every bucket of the MLP and BERT-base on
    // the H200 (bench/RESULTS.md).
    for (const std::vector<std::size_t>& shape : shapes) {
      GemmTuning trial = tuning;
      for (const std::size_t s : shape) trial.kernels[s][b] = *runner_ups[s][b];
      model_ = model->WithTuning(trial);
      Result<GraphExec> flipped_graph = CapturePass(b);
      if (!flipped_graph.ok()) {
        // An own kernel that cannot run here stays out, as in ChooseKernel.
        if (own_kernel_failure_.empty()) own_kernel_failure_ = flipped_graph.status().ToString();
        LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
        continue;
      }
      std::vector<float> base_ms;
      std::vector<float> flipped_ms;
      for (int r = 0; r < kRounds; ++r) {
        LTSERVE_ASSIGN_OR_RETURN(const float as_chosen, MeanReplayMs(base.get(), stream(), start, stop));
        LTSERVE_ASSIGN_OR_RETURN(const float other,
                                 MeanReplayMs(flipped_graph.value().get(), stream(), start, stop));
        base_ms.push_back(as_chosen);
        flipped_ms.push_back(other);
      }
      const float as_chosen = MedianMs(std::move(base_ms));
      const float other = MedianMs(std::move(flipped_ms));
      const auto& gemm = std::get<GemmStep>(tuning.steps[shape.front()]);
      char ratio[96];
      std::snprintf(ratio, sizeof(ratio), "%s %lld->%lld %.3f", timed.back() == ':' ? "" : ",",
                    static_cast<long long>(gemm.k), static_cast<long long>(gemm.n),
                    static_cast<double>(other / as_chosen));
      timed += ratio;
      if (!ClearlyFaster(other, as_chosen)) continue;
      tuning.kernels = std::move(trial.kernels);
      base = std::move(flipped_graph.value());
      for (const std::size_t s : shape) {
        flips.push_back(s);
        note_flip(s);
      }
    }
    std::sort(flips.begin(), flips.end());
    cache.PutChoice(key, FlipWord(flips));
    ++checked;
  }
  LTSERVE_RETURN_IF_ERROR(SetSequences({}));
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
  model_ = model->WithTuning(tuning);
  std::string note = "own-kernel choices checked in the pass at " + std::to_string(checked) +
                     " buckets: " + std::to_string(flipped.size()) + " flipped";
  for (std::size_t i = 0; i < flipped.size(); ++i) note += (i > 0 ? "; " : " (") + flipped[i];
  if (!flipped.empty()) note += ")";
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  note += std::string(", ") + seconds + " s";
  if (!timed.empty()) note += "; pass with the shape flipped / as chosen at " + timed;
  tuning.notes.push_back(note);
  return Status::Ok();
}

}  // namespace ltserve::gpu
