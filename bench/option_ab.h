// A/B of one model option in one process: the same plan loaded twice, once as A and once as B,
// with the same cuBLASLt algorithms (the first load writes an algorithm cache file that the
// second reads, so a flip between close candidates cannot pass for the option's effect), timed
// in alternating rounds from their graphs. Used for programmatic_launch and the executor's
// own GEMM kernels; gemm_search, which chooses the algorithms, keeps a cache key of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "model/model_options.h"
#include "model/model_spec.h"
#include "model/token_layout.h"
#include "plan/plan.h"

namespace ltserve_bench {

struct OptionAB {
  std::string title;  // what the table compares, e.g. "programmatic dependent launch on and off"
  std::string a_label;
  std::string b_label;
  std::function<void(ltserve::ModelOptions&)> set_a;
  std::function<void(ltserve::ModelOptions&)> set_b;
  // False where the option decides the cuBLASLt algorithms themselves (gemm_search): then each
  // side keeps its own, and the table says so.
  bool same_algorithms = true;
  // Print each load's time and log on stderr (always where the algorithms differ).
  bool print_logs = false;
};

// Prints a markdown table: per batch, the median graph µs as A and as B and their ratio.
// `seq` > 0: a token model, each batch `batch` sequences of `seq` tokens; 0: rows. Returns 0,
// or 1 after printing why a load or a timing failed.
int PrintOptionAB(const std::string& name, const OptionAB& ab,
                  std::shared_ptr<const ltserve::plan::Plan> plan, ltserve::ModelSpec spec,
                  const std::optional<ltserve::TokenLayout>& tokens,
                  std::span<const std::int64_t> batches, std::int64_t seq);

// The A/Bs the benchmarks print.
OptionAB ProgrammaticLaunchAB();
// programmatic_launch auto (each bucket's choice timed in its pass at load) against true.
OptionAB ProgrammaticAutoAB();
OptionAB SkinnyGemmAB();  // split-K kernel allowed (auto) against off
OptionAB StagedGemmAB();  // staged-weights kernel allowed (auto) against off
// Every GEMM of up to 128 rows on the staged-weights kernel (staged_gemm_kernel always, the
// split-K kernel off) against the defaults.
OptionAB StagedEverywhereAB();
OptionAB LayerChainAB();  // layer-chain kernel allowed (auto) against off
OptionAB GemmLayerNormAB();  // GEMM + LayerNorm kernel allowed (auto) against off
OptionAB StreamingLayerNormAB();  // LayerNorm's streaming schedule allowed (auto) against off
OptionAB TwoStreamHalvesAB();  // a bucket as two halves on two streams allowed (auto) against off
OptionAB GemmSearchAB();  // the wide cuBLASLt search against the heuristic's candidates
// cuBLASLt's workspace at its default (32 MiB) against 1 byte, which leaves out the algorithms
// that need one: in the pass, the persistent kernels each come after a memset node that zeroes
// their tile counter.
OptionAB WorkspaceAB();
// cuBLASLt's counter memsets as one node at each graph's start (consolidate_cublaslt_memsets
// true) against one before each persistent kernel, where cuBLASLt puts them (false), with the
// same algorithms.
OptionAB MemsetConsolidationAB();
// CUTLASS's GEMMs wherever they apply (cutlass_gemm_kernel always) against off, or chosen
// per GEMM and bucket (auto) against off.
OptionAB CutlassGemmAB();
OptionAB CutlassGemmAutoAB();
// Attention's work items from the batch's last sequence to its first
// (attention_last_sequence_first true) against first to last.
OptionAB AttentionOrderAB();
// The same options on both sides: a control. Where the two loads make the same choices (the
// second reads the first's from the cache file), any ratio away from 1 is how far apart two
// loads of one model time, which bounds what an A/B of that model can show.
OptionAB ControlAB();
// `ab` with its sides swapped (B loads first, and B's choices are the ones in the cache file),
// with both loads' logs printed: an effect that follows the load order, not the option, shows.
OptionAB Swapped(OptionAB ab);
OptionAB GemmLayerNormAlwaysAB();  // every GEMM + LayerNorm pair fused (always) against off
// The split-K and GEMM + LayerNorm kernels wherever they run (always) against the defaults,
// and programmatic launch on against off with them.
OptionAB OwnKernelsEverywhereAB();
OptionAB ProgrammaticWithOwnKernelsAB();
// Own-kernel choices checked in whole passes (check_kernels_in_pass true) against the choices
// made one kernel at a time (false); A loads first, so B runs A's choices before the check.
OptionAB KernelsInPassAB();

// two_stream_halves taken apart: per batch, the graph µs of the whole pass (off), of the halves
// one after the other on one stream, and of the halves side by side on two (both `always`,
// one model, so the same kernels), with the same cuBLASLt algorithms throughout. The first
// ratio is what the half bucket's kernels change, the second what running them at once adds.
int PrintHalvesApart(const std::string& name, std::shared_ptr<const ltserve::plan::Plan> plan,
                     ltserve::ModelSpec spec, const std::optional<ltserve::TokenLayout>& tokens,
                     std::span<const std::int64_t> batches, std::int64_t seq);

// The whole pass and the halves on two streams, each for about `round_seconds` of back-to-back
// passes in turn, `rounds` times, at `batch` sequences of `seq` tokens: whether the halves'
// gain in the short A/Bs above holds once the GPU has been busy for a while (clocks and power
// settle over seconds, and the load-time choice is timed on a GPU that has been tuning).
int PrintHalvesSustained(const std::string& name, std::shared_ptr<const ltserve::plan::Plan> plan,
                         ltserve::ModelSpec spec, const std::optional<ltserve::TokenLayout>& tokens,
                         std::int64_t batch, std::int64_t seq, int rounds, double round_seconds);

}  // namespace ltserve_bench
