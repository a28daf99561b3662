// A BERT-base-sized nn.TransformerEncoder (d 768, 12 heads, ffn 3072, 12 layers, GELU, post-norm)
// on the GPU: ltserve's executor (packed tokens, fused attention, cuBLASLt with fused bias,
// residual and GELU) against libtorch running the same scripted module in bf16 (its TorchScript
// forward, what a libtorch server runs), and the hardware floor, at sequence length 128; then
// the same layers with token ids in and mean pooling out (a Hugging Face BertModel's shape)
// against embeddings in, a per-step profile, and mixed lengths 16..512: ltserve's packed
// batches against libtorch on the same batches padded. Prints markdown tables.
//
// Usage: ltserve_gpu_encoder_bench MODEL_DIR [max_batch]   (MODEL_DIR/encoder.pt and
// encoder_nested.pt from bench/export_bench_models.py; max_batch × 128 is the token budget)
#include <cuda_profiler_api.h>
#include <torch/script.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "gpu/gpu_executor.h"
#include "gpu/gpu_factory.h"
#include "gpu_forward_timer.h"
#include "kernel_timeline.h"
#include "option_ab.h"

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
void PrintStepBreakdown(GpuForwardTimer& timer, std::int64_t max_batch) {
  std::printf("\nPer-step device time of one eager forward pass (µs, summed per kind of step; "
              "events between steps, so launch gaps are included):\n\n");
  std::printf("| batch | gemm | attention | layernorm | pointwise | total |\n|---:|---:|---:|---:|---:|---:|\n");
  for (std::int64_t batch : {std::int64_t{1}, std::int64_t{8}, std::int64_t{32}, std::int64_t{128}}) {
    if (batch > max_batch) break;
    std::vector<std::int32_t> lengths(static_cast<std::size_t>(batch), static_cast<std::int32_t>(kSeq));
    auto steps = timer.ProfileTokenForward(lengths, 10);
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
    std::string first_layer;  // the steps of layer 0, in plan order
    for (std::size_t s = 0; s < steps.value().size() && s < 7; ++s) {
      char entry[64];
      std::snprintf(entry, sizeof entry, "%s%s %.1f", s ? ", " : "", steps.value()[s].kind.c_str(),
                    steps.value()[s].us);
      first_layer += entry;
    }
    std::fprintf(stderr, "batch %ld, layer 0 steps (µs): %s\n", static_cast<long>(batch),
                 first_layer.c_str());
  }
}

// Mixed lengths: requests with sequence lengths uniform in [16, 512] (a fixed stream), in
// batches of N requests and in batches of as many as fit the token budget (what the scheduler
// packs). ltserve runs each batch packed, its real tokens only; libtorch runs the same batch
// padded to its longest sequence, as a padded server would: with a key-padding mask (on the
// module as exported, whose layers may take their fused fast path; and on the same weights with
// nested tensors enabled, where PyTorch drops the padding itself), and without a mask.
constexpr std::int64_t kMinLength = 16, kMaxLength = 512;
constexpr std::uint64_t kLengthSeed = 20261130;
constexpr int kMixedBatches = 8;  // batches per row: lengths vary, so a row averages several

struct MixedBatch {
  std::vector<std::int32_t> lengths;
  std::int64_t tokens = 0;   // real
  std::int64_t longest = 0;  // each sequence's padded length
  double floor_us = 0;       // the real tokens' FLOPs at the peak, or the weights' reads
  std::vector<torch::jit::IValue> masked, unmasked;
};

// kMixedBatches batches from the start of the stream: `per_batch` requests each in stream
// order, or (per_batch 0) as many as fit `budget` tokens, closed when the next request would
// overflow it, as the scheduler packs them.
std::vector<std::vector<std::int32_t>> FormBatches(const std::vector<std::int32_t>& stream,
                                                   std::int64_t per_batch, std::int64_t budget) {
  std::vector<std::vector<std::int32_t>> batches;
  std::vector<std::int32_t> current;
  std::int64_t tokens = 0;
  const auto close = [&] {
    batches.push_back(std::move(current));
    current.clear();
    tokens = 0;
    return static_cast<int>(batches.size()) == kMixedBatches;
  };
  for (const std::int32_t length : stream) {
    if (per_batch == 0 && tokens + length > budget && close()) break;
    current.push_back(length);
    tokens += length;
    if (per_batch > 0 && static_cast<std::int64_t>(current.size()) == per_batch && close()) break;
  }
  return batches;
}

std::int64_t AttentionLayers(const plan::Plan& p) {
  std::int64_t layers = 0;
  for (const auto& op : p.ops()) layers += std::holds_alternative<plan::AttentionOp>(op) ? 1 : 0;
  return layers;
}

std::string Cell(double value) {
  if (std::isnan(value)) return "n/a";
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", value);
  return text;
}

// Mean microseconds of one pass over every batch, back to back; NaN where libtorch refuses.
template <typename Forward>
double TimeBatches(std::vector<MixedBatch>& batches, Forward&& forward) {
  try {
    return MedianUs([&] {
      for (auto& batch : batches) forward(batch);
    }, 2);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "libtorch: %s\n", error.what());
    return std::nan("");
  }
}

// What a masked forward pass does with the padding: "drops" when it leaves the padded positions
// of the output at exactly zero (PyTorch's nested-tensor path), "computes" when it fills them.
std::string PaddingPath(torch::jit::Module& module, const MixedBatch& batch) {
  try {
    const auto out = module.forward(batch.masked).toTensor();
    for (std::size_t i = 0; i < batch.lengths.size(); ++i) {
      if (batch.lengths[i] < batch.longest) {
        const auto pad = out[static_cast<std::int64_t>(i)].slice(0, batch.lengths[i]);
        return pad.abs().max().item<float>() == 0.0f ? "drops" : "computes";
      }
    }
    return "has no padding to show";
  } catch (const std::exception& error) {
    return std::string("fails: ") + error.what();
  }
}

void PrintMixedLengths(const std::string& model_dir, torch::jit::Module& module,
                       GpuForwardTimer& timer, const plan::Plan& p, std::int64_t d,
                       std::int64_t budget, double peak, double copy) {
  std::optional<torch::jit::Module> nested;
  try {
    nested = torch::jit::load(model_dir + "/encoder_nested.pt");
    nested->eval();
    nested->to(torch::kCUDA, torch::kBFloat16);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "no nested-tensor variant (encoder_nested.pt): %s\n", error.what());
    nested.reset();
  }
  std::mt19937_64 rng(kLengthSeed);
  std::uniform_int_distribution<std::int32_t> draw(kMinLength, kMaxLength);
  std::vector<std::int32_t> stream(static_cast<std::size_t>(kMixedBatches * budget / kMinLength + 1));
  for (auto& length : stream) length = draw(rng);

  const std::int64_t attention_layers = AttentionLayers(p);
  const double weight_bytes = static_cast<double>(p.WeightBytes(2));
  const auto options = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);

  std::printf("\nMixed lengths: sequence lengths uniform in [%ld, %ld] (seed %llu), %d batches a row, "
              "token budget %ld. Real tokens/s in millions; libtorch runs each batch padded to its "
              "longest sequence.\n\n",
              static_cast<long>(kMinLength), static_cast<long>(kMaxLength),
              static_cast<unsigned long long>(kLengthSeed), kMixedBatches, static_cast<long>(budget));
  std::printf("| requests a batch | real tokens a batch | padded tokens a batch | floor | ltserve packed | "
              "libtorch mask | libtorch mask, nested | libtorch no mask | ltserve / best masked libtorch | "
              "ltserve / floor |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  bool reported_paths = false;
  for (const std::int64_t per_batch : {std::int64_t{8}, std::int64_t{32}, std::int64_t{0}}) {
    if (per_batch * kMaxLength > budget) {
      std::fprintf(stderr, "mixed lengths: %ld requests of up to %ld tokens may exceed the budget of %ld: skipped\n",
                   static_cast<long>(per_batch), static_cast<long>(kMaxLength), static_cast<long>(budget));
      continue;
    }
    std::vector<MixedBatch> batches;
    double requests = 0, tokens = 0, padded = 0, floor_us = 0;
    for (auto& lengths : FormBatches(stream, per_batch, budget)) {
      MixedBatch batch;
      double flops = 0;
      for (const std::int32_t length : lengths) {
        batch.tokens += length;
        batch.longest = std::max<std::int64_t>(batch.longest, length);
        // q·kᵀ and p·v: 4·length²·d per sequence and layer, beside the projections.
        flops += length * p.FlopsPerRow() + 4.0 * attention_layers * length * length * d;
      }
      const auto n = static_cast<std::int64_t>(lengths.size());
      batch.floor_us = std::max(flops / (peak * 1e6),
                                (weight_bytes + 4.0 * static_cast<double>(batch.tokens) * d) / (copy * 1e6));
      auto x = torch::randn({n, batch.longest, d}, options);
      auto mask = torch::zeros({n, batch.longest}, torch::TensorOptions().dtype(torch::kBool));
      for (std::int64_t i = 0; i < n; ++i) mask[i].slice(0, lengths[static_cast<std::size_t>(i)]).fill_(true);
      batch.masked = {x, torch::jit::IValue(), mask.to(torch::kCUDA)};
      batch.unmasked = {x};
      batch.lengths = std::move(lengths);
      requests += static_cast<double>(n);
      tokens += static_cast<double>(batch.tokens);
      padded += static_cast<double>(n * batch.longest);
      floor_us += batch.floor_us;
      batches.push_back(std::move(batch));
    }
    if (batches.empty()) continue;
    if (!reported_paths) {
      std::fprintf(stderr, "libtorch with a key-padding mask: the exported module %s the padding",
                   PaddingPath(module, batches.front()).c_str());
      if (nested) {
        std::fprintf(stderr, "; with nested tensors enabled it %s it",
                     PaddingPath(*nested, batches.front()).c_str());
      }
      std::fprintf(stderr, "\n");
      reported_paths = true;
    }
    double ltserve_us = 0;
    for (const auto& batch : batches) {
      std::vector<double> rounds;
      for (int r = 0; r < kRounds; ++r) {
        auto us = timer.TimeTokenForward(batch.lengths, 10);
        if (!us.ok()) {
          std::fprintf(stderr, "ltserve: %s\n", us.status().ToString().c_str());
          return;
        }
        rounds.push_back(us.value());
      }
      ltserve_us += Median(rounds);
    }
    const double masked_us = TimeBatches(batches, [&](MixedBatch& b) { (void)module.forward(b.masked); });
    const double nested_us = nested ? TimeBatches(batches, [&](MixedBatch& b) { (void)nested->forward(b.masked); })
                                    : std::nan("");
    const double unmasked_us = TimeBatches(batches, [&](MixedBatch& b) { (void)module.forward(b.unmasked); });
    // Without the mask the real tokens attend to the padding: a server cannot answer with that,
    // so the ratio is against the faster of the masked runs (the unmasked one is for reference).
    const double best_us = std::isnan(nested_us) || masked_us < nested_us ? masked_us : nested_us;
    // Real tokens per second, in millions: tokens per microsecond.
    const auto rate = [&](double us) { return Cell(tokens / us); };
    const auto count = static_cast<double>(batches.size());
    char label[64];
    if (per_batch > 0) {
      std::snprintf(label, sizeof(label), "%ld", static_cast<long>(per_batch));
    } else {
      std::snprintf(label, sizeof(label), "to the budget (%.1f)", requests / count);
    }
    std::printf("| %s | %.0f | %.0f | %s | %s | %s | %s | %s | %s | %s |\n", label, tokens / count,
                padded / count, rate(floor_us).c_str(), rate(ltserve_us).c_str(), rate(masked_us).c_str(),
                rate(nested_us).c_str(), rate(unmasked_us).c_str(), Cell(best_us / ltserve_us).c_str(),
                Cell(ltserve_us / floor_us).c_str());
    std::fflush(stdout);
  }
}

// BERT-base's embedding tables: what a Hugging Face BertModel gathers from.
constexpr std::int64_t kVocab = 30522;
constexpr std::int64_t kMaxPositions = 512;

// The same encoder as a Hugging Face model is served: token ids in (BERT-base-sized embedding
// tables, random, with their LayerNorm) and mean pooling out, the layers unchanged.
std::shared_ptr<plan::Plan> WithTokenIdsAndMeanPooling(const plan::Plan& encoder) {
  auto p = std::make_shared<plan::Plan>();
  for (const plan::Value& value : encoder.values()) p->AddValue(value.name, value.width);
  const std::int64_t d = encoder.input_width();
  std::mt19937_64 rng(kLengthSeed);
  std::uniform_real_distribution<float> weight(-0.05f, 0.05f);
  auto table = [&](std::int64_t rows) {
    std::vector<float> values(static_cast<std::size_t>(rows * d));
    for (float& v : values) v = weight(rng);
    return values;
  };
  plan::EmbeddingOp embedding;
  embedding.output = encoder.input();
  embedding.vocab_size = kVocab;
  embedding.max_positions = kMaxPositions;
  embedding.type_vocab_size = 2;
  embedding.word = table(kVocab);
  embedding.position = table(kMaxPositions);
  embedding.token_type = table(2);
  embedding.gamma.assign(static_cast<std::size_t>(d), 1.0f);
  embedding.beta.assign(static_cast<std::size_t>(d), 0.0f);
  p->Append(std::move(embedding));
  for (const plan::Op& op : encoder.ops()) p->Append(op);
  plan::PoolOp pool;
  pool.input = encoder.output();
  pool.output = p->AddValue("pooled", d);
  pool.pooling = plan::Pooling::kMean;
  p->Append(pool);
  p->SetInput(encoder.input(), plan::InputKind::kTokenIds);
  p->SetOutput(pool.output);
  return p;
}

// Token ids in and mean pooling out against the embeddings-in plan, both timed here, batch by
// batch in turn: what the gather and the pooling add.
void PrintTokenIds(GpuForwardTimer& embeddings_in, const plan::Plan& encoder,
                   std::int64_t max_batch) {
  auto p = WithTokenIdsAndMeanPooling(encoder);
  if (auto status = p->Validate(); !status.ok()) {
    std::fprintf(stderr, "token-id plan: %s\n", status.ToString().c_str());
    return;
  }
  ltserve::ModelSpec spec;
  spec.name = "bert_mean";
  spec.max_batch_size = static_cast<int>(max_batch);
  spec.inputs = {{"input_ids", ltserve::DataType::kInt64, {-1}},
                 {"attention_mask", ltserve::DataType::kInt64, {-1}}};
  spec.outputs = {{"embedding", ltserve::DataType::kBf16, {encoder.input_width()}}};
  spec.options.precision = ltserve::Precision::kBf16;
  spec.options.max_tokens_per_batch = max_batch * kSeq;
  ltserve::TokenModelFacts facts;
  facts.mask_input = 1;
  facts.mask_kind = ltserve::MaskKind::kAttention;
  ltserve::TokenIds ids;
  ids.vocab_size = kVocab;
  facts.ids = ids;
  facts.pooled = true;
  facts.max_positions = kMaxPositions;
  auto tokens = ltserve::MakeTokenLayout(spec, facts);
  if (!tokens.ok()) {
    std::fprintf(stderr, "token-id layout: %s\n", tokens.status().ToString().c_str());
    return;
  }
  auto model = ltserve::gpu::LoadGpuModel(p, spec, tokens.value());
  if (!model.ok()) {
    std::fprintf(stderr, "token-id model: %s\n", model.status().ToString().c_str());
    return;
  }
  auto timer = GpuForwardTimer::Create(model.value());
  if (!timer.ok()) {
    std::fprintf(stderr, "token-id timer: %s\n", timer.status().ToString().c_str());
    return;
  }
  if (auto filled = timer.value()->FillTokenIds(static_cast<std::int32_t>(kVocab), kLengthSeed);
      !filled.ok()) {
    std::fprintf(stderr, "token ids: %s\n", filled.ToString().c_str());
    return;
  }
  std::printf("\nToken ids in (embedding gather + LayerNorm, vocabulary %ld, random ids) and mean "
              "pooling out, against the same layers with embeddings in; seq %ld, graph µs:\n\n",
              static_cast<long>(kVocab), static_cast<long>(kSeq));
  std::printf("| batch | embeddings in | token ids + mean pooling | ratio |\n|---:|---:|---:|---:|\n");
  for (std::int64_t batch = 1; batch <= max_batch; batch *= (batch < 8 ? 8 : 4)) {
    std::vector<std::int32_t> lengths(static_cast<std::size_t>(batch), static_cast<std::int32_t>(kSeq));
    const int iterations = batch >= 32 ? 20 : 50;
    std::vector<double> base, with_ids;
    for (int r = 0; r < kRounds; ++r) {
      auto a = embeddings_in.TimeTokenForward(lengths, iterations);
      auto b = timer.value()->TimeTokenForward(lengths, iterations);
      if (!a.ok() || !b.ok()) {
        std::fprintf(stderr, "token ids: %s\n", (a.ok() ? b.status() : a.status()).ToString().c_str());
        return;
      }
      base.push_back(a.value());
      with_ids.push_back(b.value());
    }
    const double base_us = Median(base);
    const double ids_us = Median(with_ids);
    std::printf("| %ld | %.1f | %.1f | %.3f |\n", static_cast<long>(batch), base_us, ids_us,
                ids_us / base_us);
    std::fflush(stdout);
  }
}

}  // namespace

// --profile BATCH: one replay of the batch's graph (sequences of kSeq tokens) between
// cudaProfilerStart and Stop, after warm-up passes outside them, so that
// `ncu --profile-from-start off` sees exactly one forward pass's kernels (scripts/gpu.sh).
// Five passes of `batch` sequences of kSeq tokens before what is measured; their mean µs.
ltserve::Result<double> WarmUp(GpuForwardTimer& timer, std::int64_t batch) {
  const std::vector<std::int32_t> lengths(static_cast<std::size_t>(batch),
                                          static_cast<std::int32_t>(kSeq));
  auto warm = timer.TimeTokenForward(lengths, 5);
  if (!warm.ok()) std::fprintf(stderr, "warm-up: %s\n", warm.status().ToString().c_str());
  return warm;
}

int ProfileOnePass(GpuForwardTimer& timer, std::int64_t batch) {
  const std::vector<std::int32_t> lengths(static_cast<std::size_t>(batch),
                                          static_cast<std::int32_t>(kSeq));
  auto warm = WarmUp(timer, batch);
  if (!warm.ok()) return 1;
  if (cudaProfilerStart() != cudaSuccess) return 1;
  auto once = timer.TimeTokenForward(lengths, 1);
  if (cudaProfilerStop() != cudaSuccess || !once.ok()) return 1;
  std::printf("batch %ld: warm pass %.1f us, profiled pass %.1f us\n", static_cast<long>(batch),
              warm.value(), once.value());
  return 0;
}

// --timeline BATCH: seven replays of the batch's graph (sequences of kSeq tokens) after
// warm-up passes, every kernel's start and end recorded by CUPTI (kernel_timeline.h): the
// median pass kernel by kernel, as it runs in the graph.
int TimelineOfPasses(GpuForwardTimer& timer, std::int64_t batch) {
  const std::vector<std::int32_t> lengths(static_cast<std::size_t>(batch),
                                          static_cast<std::int32_t>(kSeq));
  if (!WarmUp(timer, batch).ok()) return 1;
  if (auto status = StartKernelTimeline(); !status.ok()) {
    std::fprintf(stderr, "timeline: %s\n", status.ToString().c_str());
    return 1;
  }
  auto timed = timer.TimeTokenForward(lengths, 7);
  auto spans = StopKernelTimeline();
  if (!timed.ok() || !spans.ok()) {
    std::fprintf(stderr, "timeline: %s\n",
                 (timed.ok() ? spans.status() : timed.status()).ToString().c_str());
    return 1;
  }
  PrintKernelTimeline(spans.value(), 8,
                      "BERT-base layers, bf16, " + std::to_string(batch) + " sequences of " +
                          std::to_string(kSeq) + " tokens, graph replays under CUPTI (mean " +
                          std::to_string(timed.value()) + " µs a pass as timed)");
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [max_batch] [--profile BATCH | --timeline BATCH [--cublaslt-workspace BYTES] [--memsets-in-place] [--cutlass-gemm | --cutlass-gemm-auto] [--attention-in-order] | --workspace-ab | --memset-ab | --cutlass-ab | --cutlass-auto-swapped-ab | --control-ab | --attention-order-ab | --gemm-search-ab | --pass-ab | --chain-ab | --fusion-ab | --launch-ab | --staged-ab]\n", argv[0]);
    return 2;
  }
  const std::int64_t profile_batch =
      argc > 4 && std::string(argv[3]) == "--profile" ? std::stoll(argv[4]) : 0;
  const std::int64_t timeline_batch =
      argc > 4 && std::string(argv[3]) == "--timeline" ? std::stoll(argv[4]) : 0;
  // --timeline BATCH --cublaslt-workspace BYTES: the pass with that workspace;
  // --memsets-in-place: with cuBLASLt's counter memsets where it puts them, one a GEMM;
  // --cutlass-gemm(-auto): with CUTLASS's GEMMs (below); --attention-in-order: attention's
  // work items from the first sequence to the last.
  std::optional<std::size_t> timeline_workspace;
  bool memsets_in_place = false;
  bool attention_in_order = false;
  // --cutlass-gemm: CUTLASS's GEMMs wherever they apply; --cutlass-gemm-auto: where they time
  // faster alone.
  ltserve::OwnKernelMode cutlass_gemm = ltserve::OwnKernelMode::kOff;
  for (int a = 5; timeline_batch > 0 && a < argc; ++a) {
    if (std::string(argv[a]) == "--cublaslt-workspace" && a + 1 < argc) {
      timeline_workspace = static_cast<std::size_t>(std::stoull(argv[++a]));
    } else if (std::string(argv[a]) == "--memsets-in-place") {
      memsets_in_place = true;
    } else if (std::string(argv[a]) == "--attention-in-order") {
      attention_in_order = true;
    } else if (std::string(argv[a]) == "--cutlass-gemm") {
      cutlass_gemm = ltserve::OwnKernelMode::kAlways;
    } else if (std::string(argv[a]) == "--cutlass-gemm-auto") {
      cutlass_gemm = ltserve::OwnKernelMode::kAuto;
    }
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
    spec.options.precision = ltserve::Precision::kBf16;
    spec.options.max_tokens_per_batch = max_batch * kSeq;
    if (timeline_workspace.has_value()) spec.options.workspace_bytes = *timeline_workspace;
    if (memsets_in_place) spec.options.consolidate_cublaslt_memsets = false;
    if (attention_in_order) spec.options.attention_last_sequence_first = false;
    spec.options.cutlass_gemm = cutlass_gemm;
    auto tokens = ltserve::MakeTokenLayout(spec, std::nullopt);
    if (!tokens.ok()) {
      std::fprintf(stderr, "token layout: %s\n", tokens.status().ToString().c_str());
      return 1;
    }
    if (argc > 3 && std::string(argv[3]) == "--gemm-search-ab") {
      // The wide cuBLASLt search against the heuristic in the pass (both loads' logs on stderr).
      const std::int64_t batches[] = {1, 8, 32, 128};
      return PrintOptionAB("BERT-base layers, bf16, seq 128", GemmSearchAB(), p, spec,
                           tokens.value(), std::span(batches).first(max_batch >= 128 ? 4 : 1),
                           kSeq);
    }
    if (argc > 3 && std::string(argv[3]) == "--workspace-ab") {
      // cuBLASLt's workspace at its default against 1 byte (no memset nodes before its
      // persistent kernels), each side with the algorithms its workspace allows.
      const std::int64_t batches[] = {1, 8, 32, 128};
      return PrintOptionAB("BERT-base layers, bf16, seq 128", WorkspaceAB(), p, spec,
                           tokens.value(), std::span(batches).first(max_batch >= 128 ? 4 : 1),
                           kSeq);
    }
    if (argc > 3 && std::string(argv[3]) == "--memset-ab") {
      // cuBLASLt's counter memsets as one a pass against one a GEMM, same algorithms: the
      // H100 ran none at one sequence, 12 a pass at 32 and 48 at 128.
      const std::int64_t batches[] = {1, 8, 32, 128};
      return PrintOptionAB("BERT-base layers, bf16, seq 128", MemsetConsolidationAB(), p, spec,
                           tokens.value(), std::span(batches).first(max_batch >= 128 ? 4 : 1),
                           kSeq);
    }
    if (argc > 3 && std::string(argv[3]) == "--cutlass-ab") {
      // CUTLASS's GEMMs (programmatic launch: each starts while the kernel ahead drains)
      // against cuBLASLt's, for all four GEMMs of every layer.
      const std::int64_t batches[] = {1, 8, 32, 128};
      const auto shown = std::span(batches).first(max_batch >= 128 ? 4 : 1);
      return PrintOptionAB("BERT-base layers, bf16, seq 128", CutlassGemmAutoAB(), p, spec,
                           tokens.value(), shown, kSeq) +
             PrintOptionAB("BERT-base layers, bf16, seq 128", CutlassGemmAB(), p, spec,
                           tokens.value(), shown, kSeq);
    }
    if (argc > 3 && (std::string(argv[3]) == "--control-ab" ||
                     std::string(argv[3]) == "--cutlass-auto-swapped-ab" ||
                     std::string(argv[3]) == "--attention-order-ab")) {
      // A load against a second load of the same options; cutlass_gemm_kernel off loaded
      // before auto (--cutlass-ab loads auto first), each load's log printed; or attention's
      // work items last sequence first against first sequence first.
      const std::int64_t batches[] = {1, 8, 32, 128};
      const std::string mode = argv[3];
      const OptionAB ab = mode == "--control-ab"                ? ControlAB()
                          : mode == "--cutlass-auto-swapped-ab" ? Swapped(CutlassGemmAutoAB())
                                                                : AttentionOrderAB();
      return PrintOptionAB("BERT-base layers, bf16, seq 128", ab, p, spec, tokens.value(),
                           std::span(batches).first(max_batch >= 128 ? 4 : 1), kSeq);
    }
    if (argc > 3 && std::string(argv[3]) == "--pass-ab") {
      // Own-kernel choices checked in the pass against per kernel: they compete up to 128
      // tokens, one sequence of 128 or a few short ones; 8 sequences (1,024 tokens) is the
      // control.
      const std::int64_t batches[] = {1, 8};
      const std::int64_t short_batches[] = {1, 2, 4};
      return PrintOptionAB("BERT-base layers, bf16, seq 128", KernelsInPassAB(), p, spec,
                           tokens.value(), std::span(batches).first(max_batch >= 8 ? 2 : 1),
                           kSeq) +
             PrintOptionAB("BERT-base layers, bf16, seq 8", KernelsInPassAB(), p, spec,
                           tokens.value(), std::span(short_batches).first(max_batch >= 4 ? 3 : 1),
                           8);
    }
    if (argc > 3 && std::string(argv[3]) == "--staged-ab") {
      // The staged-weights kernel takes up to 128 rows: one sequence of 128, and one to sixteen
      // of 8 tokens. Where it times faster alone (auto), then on every GEMM it takes, where
      // each GEMM stages its weights while the kernel ahead drains.
      const std::int64_t one[] = {1};
      const std::int64_t short_batches[] = {1, 4, 16};
      const auto shorts = std::span(short_batches).first(max_batch >= 16 ? 3 : max_batch >= 4 ? 2 : 1);
      int failures = 0;
      for (const OptionAB& ab : {StagedGemmAB(), StagedEverywhereAB()}) {
        failures += PrintOptionAB("BERT-base layers, bf16, seq 128", ab, p, spec, tokens.value(),
                                  one, kSeq) +
                    PrintOptionAB("BERT-base layers, bf16, seq 8", ab, p, spec, tokens.value(),
                                  shorts, 8);
      }
      return failures;
    }
    if (argc > 3 && std::string(argv[3]) == "--fusion-ab") {
      // One to four sequences of 128 (the split-K kernel takes the first, the GEMM + LayerNorm
      // kernel all three): LayerNorm fused into every GEMM before it, then every GEMM on the
      // own kernels, then programmatic launch with every boundary between own kernels.
      const std::int64_t fusion_batches[] = {1, 2, 4};
      const auto batches = std::span(fusion_batches).first(max_batch >= 4 ? 3 : 1);
      return PrintOptionAB("BERT-base layers, bf16, seq 128", GemmLayerNormAlwaysAB(), p, spec,
                           tokens.value(), batches, kSeq) +
             PrintOptionAB("BERT-base layers, bf16, seq 128", OwnKernelsEverywhereAB(), p, spec,
                           tokens.value(), batches, kSeq) +
             PrintOptionAB("BERT-base layers, bf16, seq 128", ProgrammaticWithOwnKernelsAB(), p,
                           spec, tokens.value(), batches.first(1), kSeq);
    }
    if (argc > 3 && std::string(argv[3]) == "--launch-ab") {
      // Programmatic launch on against off, then chosen per bucket (auto) against on, at one
      // and 8 sequences of 128 and one to four of 8: the buckets auto times (up to 1,024
      // tokens), in the split-K kernel's range and past it.
      const std::int64_t batches[] = {1, 8};
      const std::int64_t short_batches[] = {1, 2, 4};
      int failures = 0;
      for (const OptionAB& ab : {ProgrammaticLaunchAB(), ProgrammaticAutoAB()}) {
        failures += PrintOptionAB("BERT-base layers, bf16, seq 128", ab, p, spec, tokens.value(),
                                  std::span(batches).first(max_batch >= 8 ? 2 : 1), kSeq) +
                    PrintOptionAB("BERT-base layers, bf16, seq 8", ab, p, spec, tokens.value(),
                                  std::span(short_batches).first(max_batch >= 4 ? 3 : 1), 8);
      }
      return failures;
    }
    if (argc > 3 && std::string(argv[3]) == "--chain-ab") {
      // The layer-chain kernel (either schedule) where the load times it faster, against never:
      // it takes up to 32 rows, so the FFN pairs of one to four sequences of 8 tokens.
      const std::int64_t short_batches[] = {1, 2, 4};
      return PrintOptionAB("BERT-base layers, bf16, seq 8", LayerChainAB(), p, spec,
                           tokens.value(), std::span(short_batches).first(max_batch >= 4 ? 3 : 1),
                           8);
    }
    const auto load_start = Clock::now();
    auto model = ltserve::gpu::LoadGpuModel(p, spec, tokens.value());
    if (!model.ok()) {
      std::fprintf(stderr, "model: %s\n", model.status().ToString().c_str());
      return 1;
    }
    auto factory = ltserve::gpu::CreateGpuFactory(model.value());
    auto timer = GpuForwardTimer::Create(model.value());
    if (!timer.ok()) {
      std::fprintf(stderr, "timer: %s\n", timer.status().ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "encoder: loaded in %.1f s: %s\n",
                 std::chrono::duration<double>(Clock::now() - load_start).count(),
                 factory->Describe().c_str());
    if (profile_batch > 0) return ProfileOnePass(*timer.value(), profile_batch);
    if (timeline_batch > 0) return TimelineOfPasses(*timer.value(), timeline_batch);

    const double peak = MeasurePeakTflops();
    const double copy = MeasureCopyTBps();
    // Attention adds 4·seq·d FLOPs per token and layer (q·kᵀ and p·v) to the projections'
    // FlopsPerRow.
    const double flops_per_token = p->FlopsPerRow() + 4.0 * static_cast<double>(AttentionLayers(*p)) * kSeq * d;
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
        auto us = timer.value()->TimeTokenForward(lengths, iterations);
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
    // The table above times bursts of 20–50 passes. Held for seconds, the passes at 32 and
    // 128 sequences reach the GPU's power limit, as do sustained matmuls: both sides again,
    // each after a second of the same work.
    if (max_batch >= 32) {
      constexpr double kHoldSeconds = 2.0;
      const double sustained_peak = MeasureSustainedPeakTflops(kHoldSeconds);
      std::printf("\nHeld for %.0f s, timed over the second half (bf16 matmul peak held %.0f TFLOP/s "
                  "against %.0f in bursts):\n\n", kHoldSeconds, sustained_peak, peak);
      std::printf("| batch | floor µs at the held peak | ltserve graph µs, held | held / floor |\n"
                  "|---:|---:|---:|---:|\n");
      for (const std::int64_t batch : {std::int64_t{32}, std::int64_t{128}}) {
        if (batch > max_batch) break;
        const std::vector<std::int32_t> lengths(static_cast<std::size_t>(batch),
                                                static_cast<std::int32_t>(kSeq));
        auto probe = timer.value()->TimeTokenForward(lengths, 5);
        if (!probe.ok()) {
          std::fprintf(stderr, "ltserve: %s\n", probe.status().ToString().c_str());
          return 1;
        }
        const int half = std::max(1, static_cast<int>(kHoldSeconds / 2 * 1e6 / probe.value()));
        auto warm = timer.value()->TimeTokenForward(lengths, half);
        auto held = timer.value()->TimeTokenForward(lengths, half);
        if (!warm.ok() || !held.ok()) {
          std::fprintf(stderr, "ltserve: %s\n", (warm.ok() ? held : warm).status().ToString().c_str());
          return 1;
        }
        const double tokens = static_cast<double>(batch * kSeq);
        const double floor_us = std::max(flops_per_token * tokens / (sustained_peak * 1e6),
                                         (weight_bytes + 4.0 * tokens * d) / (copy * 1e6));
        std::printf("| %ld | %.1f | %.1f | %.2f |\n", static_cast<long>(batch), floor_us,
                    held.value(), held.value() / floor_us);
        std::fflush(stdout);
      }
    }
    {
      const std::int64_t batches[] = {1, 8, 32, 128};
      if (PrintOptionAB("BERT-base layers, bf16, seq 128", ProgrammaticLaunchAB(), p, spec,
                        tokens.value(), std::span(batches).first(max_batch >= 128 ? 4 : 1),
                        kSeq) != 0) {
        return 1;
      }
      // auto times buckets of up to 1,024 tokens: batch 1 and 8.
      if (PrintOptionAB("BERT-base layers, bf16, seq 128", ProgrammaticAutoAB(), p, spec,
                        tokens.value(), std::span(batches).first(max_batch >= 8 ? 2 : 1),
                        kSeq) != 0) {
        return 1;
      }
      // The split-K kernel is offered up to 128 tokens: batch 1; batch 8 (1024 tokens) as the
      // control.
      if (PrintOptionAB("BERT-base layers, bf16, seq 128", SkinnyGemmAB(), p, spec,
                        tokens.value(), std::span(batches).first(max_batch >= 8 ? 2 : 1),
                        kSeq) != 0) {
        return 1;
      }
      // The GEMM + LayerNorm kernel is offered up to 512 tokens: batches 1, 2 and 4; batch 8
      // (1024 tokens) as the control.
      const std::int64_t norm_batches[] = {1, 2, 4, 8};
      if (PrintOptionAB("BERT-base layers, bf16, seq 128", GemmLayerNormAB(), p, spec,
                        tokens.value(),
                        std::span(norm_batches).first(max_batch >= 8 ? 4 : max_batch >= 4 ? 3 : 1),
                        kSeq) != 0) {
        return 1;
      }
      // The streaming LayerNorm timed faster alone at 16,384 rows (batch 128) and slower at
      // 4,096 (batch 32); batches 1 and 8 as controls.
      if (PrintOptionAB("BERT-base layers, bf16, seq 128", StreamingLayerNormAB(), p, spec,
                        tokens.value(), std::span(batches).first(max_batch >= 128 ? 4 : 1),
                        kSeq) != 0) {
        return 1;
      }
      // Two halves on two streams, from 256 tokens up (halves of at least 128 rows): batches
      // 8, 32 and 128, the halves' kernels apart from their running at once.
      if (max_batch >= 8 &&
          PrintHalvesApart("BERT-base layers, bf16, seq 128", p, spec, tokens.value(),
                           std::span(batches).subspan(1, max_batch >= 128 ? 3 : 1), kSeq) != 0) {
        return 1;
      }
      if (PrintOptionAB("BERT-base layers, bf16, seq 128", TwoStreamHalvesAB(), p, spec,
                        tokens.value(), std::span(batches).first(max_batch >= 128 ? 4 : 1),
                        kSeq) != 0) {
        return 1;
      }
      // Ten turns of about a second each at 128 sequences, where the halves pay.
      if (max_batch >= 128 && PrintHalvesSustained("BERT-base layers, bf16, seq 128", p, spec,
                                                   tokens.value(), 128, kSeq, 10, 1.0) != 0) {
        return 1;
      }
    }
    PrintTokenIds(*timer.value(), *p, max_batch);
    PrintStepBreakdown(*timer.value(), max_batch);
    PrintMixedLengths(argv[1], module, *timer.value(), *p, d, max_batch * kSeq, peak, copy);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench failed: %s\n", error.what());
    return 1;
  }
}
