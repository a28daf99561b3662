#include "reference.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <type_traits>
#include <variant>

namespace ltserve::testing {

double Activate(plan::Activation act, double x) {
  switch (act) {
    case plan::Activation::kNone: return x;
    case plan::Activation::kRelu: return x < 0 ? 0 : x;
    case plan::Activation::kGeluErf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case plan::Activation::kGeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case plan::Activation::kSilu: return x / (1 + std::exp(-x));
    case plan::Activation::kTanh: return std::tanh(x);
    case plan::Activation::kSigmoid: return 1 / (1 + std::exp(-x));
  }
  return x;
}

namespace {

// Self-attention of one sequence of `length` tokens starting at row `first`, straight from
// the definition: every score, a max-shifted softmax, then the weighted sum of values.
void AttendSequence(const plan::AttentionOp& op, const std::vector<double>& qkv,
                    std::int64_t first, std::int64_t length, std::vector<double>& out) {
  const std::int64_t d = op.num_heads * op.head_dim;
  const double scale = 1 / std::sqrt(static_cast<double>(op.head_dim));
  std::vector<double> p(length);
  for (std::int64_t h = 0; h < op.num_heads; ++h) {
    for (std::int64_t t = first; t < first + length; ++t) {
      const double* q = &qkv[t * 3 * d + h * op.head_dim];
      double max_score = -INFINITY;
      for (std::int64_t j = 0; j < length; ++j) {
        const double* k = &qkv[(first + j) * 3 * d + d + h * op.head_dim];
        double dot = 0;
        for (std::int64_t i = 0; i < op.head_dim; ++i) dot += q[i] * k[i];
        p[j] = dot * scale;
        max_score = std::max(max_score, p[j]);
      }
      double sum = 0;
      for (double& v : p) sum += (v = std::exp(v - max_score));
      for (std::int64_t i = 0; i < op.head_dim; ++i) {
        double acc = 0;
        for (std::int64_t j = 0; j < length; ++j) {
          acc += p[j] * qkv[(first + j) * 3 * d + 2 * d + h * op.head_dim + i];
        }
        out[t * d + h * op.head_dim + i] = acc / sum;
      }
    }
  }
}

// LayerNorm of `row` in place (statistics over the row), then gamma and beta where given.
void Normalize(double* row, std::int64_t w, double eps, const std::vector<float>& gamma,
               const std::vector<float>& beta) {
  double mean = 0, var = 0;
  for (std::int64_t c = 0; c < w; ++c) mean += row[c];
  mean /= w;
  for (std::int64_t c = 0; c < w; ++c) var += (row[c] - mean) * (row[c] - mean);
  const double inv = 1 / std::sqrt(var / w + eps);
  for (std::int64_t c = 0; c < w; ++c) {
    double v = (row[c] - mean) * inv;
    if (!gamma.empty()) v *= gamma[c];
    if (!beta.empty()) v += beta[c];
    row[c] = v;
  }
}

std::vector<double> Embed(const plan::EmbeddingOp& op, std::int64_t w, const TokenIdInputs& in,
                          const Quantize& quantize) {
  const std::size_t tokens = in.ids.size();
  std::vector<double> y(tokens * w);
  for (std::size_t t = 0; t < tokens; ++t) {
    double* row = &y[t * w];
    for (std::int64_t c = 0; c < w; ++c) {
      row[c] = quantize(op.word.at(in.ids[t] * w + c)) +
               quantize(op.position.at(in.positions[t] * w + c)) +
               (op.token_type.empty() ? 0.0 : quantize(op.token_type.at(in.types[t] * w + c)));
    }
    Normalize(row, w, op.eps, op.gamma, op.beta);
  }
  return y;
}

std::vector<double> Pool(const plan::PoolOp& op, std::int64_t w, const std::vector<double>& x,
                         std::span<const std::int32_t> lengths) {
  std::vector<double> y(lengths.size() * w);
  std::int64_t first = 0;
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    const std::int64_t length = lengths[s];
    for (std::int64_t c = 0; c < w; ++c) {
      double v = 0;
      if (op.pooling == plan::Pooling::kFirst) {
        v = length > 0 ? x[first * w + c] : 0;
      } else if (op.pooling == plan::Pooling::kMean) {
        for (std::int64_t t = first; t < first + length; ++t) v += x[t * w + c];
        v = length > 0 ? v / length : 0;
      } else {
        v = length > 0 ? -INFINITY : op.empty_value;
        for (std::int64_t t = first; t < first + length; ++t) v = std::max(v, x[t * w + c]);
      }
      y[s * w + c] = v;
    }
    first += length;
  }
  return y;
}

std::vector<double> Run(const plan::Plan& plan, std::vector<std::vector<double>>& values,
                        std::int64_t rows, const Quantize& quantize,
                        std::span<const std::int32_t> sequence_lengths) {
  auto width = [&](plan::ValueId id) { return plan.values()[id].width; };
  for (const plan::Op& op : plan.ops()) {
    std::visit(
        [&](const auto& o) {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, plan::PoolOp>) {
            values[o.output] = Pool(o, width(o.input), values[o.input], sequence_lengths);
            rows = std::ssize(sequence_lengths);  // one row per sequence from here on
          } else if constexpr (std::is_same_v<T, plan::L2NormalizeOp>) {
            const std::int64_t w = width(o.input);
            std::vector<double> y = values[o.input];
            for (std::int64_t r = 0; r < rows; ++r) {
              double sq = 0;
              for (std::int64_t c = 0; c < w; ++c) sq += y[r * w + c] * y[r * w + c];
              const double norm = std::max(std::sqrt(sq), static_cast<double>(o.eps));
              for (std::int64_t c = 0; c < w; ++c) y[r * w + c] /= norm;
            }
            values[o.output] = std::move(y);
          } else if constexpr (std::is_same_v<T, plan::LinearOp>) {
            const auto& x = values[o.input];
            std::vector<double> w(o.weight.size());  // quantized once, not per row
            for (std::size_t i = 0; i < w.size(); ++i) w[i] = quantize(o.weight[i]);
            std::vector<double> y(rows * o.out_features);
            for (std::int64_t r = 0; r < rows; ++r) {
              for (std::int64_t n = 0; n < o.out_features; ++n) {
                double sum = o.bias.empty() ? 0.0 : quantize(o.bias[n]);
                const double* x_row = &x[r * o.in_features];
                const double* w_row = &w[n * o.in_features];
                for (std::int64_t k = 0; k < o.in_features; ++k) sum += x_row[k] * w_row[k];
                if (o.residual != plan::kNoValue) sum += values[o.residual][r * o.out_features + n];
                y[r * o.out_features + n] = Activate(o.activation, sum);
              }
            }
            values[o.output] = std::move(y);
          } else if constexpr (std::is_same_v<T, plan::ActivationOp>) {
            std::vector<double> y = values[o.input];
            for (double& v : y) v = Activate(o.activation, v);
            values[o.output] = std::move(y);
          } else if constexpr (std::is_same_v<T, plan::AddOp>) {
            std::vector<double> y = values[o.a];
            for (std::size_t i = 0; i < y.size(); ++i) y[i] += values[o.b][i];
            values[o.output] = std::move(y);
          } else if constexpr (std::is_same_v<T, plan::LayerNormOp>) {
            const std::int64_t w = width(o.input);
            std::vector<double> y(rows * w);
            for (std::int64_t r = 0; r < rows; ++r) {
              for (std::int64_t c = 0; c < w; ++c) {
                y[r * w + c] = values[o.input][r * w + c] +
                               (o.residual != plan::kNoValue ? values[o.residual][r * w + c] : 0);
              }
              Normalize(&y[r * w], w, o.eps, o.gamma, o.beta);
            }
            values[o.output] = std::move(y);
          } else if constexpr (std::is_same_v<T, plan::AttentionOp>) {
            std::vector<double> y(rows * o.num_heads * o.head_dim);
            std::int64_t first = 0;
            for (std::int32_t length : sequence_lengths) {
              AttendSequence(o, values[o.qkv], first, length, y);
              first += length;
            }
            values[o.output] = std::move(y);
          }
        },
        op);
  }
  return values[plan.output()];
}

}  // namespace

std::vector<double> ReferenceForward(const plan::Plan& plan, const std::vector<float>& input,
                                     std::int64_t rows, const Quantize& quantize,
                                     std::span<const std::int32_t> sequence_lengths) {
  std::vector<std::vector<double>> values(plan.values().size());
  values[plan.input()].assign(input.begin(), input.begin() + rows * plan.input_width());
  return Run(plan, values, rows, quantize, sequence_lengths);
}

std::vector<double> ReferenceForward(const plan::Plan& plan, const TokenIdInputs& inputs,
                                     const Quantize& quantize,
                                     std::span<const std::int32_t> sequence_lengths) {
  std::vector<std::vector<double>> values(plan.values().size());
  values[plan.input()] = Embed(*plan.embedding(), plan.input_width(), inputs, quantize);
  return Run(plan, values, std::ssize(inputs.ids), quantize, sequence_lengths);
}

}  // namespace ltserve::testing
