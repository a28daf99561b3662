// One CPU instance: preallocated fp32 activations for max_rows rows (samples, or packed
// tokens) and the ops of the plan run over them with ATen's out= and in-place kernels.
// Attention is the exception: ATen's scaled_dot_product_attention returns new tensors.
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "cpu/cpu_model.h"
#include "model/token_layout.h"
#include "torch/aten_threads.h"
#include "torch/aten_util.h"

namespace ltserve::cpu {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t NanosSince(Clock::time_point start) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
}

void ActivateInPlace(at::Tensor& values, plan::Activation activation) {
  switch (activation) {
    case plan::Activation::kNone: return;
    case plan::Activation::kRelu: values.relu_(); return;
    case plan::Activation::kGeluErf: at::gelu_(values, "none"); return;
    case plan::Activation::kGeluTanh: at::gelu_(values, "tanh"); return;
    case plan::Activation::kSilu: at::silu_(values); return;
    case plan::Activation::kTanh: values.tanh_(); return;
    case plan::Activation::kSigmoid: values.sigmoid_(); return;
  }
}

std::optional<at::Tensor> Optional(const at::Tensor& tensor) {
  if (!tensor.defined()) return std::nullopt;
  return tensor;
}

// Thread-safety: not thread-safe; one scheduler worker drives an instance.
class CpuInstance : public ExecutorInstance {
 public:
  explicit CpuInstance(std::shared_ptr<const CpuModel> model) : model_(std::move(model)) {
    const plan::Plan& plan = *model_->plan;
    const std::int64_t rows = model_->max_rows;
    // After a PoolOp the rows are sequences, which may outnumber the tokens (empty rows).
    const std::int64_t value_rows = std::max(rows, model_->max_sequences);
    if (model_->token_ids) {
      staging_.resize(kTokenIdInputs * rows * sizeof(std::int32_t));
      embedding_scratch_ = at::empty({rows, plan.input_width()}, at::kFloat);
    } else {
      staging_.resize(rows * plan.input_width() * c10::elementSize(model_->input_dtype));
    }
    for (const plan::Value& value : plan.values()) {
      values_.push_back(at::empty({value_rows, value.width}, at::kFloat));
    }
    // fp32 input needs no conversion: the plan reads the staging buffer directly.
    if (model_->input_dtype == at::kFloat && !model_->token_ids) {
      values_[plan.input()] =
          at::from_blob(staging_.data(), {rows, plan.input_width()}, at::kFloat);
    }
    if (model_->output_dtype != at::kFloat) {
      converted_output_ = at::empty({value_rows, plan.output_width()}, model_->output_dtype);
    }
    norm_mean_ = at::empty({value_rows, 1}, at::kFloat);
    norm_rstd_ = at::empty({value_rows, 1}, at::kFloat);
  }

  Result<std::span<std::byte>> InputBuffer(std::size_t index, std::size_t bytes) override {
    if (model_->token_ids) return TokenIdBuffer(index, bytes);
    if (index != 0)
      return InvalidArgument("input index " + std::to_string(index) + " out of range");
    if (bytes > staging_.size()) {
      return InvalidArgument(std::to_string(bytes) + " input bytes exceed the " +
                             std::to_string(staging_.size()) + " a full batch holds");
    }
    return std::span<std::byte>(staging_.data(), bytes);
  }

  Status Execute(const BatchShape& shape, ExecuteTimings* timings) override {
    aten::FollowIntraOpThreads();
    rows_ = 0;
    executed_ = false;
    LTSERVE_ASSIGN_OR_RETURN(std::int64_t rows, RowsOf(shape));
    if (model_->plan->output_per_sequence() && shape.batch_size > model_->max_sequences) {
      return InvalidArgument(std::to_string(shape.batch_size) + " sequences exceed the " +
                             std::to_string(model_->max_sequences) + " an instance holds");
    }
    try {
      Clock::time_point start = Clock::now();
      const plan::Plan& plan = *model_->plan;
      if (model_->input_dtype != at::kFloat && !model_->token_ids) {
        at::Tensor raw =
            at::from_blob(staging_.data(), {rows, plan.input_width()}, model_->input_dtype);
        Rows(plan.input(), rows).copy_(raw);
      }
      if (timings != nullptr) timings->input_ns = NanosSince(start);

      start = Clock::now();
      // Ops from the pooling on run over one row per sequence.
      const std::size_t pool = plan.pool_index();
      for (std::size_t i = 0; i < plan.ops().size(); ++i) {
        const std::int64_t op_rows = i < pool ? rows : shape.batch_size;
        std::visit([&](const auto& op) { Run(op, model_->weights[i], op_rows); }, plan.ops()[i]);
      }
      if (plan.output_per_sequence()) rows = shape.batch_size;
      if (timings != nullptr) timings->infer_ns = NanosSince(start);

      start = Clock::now();
      if (converted_output_.defined()) {
        converted_output_.narrow(0, 0, rows).copy_(Rows(plan.output(), rows));
      }
      if (timings != nullptr) timings->output_ns = NanosSince(start);
    } catch (const std::exception& error) {
      return Internal("CPU plan execution failed: " + aten::ExceptionMessage(error));
    }
    rows_ = rows;
    executed_ = true;
    return Status::Ok();
  }

  std::span<const std::byte> Output(std::size_t index) const override {
    if (index != 0 || !executed_) return {};
    const at::Tensor& result =
        converted_output_.defined() ? converted_output_ : values_[model_->plan->output()];
    const std::size_t bytes = rows_ * model_->plan->output_width() * result.element_size();
    return {static_cast<const std::byte*>(result.const_data_ptr()), bytes};
  }

  std::vector<std::int64_t> OutputShape(std::size_t index) const override {
    if (index != 0 || !executed_) return {};
    if (model_->tokens) return {rows_, model_->plan->output_width()};  // tokens, or sequences
    std::vector<std::int64_t> shape = model_->output_dims;
    if (model_->has_batch_dim) shape.insert(shape.begin(), rows_);
    return shape;
  }

 private:
  Result<std::int64_t> RowsOf(const BatchShape& shape) {
    if (model_->tokens) return TokensOf(shape);
    if (!shape.sequence_lengths.empty()) {
      return InvalidArgument("the CPU plan executor takes rows, not token sequences");
    }
    if (!model_->has_batch_dim) {
      if (shape.batch_size > 1) return InvalidArgument("the model has no batch dimension");
      return std::int64_t{1};
    }
    if (shape.batch_size < 1 || shape.batch_size > model_->max_rows) {
      return InvalidArgument("batch of " + std::to_string(shape.batch_size) +
                             " rows; the model takes 1 to " + std::to_string(model_->max_rows));
    }
    return shape.batch_size;
  }

  // Also keeps the lengths for attention; the span is valid for this Execute only.
  Result<std::int64_t> TokensOf(const BatchShape& shape) {
    if (shape.batch_size < 1 ||
        shape.sequence_lengths.size() != static_cast<std::size_t>(shape.batch_size)) {
      return InvalidArgument("a token batch needs one sequence length per sample; got " +
                             std::to_string(shape.sequence_lengths.size()) + " for " +
                             std::to_string(shape.batch_size) + " samples");
    }
    // A sequence of 0 tokens (a request row that is all padding) is fine, and so is a batch of
    // them only: the ops then run over 0 rows and the output is [0, width].
    std::int64_t tokens = 0;
    for (std::int32_t length : shape.sequence_lengths) {
      if (length < 0) return InvalidArgument("a sequence length is negative");
      tokens += length;
    }
    if (tokens > model_->max_rows) {
      return InvalidArgument(std::to_string(tokens) + " tokens exceed the " +
                             std::to_string(model_->max_rows) + " an instance holds");
    }
    sequence_lengths_ = shape.sequence_lengths;
    return tokens;
  }

  at::Tensor Rows(plan::ValueId id, std::int64_t rows) { return values_[id].narrow(0, 0, rows); }

  Result<std::span<std::byte>> TokenIdBuffer(std::size_t index, std::size_t bytes) {
    const std::size_t each = staging_.size() / kTokenIdInputs;
    if (index >= kTokenIdInputs) {
      return InvalidArgument("input index " + std::to_string(index) + " out of range");
    }
    if (bytes > each) {
      return InvalidArgument(std::to_string(bytes) + " input bytes exceed the " +
                             std::to_string(each) + " a full batch holds");
    }
    return std::span<std::byte>(staging_.data() + index * each, bytes);
  }

  // Token-id input `index` of the current batch, as int64 indices for index_select.
  at::Tensor TokenIds(std::size_t index, std::int64_t rows) {
    const std::size_t each = staging_.size() / kTokenIdInputs;
    return at::from_blob(staging_.data() + index * each, {rows}, at::kInt);
  }

  // LayerNorm(word[id] + position[pos] + type[type]); the batcher checked every index.
  void Run(const plan::EmbeddingOp& op, const OpWeights& weights, std::int64_t rows) {
    at::Tensor out = Rows(op.output, rows);
    at::Tensor sum = embedding_scratch_.narrow(0, 0, rows);
    at::index_select_out(sum, weights.word, 0, TokenIds(kIdsInput, rows));
    at::index_select_out(out, weights.position, 0, TokenIds(kPositionInput, rows));
    sum.add_(out);
    if (weights.token_type.defined()) {
      at::index_select_out(out, weights.token_type, 0, TokenIds(kTypeInput, rows));
      sum.add_(out);
    }
    at::Tensor mean = norm_mean_.narrow(0, 0, rows);
    at::Tensor rstd = norm_rstd_.narrow(0, 0, rows);
    at::native_layer_norm_out(out, mean, rstd, sum, {out.size(1)}, Optional(weights.gamma),
                              Optional(weights.beta), op.eps);
  }

  // One output row per sequence of the packed token rows; `sequences` is the batch's count.
  void Run(const plan::PoolOp& op, const OpWeights&, std::int64_t sequences) {
    std::int64_t offset = 0;
    for (std::int64_t s = 0; s < sequences; ++s) {
      const std::int32_t length = sequence_lengths_[static_cast<std::size_t>(s)];
      at::Tensor row = values_[op.output].select(0, s);
      const at::Tensor tokens = values_[op.input].narrow(0, offset, length);
      offset += length;
      if (length == 0) {
        row.fill_(op.pooling == plan::Pooling::kMax ? op.empty_value : 0.0f);
        continue;
      }
      switch (op.pooling) {
        case plan::Pooling::kFirst: row.copy_(tokens.select(0, 0)); break;
        case plan::Pooling::kMean: at::mean_out(row, tokens, {0}); break;
        case plan::Pooling::kMax: at::amax_out(row, tokens, {0}); break;
      }
    }
  }

  void Run(const plan::L2NormalizeOp& op, const OpWeights&, std::int64_t rows) {
    at::Tensor norms = norm_mean_.narrow(0, 0, rows);
    at::linalg_vector_norm_out(norms, Rows(op.input, rows), 2, {1}, true);
    norms.clamp_min_(op.eps);
    at::Tensor out = Rows(op.output, rows);
    at::div_out(out, Rows(op.input, rows), norms);
  }

  void Run(const plan::LinearOp& op, const OpWeights& weights, std::int64_t rows) {
    at::Tensor out = Rows(op.output, rows);
    if (weights.bias.defined()) {
      at::addmm_out(out, weights.bias, Rows(op.input, rows), weights.weight_t);
    } else {
      at::mm_out(out, Rows(op.input, rows), weights.weight_t);
    }
    if (op.residual != plan::kNoValue) out.add_(Rows(op.residual, rows));
    ActivateInPlace(out, op.activation);
  }

  void Run(const plan::ActivationOp& op, const OpWeights&, std::int64_t rows) {
    at::Tensor out = Rows(op.output, rows);
    if (op.output != op.input) out.copy_(Rows(op.input, rows));
    ActivateInPlace(out, op.activation);
  }

  void Run(const plan::LayerNormOp& op, const OpWeights& weights, std::int64_t rows) {
    at::Tensor out = Rows(op.output, rows);
    const std::int64_t width = out.size(1);
    if (op.residual == plan::kNoValue) {
      at::Tensor mean = norm_mean_.narrow(0, 0, rows);
      at::Tensor rstd = norm_rstd_.narrow(0, 0, rows);
      at::native_layer_norm_out(out, mean, rstd, Rows(op.input, rows), {width},
                                Optional(weights.gamma), Optional(weights.beta), op.eps);
      return;
    }
    // LayerNorm(input + residual): the sum needs its own memory; rare enough to allocate.
    at::Tensor sum = Rows(op.input, rows) + Rows(op.residual, rows);
    out.copy_(
        at::layer_norm(sum, {width}, Optional(weights.gamma), Optional(weights.beta), op.eps));
  }

  void Run(const plan::AddOp& op, const OpWeights&, std::int64_t rows) {
    at::Tensor out = Rows(op.output, rows);
    at::add_out(out, Rows(op.a, rows), Rows(op.b, rows));
  }

  // Per sequence: the packed [tokens, 3d] rows viewed as [heads, len, head_dim] for q, k and v.
  void Run(const plan::AttentionOp& op, const OpWeights&, std::int64_t) {
    const std::int64_t heads = op.num_heads;
    const std::int64_t d = heads * op.head_dim;
    std::int64_t offset = 0;
    for (std::int32_t length : sequence_lengths_) {
      if (length == 0) continue;
      const at::Tensor qkv = values_[op.qkv].narrow(0, offset, length);
      auto part = [&](std::int64_t index) {
        return qkv.narrow(1, index * d, d).view({length, heads, op.head_dim}).transpose(0, 1);
      };
      const at::Tensor attended = at::scaled_dot_product_attention(part(0), part(1), part(2));
      values_[op.output]
          .narrow(0, offset, length)
          .view({length, heads, op.head_dim})
          .copy_(attended.transpose(0, 1));
      offset += length;
    }
  }

  std::shared_ptr<const CpuModel> model_;
  std::vector<std::byte> staging_;
  std::vector<at::Tensor> values_;  // one [max_rows, width] fp32 buffer per plan value
  at::Tensor converted_output_;     // the output in the configured dtype, when not fp32
  at::Tensor embedding_scratch_;    // token-id plans: the embedding sum before its norm
  at::Tensor norm_mean_;            // LayerNorm statistics and row norms, [rows, 1]
  at::Tensor norm_rstd_;
  std::int64_t rows_ = 0;  // rows of the last successful Execute (0 for a batch of no tokens)
  bool executed_ = false;  // the last Execute succeeded: Output and OutputShape are valid
  std::span<const std::int32_t> sequence_lengths_;  // token plans: the current batch's
};

}  // namespace

Result<std::unique_ptr<ExecutorInstance>> CreateCpuInstance(std::shared_ptr<const CpuModel> model) {
  try {
    return std::unique_ptr<ExecutorInstance>(new CpuInstance(std::move(model)));
  } catch (const std::exception& error) {
    return ResourceExhausted("allocating CPU instance buffers: " + aten::ExceptionMessage(error));
  }
}

}  // namespace ltserve::cpu
