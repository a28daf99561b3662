// Everything one executor instance owns on the GPU, all allocated at creation: a stream, a
// cuBLASLt handle, its workspace, one activation buffer per plan value sized for the largest
// bucket, device I/O buffers where the I/O dtype differs from the compute dtype, one
// cuBLASLt descriptor set per GEMM and bucket, and for a model with attention the buffer
// describing a batch's sequences. Forward() only enqueues work.
//
// Where tuning chose two_stream_halves for a bucket, each run of row-local steps (GEMMs,
// LayerNorms, pointwise steps: GpuModel::RowLocal) is enqueued as two halves of the bucket's
// rows, the first on the instance's stream and the second on a side stream with a cuBLASLt
// workspace of its own, each half with the kernels chosen for the bucket of half the rows;
// the two streams part (an event) before the run and meet (another) after it, so attention
// and the other whole-batch steps see every row. In a captured graph the halves are two
// branches, and one half's kernels can take the SMs that the other half's kernel tails leave
// idle. The halves compute what the whole bucket would, with the half bucket's algorithms.
//
// Thread-safety: one thread at a time.
#pragma once

#include <cstdint>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "gpu/algo_cache.h"
#include "gpu/attention_batch.h"
#include "gpu/cuda_resources.h"
#include "gpu/gemm.h"
#include "gpu/gpu_model.h"
#include "gpu/workspace_memsets.h"

namespace ltserve::gpu {

// Where token-id input `input` (kIdsInput...) of a batch in a bucket of `bucket_rows` tokens
// starts, in ints from the start of the input buffer: each input is a bucket long, so a
// bucket's graph reads fixed addresses and one copy uploads all three.
constexpr std::int64_t TokenIdsAt(std::size_t input, std::int64_t bucket_rows) {
  return static_cast<std::int64_t>(input) * bucket_rows;
}

// The largest bucket programmatic_launch auto times both ways. At BERT-base's 8 to 128
// sequences of 128 tokens (1,024 to 16,384 rows) the two were within 1.1 % on the H200
// (bench/RESULTS.md), while timing a pass of 2 ms or more both ways adds a second to a load.
inline constexpr std::int64_t kProgrammaticCheckMaxRows = 1024;

class DeviceState {
 public:
  // Sets each GEMM's algorithm from the model when it is tuned (an untuned model's state is
  // Tune's scratch).
  static Result<std::unique_ptr<DeviceState>> Create(std::shared_ptr<const GpuModel> model);

  cudaStream_t stream() const { return stream_.get(); }
  // Where the host copies input rows to, and reads output rows from. For a token-id plan the
  // input is the three int32 token inputs, each a bucket's rows long, one after another
  // (TokenIdsAt).
  void* input_device() const;
  const void* output_device() const;

  // Token models with attention or pooling: enqueues the upload of the next batch's sequence
  // lengths (the packed tokens' split into sequences), which Forward's attention and pooling
  // steps read. Until the first call the batch holds no sequence and attention writes
  // nothing. A no-op for other models.
  Status SetSequences(std::span<const std::int32_t> lengths);

  // Enqueues the forward pass over `bucket`'s rows, conversions at the edges included. With
  // `step_marks` (one timing event per step, for profiling, never under capture), records
  // step_marks[s] on the stream right after step s.
  Status Forward(std::size_t bucket, std::span<const Event> step_marks = {});

  // The forward pass in its three parts, for a row plan's graph that reads its input from and
  // writes its output to pinned host memory itself (StagedGraphs): the bucket's input rows
  // converted from `host_input` (the model's input dtype, a device address of pinned host
  // memory) into the plan's input value; the steps; the output value's rows converted into
  // `host_output`. The conversion kernels read and write over PCIe, so no copy engine takes
  // part. Forward is ConvertInputFrom(input staging), RunSteps, ConvertOutputTo(output staging)
  // where the dtypes differ.
  Status ConvertInputFrom(std::size_t bucket, const void* host_input);
  Status RunSteps(std::size_t bucket, std::span<const Event> step_marks = {});
  Status ConvertOutputTo(std::size_t bucket, void* host_output);

  // What `enqueue` puts on the stream, captured and instantiated; with counter slots
  // (consolidate_cublaslt_memsets on a tuned model with graphs), each cuBLASLt call in its own
  // slot and its tile-counter memset folded into one at the graph's start
  // (gpu/workspace_memsets.h). Every graph of this state's passes is captured here.
  Result<GraphExec> Capture(const std::function<Status()>& enqueue);
  // How many memset nodes the captures so far deleted, and the slots' size (0: no slots).
  int consolidated_memsets() const { return consolidated_memsets_; }
  std::size_t counter_slot_bytes() const { return counter_slots_.slot_bytes; }

  // Benchmarks only (bench/gpu_forward_timer.h), before any capture: a bucket's halves one
  // after the other on the instance's stream instead of side by side on two, to tell what the
  // half bucket's kernels change from what running the halves at once does.
  void set_halves_on_one_stream(bool one_stream) { halves_on_one_stream_ = one_stream; }

  // Chooses every GEMM's algorithm of an untuned model on a state of its own, turning a layer
  // cuBLASLt cannot fuse into matmul + pointwise; uses and updates the model's algorithm cache
  // file. Returns the tuned model (GpuModel::WithTuning); `model` is left as it was.
  static Result<std::shared_ptr<const GpuModel>> Tune(std::shared_ptr<const GpuModel> model);

 private:
  DeviceState() = default;
  // Where a step's work goes: the stream, the cuBLASLt workspace for that stream, the first
  // of the rows it computes (0, or a bucket's second half), and whether own kernels launch
  // programmatically there.
  struct Lane {
    cudaStream_t stream = nullptr;
    void* workspace = nullptr;
    std::size_t workspace_bytes = 0;
    std::int64_t first_row = 0;
    bool programmatic = false;
  };
  // The instance's stream, launching as the option and the device allow: Tune's timings of
  // one kernel at a time.
  Lane MainLane() const {
    return Lane{stream(), workspace_.data(), workspace_.bytes(), 0, programmatic_};
  }
  // The instance's stream in a pass of `bucket`.
  Lane PassLane(std::size_t bucket) const {
    Lane lane = MainLane();
    lane.programmatic = Programmatic(bucket);
    return lane;
  }
  // Whether a pass of `bucket` launches its own kernels programmatically.
  bool Programmatic(std::size_t bucket) const { return programmatic_ && model_->ProgrammaticAt(bucket); }
  // One cuBLASLt descriptor per GEMM step and bucket, with the model's algorithms when tuned.
  Status CreateGemms();
  // The side stream, its workspace and the two events of two_stream_halves, once.
  Status EnsureSideLane();
  // RunSteps with each run of row-local steps as two halves of `half`'s rows, or whole
  // (half == kNoHalf).
  Status RunStepsSplit(std::size_t bucket, std::size_t half, std::span<const Event> step_marks);
  // Row-local steps first..end-1 as two halves, each computing `half`'s rows, in a pass that
  // launches programmatically or not.
  Status RunHalves(std::size_t first, std::size_t end, std::size_t half, bool programmatic);
  // A GEMM, pointwise or LayerNorm step over `bucket`'s rows from lane.first_row on.
  Status RunRowLocal(std::size_t step_index, std::size_t bucket, const Lane& lane);
  // `matmul` with the lane's workspace, or while a capture records calls, with the lane's next
  // counter slot where one is left and `needed` bytes fit it (the call then recorded for
  // ConsolidateWorkspaceMemsets).
  Status RunInWorkspace(const Lane& lane, std::size_t needed,
                        const std::function<Status(void* workspace, std::size_t bytes)>& matmul);
  // With consolidate_cublaslt_memsets on a tuned model with graphs: one counter slot per GEMM
  // step and lane, as large as the largest workspace the chosen algorithms need up to
  // kMaxCounterSlotBytes.
  Status CreateCounterSlots();
  // `matmul` (a cuBLASLt run on the step's operands), then the pointwise step for what did
  // not fuse.
  Status RunCublasLt(const GemmStep& step, std::int64_t rows, const Lane& lane,
                     const std::function<Status(const GemmOperands&)>& matmul);
  Status RunOwnKernel(const GemmKernel& kernel, const GemmStep& step, std::int64_t rows,
                      const Lane& lane);
  // The layers of steps first..last of `steps` for the layer-chain kernel, on this state's
  // buffers; false when there are more than kChainMaxLayers.
  bool ChainLayers(const std::vector<Step>& steps, std::size_t first, std::size_t last,
                   std::array<ChainLayer, kChainMaxLayers>& layers) const;
  Status RunChain(const std::vector<Step>& steps, const ChainRun& run, std::int64_t rows,
                  bool programmatic);
  // GEMM step `step_index` and the LayerNorm step after it as one launch of the GEMM +
  // LayerNorm kernel.
  Status RunNormGemm(const NormGemmConfig& config, std::size_t step_index, std::int64_t rows,
                     bool programmatic);
  Status EnsureFlush();
  // Tune's: times each chainable run at each bucket of up to kChainMaxRows rows against its
  // steps' chosen kernels and records the runs the layer-chain kernel takes over; the choice
  // is kept in `cache` like a kernel choice.
  Status ChooseChains(GemmTuning& tuning, AlgoCache& cache, int* from_cache);
  // Tune's, after ChooseChains: times each GEMM + LayerNorm pair LayerNormFusableGemms finds,
  // at each bucket the kernel takes and no layer chain covers, against the GEMM's chosen
  // kernel followed by the LayerNorm kernel, and marks the GEMM step kNormGemm where the
  // fused kernel wins (kAuto: clearly; kAlways: wherever it runs); cached like a kernel choice.
  Status ChooseNormGemms(GemmTuning& tuning, AlgoCache& cache, int* from_cache);
  // Tune's, after ChooseNormGemms: times LayerNorm's two schedules at each LayerNorm step and
  // bucket the streaming one takes (and no GEMM + LayerNorm launch covers), and records in
  // tuning.layer_norm_schedules where it wins (kAuto: clearly; kAlways: wherever it runs).
  Status ChooseLayerNormSchedules(GemmTuning& tuning);
  // Tune's, after ChooseLayerNormSchedules (device_state_pass_check.cc): at each bucket where
  // a GEMM step has a runner-up of the other side (`runner_ups`, [step][bucket], from
  // ChooseKernel), times whole passes from captured graphs with each layer shape's choice as
  // made and flipped to its runner-up, one shape after another, and keeps a flip where the
  // pass replays clearly faster (check_kernels_in_pass). `model` is the untuned model; the
  // flips are kept in `cache`.
  Status ChoosePassKernels(const std::shared_ptr<const GpuModel>& model, GemmTuning& tuning,
                           const std::vector<std::vector<std::optional<GemmKernel>>>& runner_ups,
                           AlgoCache& cache, int* from_cache);
  // A graph of `bucket`'s steps with the kernels the current model_ chooses, captured on this
  // state's stream and instantiated; ChoosePassKernels times several such graphs in turn.
  Result<GraphExec> CapturePass(std::size_t bucket);
  // Sequences of up to 128 tokens over `rows` rows (fewer and longer where a pooled plan holds
  // fewer sequences), for attention while whole passes are timed at load; a no-op without it.
  Status SetTimingSequences(std::int64_t rows);
  // Tune's, after ChooseHalves (device_state_pass_check.cc), with programmatic_launch auto on
  // Hopper and newer: times each bucket of up to kProgrammaticCheckMaxRows rows as served (its
  // graph, or its pass without graphs) with its own kernels launched programmatically and
  // ordinarily, and records in tuning.ordinary_launch where ordinary launches are clearly
  // faster; `model` is the untuned model; the choice is kept in `cache`.
  Status ChooseProgrammaticLaunch(const std::shared_ptr<const GpuModel>& model,
                                  GemmTuning& tuning, AlgoCache& cache, int* from_cache);
  // Tune's, after every kernel choice: on this state switched to `tuned` (the model with every other choice made),
  // times each bucket HalfBucketCandidate allows whole and as two halves, whole passes on
  // sequences of up to 128 tokens, and records in tuning.half_buckets where the halves win
  // (kAuto: clearly; kAlways: wherever they run); the choice is kept in `cache`.
  Status ChooseHalves(std::shared_ptr<const GpuModel> tuned, GemmTuning& tuning, AlgoCache& cache,
                      int* from_cache);
  // Tune's: GEMM step `s` of `tuning` at bucket `b` with the kernel tuning chose for it;
  // `gemm` is the step's cuBLASLt descriptor at `rows`, used when that kernel is cuBLASLt.
  Status RunTunedStep(const GemmTuning& tuning, std::size_t s, std::size_t b, const Gemm& gemm,
                      std::int64_t rows);
  Result<std::optional<ChainRun>> TimeChain(const GemmTuning& tuning, std::size_t first,
                                            std::size_t last, std::size_t bucket, bool always);
  Status RunEmbed(const EmbedStep& step, std::size_t bucket);
  GemmOperands Operands(const GpuModel& model, const GemmStep& step,
                        std::int64_t first_row = 0) const;
  Result<cublasLtMatmulAlgo_t> ChooseAlgo(const GpuModel& model, const GemmStep& step,
                                          std::int64_t rows, GemmSearch search, AlgoCache& cache,
                                          int* from_cache);
  Result<GemmKernel> ChooseKernel(const GemmStep& step, std::int64_t rows,
                                  const cublasLtMatmulAlgo_t& algo, AlgoCache& cache,
                                  int* from_cache, std::optional<GemmKernel>* alternative);
  void* Value(plan::ValueId id) const { return values_[static_cast<std::size_t>(id)].data(); }
  // Row `row` of value `id` (width from the plan, the storage dtype).
  void* ValueRow(plan::ValueId id, std::int64_t row) const;

  std::shared_ptr<const GpuModel> model_;
  Stream stream_;
  LtHandle handle_;
  DeviceBuffer workspace_;
  // [step][bucket]: the workspace bytes each GEMM's algorithm needs (tuned models only).
  std::vector<std::vector<std::size_t>> workspace_needed_;
  // The counter slots (count 0: none): the instance's stream takes the first half of them, the
  // side stream the second; next_slot_ is each lane's next one during a recording capture.
  DeviceBuffer counter_slot_buffer_;
  CounterSlots counter_slots_;
  std::size_t counter_slot_lanes_ = 0;
  std::array<std::size_t, 2> next_slot_{};
  bool recording_workspace_calls_ = false;
  std::vector<CapturedWorkspaceCall> captured_workspace_calls_;
  int consolidated_memsets_ = 0;
  // two_stream_halves' second stream, its cuBLASLt workspace, and the events where the
  // streams part and meet; created only for a model that runs halves (and by Tune).
  Stream side_stream_;
  DeviceBuffer side_workspace_;
  Event part_;
  Event meet_;
  bool halves_on_one_stream_ = false;
  std::vector<DeviceBuffer> values_;
  DeviceBuffer input_io_;   // only when the input dtype differs from the compute dtype
  DeviceBuffer output_io_;  // likewise for the output
  DeviceBuffer token_ids_;  // a token-id plan's three int32 inputs
  std::vector<std::vector<Gemm>> gemms_;  // [step][bucket]; empty for non-GEMM steps
  std::optional<AttentionBatch> attention_batch_;  // only for a model with attention or pooling
  // Own kernels by programmatic dependent launch: the option not off, on sm_90 or newer (a
  // pass then asks Programmatic(bucket)).
  bool programmatic_ = false;
  int sm_major_ = 0;     // the device's compute capability
  int sm_count_ = 0;     // the device's multiprocessors: the layer-chain kernel's grid
  DeviceBuffer chain_scratch_;  // the layer-chain kernel's counters and partial sums; zeroed
  // The split-K GEMM + LayerNorm schedule's row-tile counters (norm_gemm.h): zeroed, and zero
  // again after each launch; its launches are on stream_ only, so never overlap.
  DeviceBuffer norm_counters_;
  DeviceBuffer flush_;   // Tune's state only: overwritten to empty the L2 between timed runs
  std::string own_kernel_failure_;  // Tune's state only: why an own kernel first failed to run
  // Tune's state only: what the wide cuBLASLt search (gemm_search wide) did, for the load log.
  struct SearchTally {
    int shapes = 0;                  // GEMM shapes searched (not taken from the cache)
    int enumerated = 0;              // of them, those that enumerated cuBLASLt's configurations
    std::size_t configurations = 0;  // enumerated, summed over the shapes
    int beyond_heuristic = 0;        // shapes whose choice none of the heuristic's candidates is
    double seconds = 0;
  };
  SearchTally search_tally_;
  // Tune's state only: the wide search's finalists of the last two enumerating searches, by
  // GEMM widths (the shape's key without its rows), for the row counts between them.
  std::map<std::string, std::vector<std::vector<cublasLtMatmulAlgo_t>>> search_finalists_;
};

}  // namespace ltserve::gpu
