// A BERT-base-sized nn.TransformerEncoder (d 768, 12 heads, ffn 3072, 12 layers, GELU, post-norm)
// on the GPU: ltserve's executor (packed tokens, fused attention, cuBLASLt with fused bias,
// residual and GELU) against libtorch running the same scripted module in bf16 (its TorchScript
// forward, what a libtorch server runs), and the hardware floor, at sequence length 128.
// Prints one markdown table.
//
// Usage: ltserve_gpu_encoder_bench MODEL_DIR [max_batch]   (MODEL_DIR/encoder.pt from
// bench/export_bench_models.py)
#include <torch/script.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "gpu/gpu_executor.h"

namespace {

using namespace ltserve_bench;
namespace plan = ltserve::plan;

constexpr std::int64_t kSeq = 128;

torch::jit::Module Child(const torch::jit::Module& module, const std::string& name) {
  return module.attr(name).toModule();
}
std::vector<float> Param(const torch::jit::Module& module, const std::string& name) {
  return ToFloats(module.attr(name).toTensor());
}

// Bench-local lowering of a post-norm encoder stack (the server's loader is server/torch):
// per layer qkv = in_proj(x); a = attention(qkv); h = out_proj(a) + x; x1 = norm1(h);
// f = gelu(linear1(x1)); g = linear2(f) + x1; x = norm2(g).
std::shared_ptr<plan::Plan> LowerEncoder(const torch::jit::Module& encoder, std::int64_t d,
                                         std::int64_t heads) {
  auto p = std::make_shared<plan::Plan>();
  plan::ValueId x = p->AddValue("input", d);
  p->SetInput(x, plan::InputKind::kTokens);
  auto linear = [&](const torch::jit::Module& m, const std::string& w, const std::string& b,
                    plan::ValueId in, plan::ValueId residual, plan::Activation act,
                    const std::string& name) {
    plan::LinearOp op;
    auto weight = m.attr(w).toTensor();
    op.out_features = weight.size(0);
    op.in_features = weight.size(1);
    op.weight = ToFloats(weight);
    op.bias = Param(m, b);
    op.input = in;
    op.residual = residual;
    op.activation = act;
    op.output = p->AddValue(name, op.out_features);
    const plan::ValueId out = op.output;
    p->Append(std::move(op));
    return out;
  };
  auto norm = [&](const torch::jit::Module& m, plan::ValueId in, const std::string& name) {
    plan::LayerNormOp op;
    op.input = in;
    op.gamma = Param(m, "weight");
    op.beta = Param(m, "bias");
    op.eps = static_cast<float>(m.attr("eps").toDouble());
    op.output = p->AddValue(name, d);
    const plan::ValueId out = op.output;
    p->Append(std::move(op));
    return out;
  };
  int index = 0;
  for (const auto& layer : Child(encoder, "layers").named_children()) {
    const std::string n = "layers." + std::to_string(index++);
    const auto attn = Child(layer.value, "self_attn");
    const plan::ValueId qkv =
        linear(attn, "in_proj_weight", "in_proj_bias", x, plan::kNoValue, plan::Activation::kNone, n + ".qkv");
    plan::AttentionOp attention;
    attention.qkv = qkv;
    attention.num_heads = heads;
    attention.head_dim = d / heads;
    attention.output = p->AddValue(n + ".attn", d);
    const plan::ValueId a = attention.output;
    p->Append(std::move(attention));
    const plan::ValueId h = linear(Child(attn, "out_proj"), "weight", "bias", a, x,
                                   plan::Activation::kNone, n + ".attn_out");
    const plan::ValueId x1 = norm(Child(layer.value, "norm1"), h, n + ".norm1");
    const plan::ValueId f = linear(Child(layer.value, "linear1"), "weight", "bias", x1,
                                   plan::kNoValue, plan::Activation::kGeluErf, n + ".ffn1");
    const plan::ValueId g = linear(Child(layer.value, "linear2"), "weight", "bias", f, x1,
                                   plan::Activation::kNone, n + ".ffn2");
    x = norm(Child(layer.value, "norm2"), g, n + ".norm2");
  }
  p->SetOutput(x);
  return p;
}

// Where an eager (not graph-replayed) forward pass spends its time, per kind of step: what
// tells a slow kernel from launch gaps when the graph time misses the floor.
void PrintStepBreakdown(ltserve::ExecutorInstance& instance, std::int64_t max_batch) {
  std::printf("\nPer-step device time of one eager forward pass (µs, summed per kind of step; "
              "events between steps, so launch gaps are included):\n\n");
  std::printf("| batch | gemm | attention | layernorm | pointwise | total |\n|---:|---:|---:|---:|---:|---:|\n");
  for (std::int64_t batch : {std::int64_t{1}, std::int64_t{8}, std::int64_t{32}, std::int64_t{128}}) {
    if (batch > max_batch) break;
    std::vector<std::int32_t> lengths(static_cast<std::size_t>(batch), static_cast<std::int32_t>(kSeq));
    auto steps = ltserve::GpuProfileTokenForward(instance, lengths, 10);
    if (!steps.ok()) {
      std::fprintf(stderr, "profile: %s\n", steps.status().ToString().c_str());
      return;
    }
    std::map<std::string, double> per_kind;
    double total = 0;
    for (const auto& step : steps.value()) {
      per_kind[step.kind] += step.us;
      total += step.us;
    }
    std::printf("| %ld | %.1f | %.1f | %.1f | %.1f | %.1f |\n", static_cast<long>(batch),
                per_kind["gemm"], per_kind["attention"], per_kind["layernorm"],
                per_kind["pointwise"], total);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [max_batch]\n", argv[0]);
    return 2;
  }
  std::string reason;
  if (!ltserve::GpuAvailable(&reason) || !torch::cuda::is_available()) {
    std::fprintf(stderr, "no GPU: %s\n", reason.c_str());
    return 0;
  }
  const std::int64_t max_batch = argc > 2 ? std::stoll(argv[2]) : 128;
  constexpr std::int64_t d = 768, heads = 12;
  try {
    c10::InferenceMode inference;
    auto module = torch::jit::load(std::string(argv[1]) + "/encoder.pt");
    module.eval();
    auto p = LowerEncoder(module, d, heads);
    if (auto status = p->Validate(); !status.ok()) {
      std::fprintf(stderr, "plan: %s\n", status.ToString().c_str());
      return 1;
    }
    module.to(torch::kCUDA, torch::kBFloat16);
    ltserve::ModelSpec spec;
    spec.name = "encoder";
    spec.max_batch_size = static_cast<int>(max_batch);
    spec.inputs = {{"x", ltserve::DataType::kBf16, {-1, d}}};
    spec.outputs = {{"y", ltserve::DataType::kBf16, {-1, d}}};
    spec.parameters["precision"] = "bf16";
    spec.parameters["max_tokens_per_batch"] = std::to_string(max_batch * kSeq);
    const auto load_start = Clock::now();
    auto factory = ltserve::CreateGpuExecutorFactory(p, spec);
    if (!factory.ok()) {
      std::fprintf(stderr, "factory: %s\n", factory.status().ToString().c_str());
      return 1;
    }
    auto instance = factory.value()->CreateInstance(0);
    if (!instance.ok()) {
      std::fprintf(stderr, "instance: %s\n", instance.status().ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "encoder: loaded in %.1f s: %s\n",
                 std::chrono::duration<double>(Clock::now() - load_start).count(),
                 factory.value()->Describe().c_str());

    const double peak = MeasurePeakTflops();
    const double copy = MeasureCopyTBps();
    // Attention adds 4·seq·d FLOPs per token (q·kᵀ and p·v) to the projections' FlopsPerRow.
    const double flops_per_token = p->FlopsPerRow() + 4.0 * kSeq * d;
    const double weight_bytes = static_cast<double>(p->WeightBytes(2));
    std::printf("measured: bf16 matmul peak %.0f TFLOP/s, copy %.2f TB/s; seq %ld, %.0f MB bf16 weights\n\n",
                peak, copy, static_cast<long>(kSeq), weight_bytes / 1e6);
    std::printf("| batch | tokens | floor µs | ltserve graph µs | libtorch TorchScript µs | TorchScript / ltserve | ltserve / floor |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
    const auto options = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
    for (std::int64_t batch = 1; batch <= max_batch; batch *= (batch < 8 ? 8 : 4)) {
      std::vector<std::int32_t> lengths(static_cast<std::size_t>(batch), static_cast<std::int32_t>(kSeq));
      const int iterations = batch >= 32 ? 20 : 50;
      std::vector<double> ours;
      for (int r = 0; r < kRounds; ++r) {
        auto us = ltserve::GpuTimeTokenForward(*instance.value(), lengths, iterations);
        if (!us.ok()) {
          std::fprintf(stderr, "ltserve: %s\n", us.status().ToString().c_str());
          return 1;
        }
        ours.push_back(us.value());
      }
      const double ltserve_us = Median(ours);
      auto x = torch::randn({batch, kSeq, d}, options);
      std::vector<torch::jit::IValue> args{x};
      const double torch_us = MedianUs([&] { (void)module.forward(args); }, iterations);
      const double tokens = static_cast<double>(batch * kSeq);
      const double floor_us = std::max(flops_per_token * tokens / (peak * 1e6),
                                       (weight_bytes + 4.0 * tokens * d) / (copy * 1e6));
      std::printf("| %ld | %.0f | %.1f | %.1f | %.1f | %.2f | %.2f |\n", static_cast<long>(batch),
                  tokens, floor_us, ltserve_us, torch_us, torch_us / ltserve_us, ltserve_us / floor_us);
      std::fflush(stdout);
    }
    PrintStepBreakdown(*instance.value(), max_batch);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench failed: %s\n", error.what());
    return 1;
  }
}
