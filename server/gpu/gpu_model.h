// What one model is on the GPU, shared by all its instances: the options read from the model
// config, the plan lowered to steps (fused GEMMs and the kernels for what does not fuse), the
// packed device weights, the batch buckets and the algorithm chosen per GEMM and bucket.
//
// Create lowers and uploads an untuned model; DeviceState::Tune times the GEMMs on it and returns
// the tuned model (WithTuning), a new object sharing the uploaded weights.
//
// Thread-safety: immutable after Create; any number of instances read it concurrently.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/status.h"
#include "gpu/buckets.h"
#include "gpu/chain_gemm.h"
#include "model/model_spec.h"
#include "model/token_layout.h"
#include "gpu/cuda_resources.h"
#include "gpu/gemm.h"
#include "gpu/kernels.h"
#include "gpu/gemm_kernel.h"
#include "plan/plan.h"

namespace ltserve::gpu {

// The model's options (model/model_options.h) and what the GPU derives from the config and
// the plan: how many rows an instance holds and the dtypes and dims at its edges.
struct GpuModelOptions : ModelOptions {
  std::int64_t capacity_rows = 1;  // rows (samples or packed tokens) an instance is sized for
  // Sequences a batch of a pooled plan may hold (the rows after its PoolOp): max_batch_size.
  // 0 for a plan without pooling.
  std::int64_t capacity_sequences = 0;
  // I/O dtypes as the client sends and receives them; a token-id plan's inputs are the three
  // int32 arrays of model/token_layout.h instead, and input_type is unused.
  ElemType input_type = ElemType::kFp32;
  ElemType output_type = ElemType::kFp32;
  // Output dims after the batch dimension, as the config states them (else [width]).
  std::vector<std::int64_t> output_dims;
};

// From the spec's typed options and, for a token model, its layout (the executor's inputs and
// its token budget). INVALID_ARGUMENT for I/O the GPU executor cannot serve.
Result<GpuModelOptions> DeriveGpuOptions(const plan::Plan& plan, const ModelSpec& spec,
                                         const std::optional<TokenLayout>& tokens);

constexpr std::size_t kNoOffset = static_cast<std::size_t>(-1);

// A Linear: one cuBLASLt matmul, then (only when something did not fuse) a pointwise step
// over its output applying what is left of bias, residual and activation.
struct GemmStep {
  plan::ValueId input = plan::kNoValue;
  plan::ValueId output = plan::kNoValue;
  plan::ValueId residual = plan::kNoValue;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::size_t weight_offset = kNoOffset;
  std::size_t bias_offset = kNoOffset;
  plan::Activation activation = plan::Activation::kNone;
  bool fused = true;          // bias and residual in the matmul; false: plain matmul + pointwise
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  plan::Activation after = plan::Activation::kNone;  // activation left for the pointwise step
  bool needs_pointwise = false;

  // The activation the whole layer computes (the GELU form the model's options chose).
  plan::Activation Effective(GeluMode gelu) const {
    return activation == plan::Activation::kGeluErf && gelu == GeluMode::kTanhEpilogue
               ? plan::Activation::kGeluTanh
               : activation;
  }

  GemmShape Shape(std::int64_t rows) const {
    return GemmShape{rows, n, k, epilogue, fused && residual != plan::kNoValue};
  }
};

// Sets the step's epilogue from its activation and `fused`, and what is left to the
// pointwise step after the matmul.
void ChooseEpilogue(GemmStep& step, GeluMode gelu);

// out = act(in + residual): a standalone activation, an Add, or both.
struct PointwiseStep {
  plan::ValueId input = plan::kNoValue;
  plan::ValueId residual = plan::kNoValue;
  plan::ValueId output = plan::kNoValue;
  plan::Activation activation = plan::Activation::kNone;
};

struct LayerNormStep {
  plan::ValueId input = plan::kNoValue;
  plan::ValueId residual = plan::kNoValue;
  plan::ValueId output = plan::kNoValue;
  std::size_t gamma_offset = kNoOffset;  // fp32
  std::size_t beta_offset = kNoOffset;   // fp32
  float eps = 1e-5f;
};

// Fused self-attention over each sequence of the batch (attention.h).
struct AttentionStep {
  plan::ValueId qkv = plan::kNoValue;
  plan::ValueId output = plan::kNoValue;
  std::int64_t num_heads = 1;
  std::int64_t head_dim = 0;
};

// The embedding gather + LayerNorm of a token-id plan (token_kernels.h); writes the plan's
// input value from the executor's three int32 token inputs. Tables in the storage type,
// gamma and beta fp32.
struct EmbedStep {
  plan::ValueId output = plan::kNoValue;
  std::size_t word_offset = kNoOffset;
  std::size_t position_offset = kNoOffset;
  std::size_t type_offset = kNoOffset;  // kNoOffset: no token-type table
  std::int64_t vocab_size = 0;
  std::int64_t max_positions = 0;
  std::int64_t type_vocab_size = 0;
  std::size_t gamma_offset = kNoOffset;
  std::size_t beta_offset = kNoOffset;
  float eps = 1e-12f;
};

// Token rows to one row per sequence, from the batch's sequence table (attention_batch.h).
struct PoolStep {
  plan::ValueId input = plan::kNoValue;
  plan::ValueId output = plan::kNoValue;
  plan::Pooling pooling = plan::Pooling::kMean;
  float empty_value = 0.0f;
};

struct L2NormalizeStep {
  plan::ValueId input = plan::kNoValue;
  plan::ValueId output = plan::kNoValue;
  float eps = 1e-12f;
};

// Lower makes one step per plan op, in order, and tuning keeps them: step s is plan op s.
using Step = std::variant<GemmStep, PointwiseStep, LayerNormStep, AttentionStep, EmbedStep,
                          PoolStep, L2NormalizeStep>;

// GEMM steps first_step..last_step run at a bucket as one launch of the layer-chain kernel
// (chain_gemm.h) with `config`.
struct ChainRun {
  std::size_t first_step = 0;
  std::size_t last_step = 0;
  ChainGemmConfig config;
};

// Where the layer-chain kernel could take over: each maximal run of at least kChainMinLayers
// consecutive GEMM steps (at most kChainMaxLayers, the rest starting a run of its own) in
// which every step reads the step before's output and no residual is written inside the run.
// As (first_step, last_step) pairs, in step order.
std::vector<std::pair<std::size_t, std::size_t>> ChainableRuns(const std::vector<Step>& steps);

// Where the GEMM + LayerNorm kernel (norm_gemm.h) could take over: each GEMM step s whose
// output only the LayerNorm step s + 1 reads (it is not `plan_output`, nor any other step's
// input), with no activation of its own and a residual in at most one of the two (the kernel
// adds it before the statistics either way). In step order.
std::vector<std::size_t> LayerNormFusableGemms(const std::vector<Step>& steps,
                                               plan::ValueId plan_output);

constexpr std::size_t kNoHalf = static_cast<std::size_t>(-1);

// What tuning chose for a model: its steps (a layer cuBLASLt cannot fuse comes back as matmul +
// pointwise), and per GEMM step and bucket the cuBLASLt algorithm and the kernel that runs;
// notes for the load log.
struct GemmTuning {
  std::vector<Step> steps;
  std::vector<std::vector<cublasLtMatmulAlgo_t>> algos;  // [step][bucket], GEMM steps only
  // [step][bucket], GEMM steps only; kNormGemm: the step and the LayerNorm step after it
  std::vector<std::vector<GemmKernel>> kernels;
  std::vector<std::vector<ChainRun>> chains;              // [bucket], in step order; may be empty
  // [step][bucket], LayerNorm steps the streaming schedule takes (empty for other steps).
  std::vector<std::vector<LayerNormSchedule>> layer_norm_schedules;
  // [bucket]: the bucket whose kernels each half runs where the bucket's row-local steps run
  // as two halves on two streams (two_stream_halves), else kNoHalf. Empty: none anywhere.
  std::vector<std::size_t> half_buckets;
  // [bucket]: true where programmatic_launch auto found the bucket's pass clearly faster with
  // its own kernels launched ordinarily. Empty: none.
  std::vector<bool> ordinary_launch;
  std::vector<std::string> notes;
};

class GpuModel {
 public:
  // Lowers and uploads; choosing the algorithms (which needs instance-sized buffers) is
  // DeviceState::Tune's. `tokens` is the layout of a token plan (required for one).
  static Result<std::shared_ptr<const GpuModel>> Create(std::shared_ptr<const plan::Plan> plan,
                                                        const ModelSpec& spec,
                                                        const std::optional<TokenLayout>& tokens);
  // The tuned model: this one's plan, options and weights with `tuning`'s steps and algorithms.
  std::shared_ptr<const GpuModel> WithTuning(GemmTuning tuning) const;
  // True for a model WithTuning made: Algo and Kernel answer for every GEMM step and bucket.
  bool tuned() const { return tuned_; }

  const plan::Plan& plan() const { return *plan_; }
  const GpuModelOptions& options() const { return options_; }
  const std::vector<Step>& steps() const { return steps_; }
  // Rows (tokens for a token plan) each bucket computes.
  const std::vector<std::int64_t>& buckets() const { return buckets_; }
  // Index of the smallest bucket holding `rows` (rows <= capacity_rows) and, for a pooled
  // plan, `sequences` (<= capacity_sequences).
  std::size_t BucketFor(std::int64_t rows, std::int64_t sequences = 0) const;
  // Sequences each bucket of a pooled plan computes after the pooling (a graph's shapes are
  // fixed: BucketSequences of capacity_sequences). Empty for a plan without pooling.
  const std::vector<std::int64_t>& bucket_sequences() const { return bucket_sequences_; }
  // Rows step `step` computes at `bucket`: the bucket's sequences after the pooling, else its
  // rows.
  std::int64_t StepRows(std::size_t step, std::size_t bucket) const {
    return step > plan_->pool_index() ? bucket_sequences_[bucket] : buckets_[bucket];
  }
  // Rows the plan's output has at `bucket`.
  std::int64_t OutputRows(std::size_t bucket) const {
    return plan_->output_per_sequence() ? bucket_sequences_[bucket] : buckets_[bucket];
  }
  // Rows the buffer of value `id` needs: capacity_sequences for one written after the
  // pooling, else capacity_rows.
  std::int64_t ValueCapacity(plan::ValueId id) const;
  const void* Weight(std::size_t offset) const {
    return offset == kNoOffset ? nullptr : static_cast<const std::byte*>(weights_->data()) + offset;
  }
  const cublasLtMatmulAlgo_t& Algo(std::size_t step, std::size_t bucket) const {
    return algos_[step][bucket];
  }
  // The kernel that runs GEMM step `step` at `bucket`.
  const GemmKernel& Kernel(std::size_t step, std::size_t bucket) const {
    return kernels_[step][bucket];
  }
  // The runs of GEMM steps that run as one layer-chain launch at `bucket`, in step order.
  const std::vector<ChainRun>& Chains(std::size_t bucket) const;
  // How LayerNorm step `step` walks its rows at `bucket`: kRowPerWarp unless tuning chose.
  LayerNormSchedule NormSchedule(std::size_t step, std::size_t bucket) const {
    return step < layer_norm_schedules_.size() && bucket < layer_norm_schedules_[step].size()
               ? layer_norm_schedules_[step][bucket]
               : LayerNormSchedule::kRowPerWarp;
  }
  // Whether step `step` computes each row from that row alone, so that a bucket's rows may be
  // cut anywhere and the parts run apart: GEMMs, pointwise steps and LayerNorms before any
  // pooling (attention reads whole sequences; the embedding step, the token inputs' layout).
  bool RowLocal(std::size_t step) const;
  // Where two_stream_halves could take bucket `bucket`: the bucket of exactly half its rows,
  // provided both run no layer chain and the half bucket runs every GEMM step alone (no
  // GEMM + LayerNorm kernel), and the plan has a row-local step; else kNoHalf. Asked of the
  // model whose chains and kernels tuning has already chosen.
  std::size_t HalfBucketCandidate(std::size_t bucket) const;
  // The bucket each half of `bucket` runs as, where tuning chose two_stream_halves; kNoHalf:
  // the bucket runs whole.
  std::size_t HalfBucket(std::size_t bucket) const {
    return bucket < half_buckets_.size() ? half_buckets_[bucket] : kNoHalf;
  }
  // Whether the executor's own kernels at `bucket` are launched programmatically (on Hopper and
  // newer, which DeviceState checks): programmatic_launch, and at kAuto the bucket's choice.
  bool ProgrammaticAt(std::size_t bucket) const {
    return options_.programmatic_launch != ProgrammaticLaunch::kOff &&
           !(bucket < ordinary_launch_.size() && ordinary_launch_[bucket]);
  }
  // One line per decision worth a log line (unfused layers, cache use), for Describe().
  const std::vector<std::string>& notes() const { return notes_; }
  int fused_gemms() const;
  int gemms() const;
  bool has_attention() const;

 private:
  GpuModel() = default;
  GpuModel(const GpuModel&) = default;  // WithTuning's copy; the weights are shared
  Status Lower();
  Status Upload();

  std::shared_ptr<const plan::Plan> plan_;
  GpuModelOptions options_;
  std::vector<Step> steps_;
  std::vector<std::int64_t> buckets_;
  std::vector<std::int64_t> bucket_sequences_;  // pooled plans only
  std::vector<std::uint8_t> value_per_sequence_;  // [value]: written after the pooling
  std::vector<std::byte> host_weights_;  // packed, freed after upload
  std::shared_ptr<const DeviceBuffer> weights_;
  std::vector<std::vector<cublasLtMatmulAlgo_t>> algos_;  // [step][bucket], GEMM steps only
  std::vector<std::vector<GemmKernel>> kernels_;          // [step][bucket], GEMM steps only
  std::vector<std::vector<ChainRun>> chains_;             // [bucket]; empty: none anywhere
  std::vector<std::vector<LayerNormSchedule>> layer_norm_schedules_;  // as GemmTuning's
  std::vector<std::size_t> half_buckets_;                             // as GemmTuning's
  std::vector<bool> ordinary_launch_;                                 // as GemmTuning's
  std::vector<std::string> notes_;
  bool tuned_ = false;
};

}  // namespace ltserve::gpu
