#include "test_support.h"

#include "config/parameters.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "common/float16.h"

namespace ltserve::testing {

ModelOptions Options(const std::map<std::string, std::string>& parameters) {
  Result<ModelOptions> options = config::ParseModelOptions(parameters);
  EXPECT_TRUE(options.ok()) << options.status().ToString();
  return options.ok() ? *options : ModelOptions{};
}

std::mt19937& Rng() {
  static std::mt19937 rng = [] {
    const unsigned seed = std::random_device{}();
    std::printf("random seed %u\n", seed);
    return std::mt19937(seed);
  }();
  return rng;
}

std::vector<float> Random(std::size_t count, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> values(count);
  for (float& v : values) v = dist(Rng());
  return values;
}

plan::ValueId Builder::Value(std::int64_t width) {
  return plan->AddValue("v" + std::to_string(plan->values().size()), width);
}

plan::ValueId Builder::Linear(plan::ValueId in, std::int64_t out_features, bool bias,
                              plan::Activation act, plan::ValueId residual) {
  plan::LinearOp op;
  op.in_features = plan->values()[in].width;
  op.out_features = out_features;
  op.input = in;
  op.output = Value(out_features);
  op.residual = residual;
  op.weight = Random(op.in_features * out_features, 1.0f / std::sqrt(float(op.in_features)));
  if (bias) op.bias = Random(out_features, 0.5f);
  op.activation = act;
  plan->Append(op);
  return op.output;
}

plan::ValueId Builder::LayerNorm(plan::ValueId in, plan::ValueId residual) {
  const std::int64_t width = plan->values()[in].width;
  plan::LayerNormOp norm;
  norm.input = in;
  norm.residual = residual;
  norm.output = Value(width);
  norm.gamma = Random(width, 1.0f);
  norm.beta = Random(width, 0.5f);
  plan->Append(norm);
  return norm.output;
}

plan::ValueId Builder::Attention(plan::ValueId qkv, std::int64_t num_heads) {
  const std::int64_t width = plan->values()[qkv].width / 3;
  plan::AttentionOp op;
  op.qkv = qkv;
  op.output = Value(width);
  op.num_heads = num_heads;
  op.head_dim = width / num_heads;
  plan->Append(op);
  return op.output;
}

float RoundTo(float v, const std::string& precision) {
  if (precision == "bf16") return Bf16ToFloat(FloatToBf16(v));
  if (precision == "fp16") return Fp16ToFloat(FloatToFp16(v));
  return v;
}

void WriteInput(std::span<std::byte> buffer, const std::vector<float>& values, DataType io) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (io == DataType::kFp32) {
      std::memcpy(buffer.data() + 4 * i, &values[i], 4);
    } else {
      const std::uint16_t bits =
          io == DataType::kBf16 ? FloatToBf16(values[i]) : FloatToFp16(values[i]);
      std::memcpy(buffer.data() + 2 * i, &bits, 2);
    }
  }
}

std::vector<float> RunPoisoned(ExecutorInstance& instance, const plan::Plan& plan,
                               const std::vector<float>& input, std::int64_t rows, DataType io,
                               std::span<const std::int32_t> sequence_lengths) {
  const std::size_t in_bytes = input.size() * ElementSize(io);
  auto buffer = instance.InputBuffer(0, in_bytes);
  EXPECT_TRUE(buffer.ok()) << buffer.status().ToString();
  if (!buffer.ok()) return {};
  WriteInput(buffer.value(), std::vector<float>(input.size(), std::nanf("")), io);
  BatchShape shape;
  shape.batch_size = sequence_lengths.empty() ? rows : std::ssize(sequence_lengths);
  shape.sequence_lengths = sequence_lengths;
  EXPECT_TRUE(instance.Execute(shape, nullptr).ok());
  std::span<const std::byte> poisoned = instance.Output(0);
  std::memset(const_cast<std::byte*>(poisoned.data()), 0xff, poisoned.size());  // NaN bits

  WriteInput(buffer.value(), input, io);
  ExecuteTimings timings;
  const Status status = instance.Execute(shape, &timings);
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_GT(timings.infer_ns, 0u);
  EXPECT_EQ(instance.OutputShape(0), (std::vector<std::int64_t>{rows, plan.output_width()}));
  std::span<const std::byte> out = instance.Output(0);
  const std::size_t count = static_cast<std::size_t>(rows * plan.output_width());
  EXPECT_EQ(out.size(), count * ElementSize(io));
  if (out.size() != count * ElementSize(io)) return {};
  std::vector<float> result(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (io == DataType::kFp32) {
      std::memcpy(&result[i], out.data() + 4 * i, 4);
    } else {
      std::uint16_t bits;
      std::memcpy(&bits, out.data() + 2 * i, 2);
      result[i] = io == DataType::kBf16 ? Bf16ToFloat(bits) : Fp16ToFloat(bits);
    }
  }
  return result;
}

double RelativeError(const std::vector<float>& out, const std::vector<double>& ref) {
  if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(out[i])) return std::numeric_limits<double>::infinity();
    diff += (out[i] - ref[i]) * (out[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(diff / norm);
}

double RelativeDifference(const std::vector<float>& out, const std::vector<float>& ref) {
  return RelativeError(out, std::vector<double>(ref.begin(), ref.end()));
}

}  // namespace ltserve::testing
