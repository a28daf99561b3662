#include "reference.h"

#include <cmath>
#include <type_traits>
#include <variant>

namespace ltserve::testing {
namespace {

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

}  // namespace

std::vector<double> ReferenceForward(const plan::Plan& plan, const std::vector<float>& input,
                                     std::int64_t rows, const Quantize& quantize) {
  std::vector<std::vector<double>> values(plan.values().size());
  values[plan.input()].assign(input.begin(), input.begin() + rows * plan.input_width());
  auto width = [&](plan::ValueId id) { return plan.values()[id].width; };
  for (const plan::Op& op : plan.ops()) {
    std::visit(
        [&](const auto& o) {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, plan::LinearOp>) {
            const auto& x = values[o.input];
            std::vector<double> y(rows * o.out_features);
            for (std::int64_t r = 0; r < rows; ++r) {
              for (std::int64_t n = 0; n < o.out_features; ++n) {
                double sum = o.bias.empty() ? 0.0 : quantize(o.bias[n]);
                for (std::int64_t k = 0; k < o.in_features; ++k) {
                  sum += x[r * o.in_features + k] * quantize(o.weight[n * o.in_features + k]);
                }
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
              double mean = 0, var = 0;
              for (std::int64_t c = 0; c < w; ++c) {
                const double v = values[o.input][r * w + c] +
                                 (o.residual != plan::kNoValue ? values[o.residual][r * w + c] : 0);
                y[r * w + c] = v;
                mean += v;
              }
              mean /= w;
              for (std::int64_t c = 0; c < w; ++c) var += (y[r * w + c] - mean) * (y[r * w + c] - mean);
              const double inv = 1 / std::sqrt(var / w + o.eps);
              for (std::int64_t c = 0; c < w; ++c) {
                double v = (y[r * w + c] - mean) * inv;
                if (!o.gamma.empty()) v *= o.gamma[c];
                if (!o.beta.empty()) v += o.beta[c];
                y[r * w + c] = v;
              }
            }
            values[o.output] = std::move(y);
          }
        },
        op);
  }
  return values[plan.output()];
}

}  // namespace ltserve::testing
