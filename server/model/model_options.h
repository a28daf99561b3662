// What config.pbtxt's `parameters` say about a model, typed. server/config parses the string
// map into this struct once, with one set of rules, defaults and error messages
// (config/parameters.cc); every other component reads these fields and never a string key.
// docs/model_repository.md lists the keys as a user writes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ltserve {

// The GPU executor's compute precision (storage bf16/fp16/fp32; tf32 stores fp32 and
// multiplies on TF32 tensor cores). The CPU plan computes in fp32 whatever this says.
enum class Precision : std::uint8_t { kBf16, kFp16, kFp32, kTf32 };
const char* PrecisionName(Precision precision);  // "bf16", "fp16", "fp32", "tf32"

// How a GELU the model computes with erf runs on the GPU: as cuBLASLt's fused tanh epilogue,
// or exactly in a separate kernel. Already resolved from the parameter's "auto".
enum class GeluMode : std::uint8_t { kTanhEpilogue, kExact };

// When to run a few-row Linear with one of the GPU executor's own kernels (the small-batch
// matrix-vector kernel, the split-K skinny GEMM, the layer-chain kernel, the GEMM + LayerNorm
// kernel) instead of cuBLASLt:
// kAuto where it times faster at load, kAlways wherever it can (tests), kOff never.
enum class OwnKernelMode : std::uint8_t { kAuto, kAlways, kOff };

// How far the GPU executor looks for each GEMM's cuBLASLt configuration at load: kHeuristic
// times the algo_candidates the heuristic offers; kWide also times every configuration
// cuBLASLt accepts without thread-block clusters or CTA swizzling (about 1,250 per GEMM shape;
// gpu/gemm.h), from 16 rows up. On the H200 that made BERT-base's pass 2-7 % faster at one
// sequence and 0-2 % at 8-128, and its load 35-38 s instead of 2 (bench/RESULTS.md).
enum class GemmSearch : std::uint8_t { kHeuristic, kWide };

// Hopper and newer: whether the GPU executor's own kernels (LayerNorm, attention, the own GEMM
// kernels, conversions) are launched to start while the kernel before them drains
// (programmatic dependent launch). kAuto times each bucket's whole pass (up to
// gpu::kProgrammaticCheckMaxRows rows) both ways at load and keeps it off in a bucket whose
// pass replays clearly faster without: always on, it helped the MLP's passes by 1-3 % and cost
// BERT-base's one-sequence pass 3 % on the H100, and 13 % with every GEMM on the own kernels
// on the H200 (bench/RESULTS.md).
enum class ProgrammaticLaunch : std::uint8_t { kOn, kOff, kAuto };

// Which executor may run the model: kAuto lowers when possible, kPlan makes failing to lower a
// load error, kTorchScript never lowers.
enum class PathChoice : std::uint8_t { kAuto, kPlan, kTorchScript };

// worker_poll_microseconds' ceiling: a second of a core per instance after every batch.
inline constexpr std::uint64_t kMaxWorkerPollUs = 1'000'000;

struct ModelOptions {
  Precision precision = Precision::kBf16;
  // "auto" resolves to the tanh epilogue in 16-bit storage, where its error is far below one
  // rounding step of the output (docs/gpu_executor.md), and to exact erf in fp32/tf32.
  GeluMode gelu = GeluMode::kTanhEpilogue;
  std::size_t workspace_bytes = std::size_t{32} << 20;  // cuBLASLt workspace per instance
  // GPU path with graphs: each cuBLASLt call of a pass gets a workspace slot of its own, and
  // the memset nodes that zero its persistent kernels' tile counters become one at the start
  // of each graph (gpu/workspace_memsets.h).
  bool consolidate_cublaslt_memsets = true;
  // GPU path: the attention kernel takes a batch's sequences from the last to the first. The
  // QKV projection ahead of it writes 75 MB at BERT-base's 128 sequences, more than the L2
  // holds, and what it wrote last is the likeliest to be there still: started there,
  // attention reads some of it from the L2 instead of DRAM (3.7 % off attention's launch at
  // that batch on an H100, bench/RESULTS.md). Each sequence's result is the same either way.
  bool attention_last_sequence_first = true;
  int algo_candidates = 8;           // heuristic candidates timed per GEMM
  GemmSearch gemm_search = GemmSearch::kHeuristic;
  std::string algo_cache_file;       // resolved against the model directory; empty: none
  bool cuda_graphs = true;
  ProgrammaticLaunch programmatic_launch = ProgrammaticLaunch::kOn;
  // GPU path, row plans with graphs: small buckets copy their rows in and out inside the
  // bucket's graph, so a request is one launch (gpu/bucket_graphs.h, StagedGraphs).
  bool copies_in_graph = true;
  // GPU path: a request that can start at once on an idle instance runs on the thread that
  // received it instead of waking the instance's worker (SchedulerOptions::run_on_caller_when_idle).
  bool run_on_receiving_thread = true;
  // An instance's worker with nothing to run polls for requests this long (µs) before it
  // sleeps, so a request arriving within it starts on an awake thread with warm caches
  // (SchedulerOptions::worker_poll_us); receiving-thread runs are off while it is set. 0: off.
  std::uint64_t worker_poll_us = 0;
  OwnKernelMode small_batch = OwnKernelMode::kAuto;   // the matrix-vector kernel, 1-8 rows
  OwnKernelMode skinny_gemm = OwnKernelMode::kAuto;   // the split-K kernel, up to 128 rows
  // The staged-weights kernel (tensor-map copies and warpgroup MMAs, gpu/staged_gemm.h), up to
  // 128 rows on compute capability 9.x; `auto` offers it up to kStagedGemmAutoMaxRows (32), where
  // whole BERT-base passes of short sequences ran 4-12 % faster with it on an H100; above that
  // they ran slower though it won GEMMs timed alone (bench/RESULTS.md).
  OwnKernelMode staged_gemm = OwnKernelMode::kAuto;
  // CUTLASS's Hopper GEMM (gpu/cutlass_gemm.h) for the GEMM steps cuBLASLt runs, on compute
  // capability 9.x, 16-bit storage: it takes part in programmatic dependent launch, which
  // cuBLASLt's kernels do not. `always` runs it wherever it applies (its fastest tile timed
  // alone); `auto` lets it compete with cuBLASLt from kCutlassGemmAutoMinRows (2,560) rows, timed
  // alone and then as the runner-up in the pass check. Off unless asked for: on an H100
  // `always` ran BERT-base 2.4 % faster at 32 sequences and 2-38 % slower at 1, 8 and 128;
  // `auto` 1-2 % faster at 128 sequences, 0-1.3 % at 32 and level below, for ~65 s more load
  // time (bench/RESULTS.md, 2026-12-08).
  OwnKernelMode cutlass_gemm = OwnKernelMode::kOff;
  // Consecutive Linear layers in one persistent kernel, up to 32 rows (gpu/chain_gemm.h).
  // Off unless asked for: on the H200 it timed slower than the layers' own kernels at every
  // shape measured (bench/RESULTS.md), so "auto" would only add timing to every load.
  OwnKernelMode layer_chain = OwnKernelMode::kOff;
  // A Linear and the LayerNorm reading its output in one kernel, up to 512 rows and 1024
  // outputs (gpu/norm_gemm.h): the post-LN steps of BERT-family encoders. Off unless asked for:
  // on the H200 it timed at best 4-11 % faster than cuBLASLt + LayerNorm (768 -> 768, up to 32
  // rows) and slower everywhere else (bench/RESULTS.md).
  OwnKernelMode gemm_layernorm = OwnKernelMode::kOff;
  // LayerNorm's streaming schedule (gpu/kernels.h): the same bits as the row-a-warp kernel,
  // chosen per LayerNorm and bucket where it times faster at load. On the H200 it wins at
  // BERT-base's 16,384-row batches and loses at 4,096 (bench/RESULTS.md).
  OwnKernelMode streaming_layernorm = OwnKernelMode::kAuto;
  // GPU path: a large bucket runs its row-local steps (GEMMs, LayerNorm, pointwise) as two
  // halves on two streams of its graph, meeting for attention, so that one half's kernels fill
  // the SMs the other half's tails leave idle (gpu/device_state.h). Needs a bucket of exactly
  // half the rows, whose kernels each half runs.
  OwnKernelMode two_stream_halves = OwnKernelMode::kAuto;
  // GPU path: the own-kernel choices above (small-batch, split-K), made one GEMM at a time
  // with the L2 emptied, are then checked in whole passes of each bucket where they compete:
  // each layer shape's choice is flipped to the runner-up of the other side (cuBLASLt or the
  // fastest own kernel) where the pass's graph replays clearly faster that way. One kernel
  // timed alone misses what the pass gives or takes (programmatic launch, the L2 as the layers
  // before leave it), and close choices flipped between identical loads (bench/RESULTS.md).
  bool check_kernels_in_pass = true;
  bool fuse_epilogues = true;        // false: every Linear runs matmul + separate kernel
  int gpu_device = 0;                // CUDA device ordinal
  PathChoice execution_path = PathChoice::kAuto;
  // Token models (encoders) only, as configured; TokenLayout (token_layout.h) resolves the
  // defaults, because they depend on which input carries the tokens.
  std::optional<std::int64_t> max_sequence_length;
  std::optional<std::int64_t> max_tokens_per_batch;
  // ATen's intra-op and inter-op pool sizes, Triton's INTRA_OP_THREAD_COUNT and
  // INTER_OP_THREAD_COUNT; nullopt: not set (a value of 0 or less in the config means the same,
  // as in Triton). The pools are process-wide: server/torch/aten_threads.h says who decides.
  std::optional<int> intra_op_threads;
  std::optional<int> inter_op_threads;

  friend bool operator==(const ModelOptions&, const ModelOptions&) = default;
};

}  // namespace ltserve
