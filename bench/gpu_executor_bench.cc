// ltserve's cuBLASLt executor against libtorch on the same GPU, same TorchScript model, bf16:
// libtorch eager, libtorch replayed from a CUDA graph, and the hardware floor from a matmul
// peak and a copy bandwidth measured in this same run. Prints one markdown table.
//
// Usage: ltserve_gpu_bench MODEL_DIR [max_batch [copies|idle]]   (MODEL_DIR from
// bench/export_bench_models.py; `copies`: only the copies_in_graph A/B and a lone Execute's
// anatomy; `idle`: only a lone Execute after the host has been idle)
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>
#include <torch/script.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "attention_table.h"
#include "layer_norm_table.h"
#include "bench_timing.h"
#include "gpu/gpu_executor.h"
#include "gpu/gpu_factory.h"
#include "gpu_forward_timer.h"
#include "kernel_timeline.h"
#include "option_ab.h"
#include "chain_gemm_table.h"
#include "cutlass_gemm_table.h"
#include "gemm_search_table.h"
#include "norm_gemm_table.h"
#include "skinny_gemm_table.h"

namespace {

using namespace ltserve_bench;

// Bench-local lowering of a Sequential of Linear / ReLU / GELU (the real loader is server/torch).
std::shared_ptr<ltserve::plan::Plan> Lower(torch::jit::script::Module& module) {
  auto plan = std::make_shared<ltserve::plan::Plan>();
  ltserve::plan::ValueId current = ltserve::plan::kNoValue;
  std::vector<ltserve::plan::LinearOp> ops;
  for (const auto& child : module.named_children()) {
    const std::string type = child.value.type()->name()->name();
    if (type == "Linear") {
      ltserve::plan::LinearOp op;
      auto weight = child.value.attr("weight").toTensor();
      op.out_features = weight.size(0);
      op.in_features = weight.size(1);
      op.weight = ToFloats(weight);
      if (!child.value.attr("bias").isNone()) op.bias = ToFloats(child.value.attr("bias").toTensor());
      ops.push_back(std::move(op));
    } else if (type == "ReLU" && !ops.empty()) {
      ops.back().activation = ltserve::plan::Activation::kRelu;
    } else if (type == "GELU" && !ops.empty()) {
      ops.back().activation = child.value.attr("approximate").toStringRef() == "tanh"
                                  ? ltserve::plan::Activation::kGeluTanh
                                  : ltserve::plan::Activation::kGeluErf;
    } else {
      std::fprintf(stderr, "bench lowering: unsupported module %s\n", type.c_str());
      return nullptr;
    }
  }
  if (ops.empty()) return nullptr;
  current = plan->AddValue("input", ops.front().in_features);
  plan->SetInput(current, ltserve::plan::InputKind::kRows);
  for (auto& op : ops) {
    op.input = current;
    op.output = plan->AddValue("linear" + std::to_string(plan->values().size()), op.out_features);
    current = op.output;
    plan->Append(std::move(op));
  }
  plan->SetOutput(current);
  return plan;
}

int BenchModel(const std::string& name, const std::string& path, std::int64_t max_batch,
               double peak_tflops, double copy_tbps) {
  c10::InferenceMode inference;
  auto module = torch::jit::load(path);
  module.eval();
  auto plan = Lower(module);
  if (plan == nullptr || !plan->Validate().ok()) return 1;
  module.to(torch::kCUDA, torch::kBFloat16);

  ltserve::ModelSpec spec;
  spec.name = name;
  spec.max_batch_size = static_cast<int>(max_batch);
  spec.inputs = {{"x", ltserve::DataType::kBf16, {plan->input_width()}}};
  spec.outputs = {{"y", ltserve::DataType::kBf16, {plan->output_width()}}};
  spec.options.precision = ltserve::Precision::kBf16;
  const auto load_start = Clock::now();
  auto model = ltserve::gpu::LoadGpuModel(plan, spec, std::nullopt);
  if (!model.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), model.status().ToString().c_str());
    return 1;
  }
  auto factory = ltserve::gpu::CreateGpuFactory(model.value());
  auto timer = GpuForwardTimer::Create(model.value());
  if (!timer.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), timer.status().ToString().c_str());
    return 1;
  }
  auto instance = factory->CreateInstance(0);
  if (!instance.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), instance.status().ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "%s: loaded in %.1f s: %s\n", name.c_str(),
               std::chrono::duration<double>(Clock::now() - load_start).count(),
               factory->Describe().c_str());
  ltserve::ExecutorInstance& exec = *instance.value();
  const auto options = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);

  // Agreement with libtorch on one batch through the full Execute path (pinned I/O), of at
  // most the largest batch the instance was sized for.
  {
    const std::int64_t rows = std::min<std::int64_t>(64, max_batch);
    auto x = torch::randn({rows, plan->input_width()}, options);
    auto expected = module.forward({x}).toTensor().to(torch::kFloat32);
    auto x_cpu = x.to(torch::kCPU).contiguous();
    auto buffer = exec.InputBuffer(0, x_cpu.nbytes());
    if (!buffer.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), buffer.status().ToString().c_str());
      return 1;
    }
    std::memcpy(buffer.value().data(), x_cpu.data_ptr(), x_cpu.nbytes());
    ltserve::BatchShape shape;
    shape.batch_size = rows;
    if (!exec.Execute(shape, nullptr).ok()) return 1;
    auto got = torch::empty({rows, plan->output_width()}, torch::kBFloat16);
    std::memcpy(got.data_ptr(), exec.Output(0).data(), got.nbytes());
    auto diff = (got.to(torch::kFloat32) - expected.cpu()).norm() / expected.cpu().norm();
    std::fprintf(stderr, "%s: ltserve vs libtorch at %ld rows, relative difference %.3g\n",
                 name.c_str(), static_cast<long>(rows), diff.item<double>());
  }

  const double flops_per_row = plan->FlopsPerRow();
  const double weight_bytes = static_cast<double>(plan->WeightBytes(2));
  for (std::int64_t batch = 1; batch <= max_batch; batch *= 2) {
    const int iterations = Iterations(batch);
    std::vector<double> ours;
    for (int r = 0; r < kRounds; ++r) {
      auto us = timer.value()->TimeForward(batch, iterations);
      if (!us.ok()) {
        std::fprintf(stderr, "%s\n", us.status().ToString().c_str());
        return 1;
      }
      ours.push_back(us.value());
    }
    const double ltserve_us = Median(ours);

    // End to end through Execute: pinned host input -> device -> pinned host output.
    auto in = exec.InputBuffer(0, batch * plan->input_width() * 2);
    if (!in.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), in.status().ToString().c_str());
      return 1;
    }
    std::memset(in.value().data(), 0x3f, in.value().size());  // 0x3f3f: bf16 0.75, not zeros
    ltserve::BatchShape shape;
    shape.batch_size = batch;
    const double e2e_us = MedianUs([&] { (void)exec.Execute(shape, nullptr); }, iterations);

    auto x = torch::randn({batch, plan->input_width()}, options);
    std::vector<torch::jit::IValue> args{x};
    const double eager_us = MedianUs([&] { (void)module.forward(args); }, iterations);

    double graph_us = 0;
    {
      auto stream = c10::cuda::getStreamFromPool();
      c10::cuda::CUDAStreamGuard guard(stream);
      for (int i = 0; i < 3; ++i) (void)module.forward(args);
      stream.synchronize();
      at::cuda::CUDAGraph graph;
      graph.capture_begin();
      auto y = module.forward(args).toTensor();
      graph.capture_end();
      graph_us = MedianUs([&] { graph.replay(); }, iterations);
    }
    const double compute_us = flops_per_row * batch / (peak_tflops * 1e6);
    const double memory_us =
        (weight_bytes + 2.0 * batch * (plan->input_width() + plan->output_width())) /
        (copy_tbps * 1e6);
    const double floor_us = std::max(compute_us, memory_us);
    const double tflops = flops_per_row * batch / ltserve_us * 1e-6;
    std::printf("| %s | %ld | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.0f%% |\n",
                name.c_str(), static_cast<long>(batch), floor_us, ltserve_us, e2e_us, eager_us,
                graph_us, graph_us / ltserve_us, eager_us / ltserve_us, ltserve_us / floor_us,
                100.0 * tflops / peak_tflops);
    std::fflush(stdout);
  }
  return 0;
}

// A served model's spec: FP32 rows in and out, bf16 inside, up to 256 rows.
ltserve::ModelSpec Fp32IoSpec(const std::string& name, const ltserve::plan::Plan& plan) {
  ltserve::ModelSpec spec;
  spec.name = name;
  spec.max_batch_size = 256;
  spec.inputs = {{"x", ltserve::DataType::kFp32, {plan.input_width()}}};
  spec.outputs = {{"y", ltserve::DataType::kFp32, {plan.output_width()}}};
  spec.options.precision = ltserve::Precision::kBf16;
  return spec;
}

// The A/Bs at small batches: programmatic launch at the batches that run the small-batch
// kernel (1 and 2 rows) and ones that do not; the split-K kernel at every bucket it may take;
// the layer-chain kernel at every bucket it may take.
int BenchOwnKernelsAndLaunch(const std::string& name, const std::string& path) {
  auto module = torch::jit::load(path);
  auto plan = Lower(module);
  if (plan == nullptr || !plan->Validate().ok()) return 1;
  const ltserve::ModelSpec spec = Fp32IoSpec(name, *plan);
  const std::int64_t pdl_batches[] = {1, 2, 16, 64};
  const std::int64_t skinny_batches[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  int failures = PrintOptionAB(name + ", FP32 in and out", ProgrammaticLaunchAB(), plan, spec,
                               std::nullopt, pdl_batches, 0);
  failures += PrintOptionAB(name + ", FP32 in and out", ProgrammaticAutoAB(), plan, spec,
                            std::nullopt, pdl_batches, 0);
  failures += PrintOptionAB(name + ", FP32 in and out", SkinnyGemmAB(), plan, spec, std::nullopt,
                            skinny_batches, 0);
  const std::int64_t chain_batches[] = {1, 2, 4, 8, 16, 32};
  failures += PrintOptionAB(name + ", FP32 in and out", LayerChainAB(), plan, spec, std::nullopt,
                            chain_batches, 0);
  return failures;
}

// copies_in_graph through the whole Execute (pinned FP32 rows in, FP32 rows out, the phase
// timings read as the scheduler reads them): one graph launch that reads and writes host
// staging itself against copy, launch, copy. Both loads run the same kernels (one algorithm
// cache).
int BenchCopiesInGraph(const std::string& name, const std::string& path) {
  auto module = torch::jit::load(path);
  auto plan = Lower(module);
  if (plan == nullptr || !plan->Validate().ok()) return 1;
  ltserve::ModelSpec spec = Fp32IoSpec(name, *plan);
  spec.options.algo_cache_file = (std::filesystem::temp_directory_path() /
                                  ("ltserve_bench_copies_" + std::to_string(::getpid())))
                                     .string();
  std::unique_ptr<ltserve::ExecutorInstance> instances[2];
  std::unique_ptr<GpuForwardTimer> timer;
  for (int in_graph = 0; in_graph < 2; ++in_graph) {
    spec.options.copies_in_graph = in_graph == 1;
    auto model = ltserve::gpu::LoadGpuModel(plan, spec, std::nullopt);
    if (!model.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), model.status().ToString().c_str());
      return 1;
    }
    auto factory = ltserve::gpu::CreateGpuFactory(model.value());
    if (in_graph == 1) {
      std::fprintf(stderr, "%s\n", factory->Describe().c_str());
      auto created = GpuForwardTimer::Create(model.value());
      if (!created.ok()) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), created.status().ToString().c_str());
        return 1;
      }
      timer = std::move(created).value();
    }
    auto instance = factory->CreateInstance(0);
    if (!instance.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), instance.status().ToString().c_str());
      return 1;
    }
    instances[in_graph] = std::move(instance).value();
  }
  std::filesystem::remove(spec.options.algo_cache_file);
  std::printf("\n%s, FP32 in and out: Execute end to end (median µs of alternating rounds), "
              "copies outside the graph against inside it (copies_in_graph)\n\n",
              name.c_str());
  std::printf("| batch | separate copies µs | copies in the graph µs | in graph / separate | "
              "in graph, no phase timings µs | graph launch + wait µs | graph back to back µs | "
              "event round trip µs |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (std::int64_t batch : {1, 2, 4, 8, 16, 32, 64}) {
    std::vector<double> rounds[2];
    for (int r = 0; r < kRounds; ++r) {
      for (int side = 0; side < 2; ++side) {
        ltserve::ExecutorInstance& exec = *instances[side];
        auto in = exec.InputBuffer(0, batch * plan->input_width() * sizeof(float));
        if (!in.ok()) return 1;
        std::vector<float> ones(static_cast<std::size_t>(batch * plan->input_width()), 0.5f);
        std::memcpy(in.value().data(), ones.data(), in.value().size());
        ltserve::BatchShape shape;
        shape.batch_size = batch;
        ltserve::ExecuteTimings timings;
        rounds[side].push_back(
            MedianUs([&] { (void)exec.Execute(shape, &timings); }, Iterations(batch)));
      }
    }
    const double separate = Median(rounds[0]);
    const double in_graph = Median(rounds[1]);
    // Where a lone Execute's time goes beyond the forward pass: the same instance without its
    // three event readings, the bare graph launched and waited for, the graph replayed back to
    // back (device time), and the host's empty round trip to the GPU.
    ltserve::BatchShape shape;
    shape.batch_size = batch;
    const double untimed =
        MedianUs([&] { (void)instances[1]->Execute(shape, nullptr); }, Iterations(batch));
    auto launch_wait = timer->TimeLaunchAndWait(batch, Iterations(batch));
    auto back_to_back = timer->TimeForward(batch, Iterations(batch));
    auto round_trip = timer->TimeRoundTrip(Iterations(batch));
    if (!launch_wait.ok() || !back_to_back.ok() || !round_trip.ok()) return 1;
    std::printf("| %ld | %.1f | %.1f | %.3f | %.1f | %.1f | %.1f | %.1f |\n",
                static_cast<long>(batch), separate, in_graph, in_graph / separate, untimed,
                launch_wait.value(), back_to_back.value(), round_trip.value());
  }
  std::fflush(stdout);
  return 0;
}

// Holds a PM QoS request for no CPU wake-up latency (/dev/cpu_dma_latency at 0, as the
// latency-performance tuning profiles set it) while it lives: the kernel keeps every core out
// of its deep idle states, machine-wide. Needs root; `ok()` says whether it took.
class NoDeepIdle {
 public:
  NoDeepIdle() : fd_(::open("/dev/cpu_dma_latency", O_WRONLY)) {
    const std::int32_t zero = 0;
    if (fd_ < 0) {
      error_ = std::strerror(errno);
    } else if (::write(fd_, &zero, sizeof(zero)) != sizeof(zero)) {
      error_ = std::strerror(errno);
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~NoDeepIdle() {
    if (fd_ >= 0) ::close(fd_);
  }
  NoDeepIdle(const NoDeepIdle&) = delete;
  NoDeepIdle& operator=(const NoDeepIdle&) = delete;
  bool ok() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }

 private:
  int fd_;
  std::string error_;
};

double Percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return values[static_cast<std::size_t>(q * (values.size() - 1))];
}

// A lone request at concurrency 1 reaches Execute on a gRPC thread that slept in epoll until the
// request came: the served trace shows ~25 µs more host time around the same graph than this
// benchmark's hot loop. Here the host does, before each lone Execute (and before each bare graph
// launch), what it does between requests: nothing, spin, sleep, sleep and then stream through
// memory as a stand-in for gRPC's parsing (cold caches), and sleep with the cores kept out of
// deep idle states. Which of them brings the extra time back says where it comes from.
int BenchLoneAfterIdle(const std::string& name, const std::string& path) {
  auto module = torch::jit::load(path);
  auto plan = Lower(module);
  if (plan == nullptr || !plan->Validate().ok()) return 1;
  const ltserve::ModelSpec spec = Fp32IoSpec(name, *plan);
  auto model = ltserve::gpu::LoadGpuModel(plan, spec, std::nullopt);
  if (!model.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), model.status().ToString().c_str());
    return 1;
  }
  auto factory = ltserve::gpu::CreateGpuFactory(model.value());
  auto instance = factory->CreateInstance(0);
  auto timer = GpuForwardTimer::Create(model.value());
  if (!instance.ok() || !timer.ok()) return 1;
  ltserve::ExecutorInstance& exec = *instance.value();
  constexpr std::int64_t kRows = 1;
  constexpr auto kGap = std::chrono::microseconds(300);  // ~ a concurrency-1 round trip
  constexpr int kPasses = 400;
  auto in = exec.InputBuffer(0, kRows * plan->input_width() * sizeof(float));
  if (!in.ok()) return 1;
  std::vector<float> rows(static_cast<std::size_t>(kRows * plan->input_width()));
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i % 17) * 0.01f - 0.08f;
  std::memcpy(in.value().data(), rows.data(), in.value().size());
  std::vector<std::uint64_t> sweep(std::size_t{16} << 17);  // 16 MiB
  for (std::size_t i = 0; i < sweep.size(); ++i) sweep[i] = i;
  volatile std::uint64_t sink = 0;

  const auto spin = [&] {
    const auto until = std::chrono::steady_clock::now() + kGap;
    while (std::chrono::steady_clock::now() < until) {
    }
  };
  const auto sleep = [&] { std::this_thread::sleep_for(kGap); };
  const auto sleep_then_sweep = [&] {
    sleep();
    std::uint64_t sum = 0;
    for (std::uint64_t v : sweep) sum += v;
    sink = sum;
  };
  struct Row {
    const char* between;
    std::function<void()> gap;
    bool no_deep_idle;
  };
  const Row table[] = {{"nothing (back to back)", [] {}, false},
                       {"300 µs spinning", spin, false},
                       {"300 µs asleep", sleep, false},
                       {"300 µs asleep, then 16 MiB read", sleep_then_sweep, false},
                       {"300 µs asleep, deep idle states off", sleep, true},
                       {"300 µs asleep then 16 MiB read, deep idle states off", sleep_then_sweep,
                        true}};
  std::printf("\n%s, FP32 in and out, %ld row: a lone pass after the host did something else "
              "(p50 [p90] µs of %d passes; Execute with copies in the graph and its phase "
              "timings, then the bare graph with events around it)\n\n",
              name.c_str(), static_cast<long>(kRows), kPasses);
  std::printf("| between passes | Execute | graph: launch call | graph: host wait | graph: device "
              "time |\n|---|---:|---:|---:|---:|\n");
  for (const Row& row : table) {
    std::unique_ptr<NoDeepIdle> held;
    if (row.no_deep_idle) {
      held = std::make_unique<NoDeepIdle>();
      if (!held->ok()) {
        std::printf("| %s | not run: /dev/cpu_dma_latency: %s | | | |\n", row.between,
                    held->error().c_str());
        continue;
      }
    }
    ltserve::BatchShape shape;
    shape.batch_size = kRows;
    ltserve::ExecuteTimings timings;
    std::vector<double> execute_us;
    for (int i = 0; i < kPasses; ++i) {
      row.gap();
      const auto start = std::chrono::steady_clock::now();
      if (!exec.Execute(shape, &timings).ok()) return 1;
      execute_us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count());
    }
    auto lone = timer.value()->TimeLoneLaunches(kRows, kPasses, row.gap);
    if (!lone.ok()) return 1;
    const auto cell = [](const std::vector<double>& v) {
      char text[48];
      std::snprintf(text, sizeof(text), "%.1f [%.1f]", Percentile(v, 0.5), Percentile(v, 0.9));
      return std::string(text);
    };
    std::printf("| %s | %s | %s | %s | %s |\n", row.between, cell(execute_us).c_str(),
                cell(lone.value().launch_us).c_str(), cell(lone.value().wait_us).c_str(),
                cell(lone.value().device_us).c_str());
    std::fflush(stdout);
  }
  (void)sink;
  return 0;
}

// The MLP's pass kernel by kernel as it runs in the graph (kernel_timeline.h), at 1, 8 and 32
// rows, with the load's choices (the default options) and with `layer_chain_kernel auto`.
int PrintMlpTimelines(const std::string& name, const std::string& path) {
  auto module = torch::jit::load(path);
  auto plan = Lower(module);
  if (plan == nullptr || !plan->Validate().ok()) return 1;
  int failures = 0;
  for (const bool chain : {false, true}) {
    ltserve::ModelSpec spec = Fp32IoSpec(name, *plan);
    if (chain) spec.options.layer_chain = ltserve::OwnKernelMode::kAuto;
    auto model = ltserve::gpu::LoadGpuModel(plan, spec, std::nullopt);
    if (!model.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), model.status().ToString().c_str());
      return failures + 1;
    }
    std::fprintf(stderr, "%s: %s\n", name.c_str(),
                 ltserve::gpu::CreateGpuFactory(model.value())->Describe().c_str());
    auto timer = GpuForwardTimer::Create(model.value());
    if (!timer.ok()) return failures + 1;
    for (const std::int64_t rows : {1, 8, 32}) {
      auto warm = timer.value()->TimeForward(rows, 20);
      if (auto status = StartKernelTimeline(); !warm.ok() || !status.ok()) {
        std::fprintf(stderr, "timeline: %s\n",
                     (warm.ok() ? status : warm.status()).ToString().c_str());
        return failures + 1;
      }
      auto timed = timer.value()->TimeForward(rows, 7);
      auto spans = StopKernelTimeline();
      if (!timed.ok() || !spans.ok()) {
        ++failures;
        continue;
      }
      PrintKernelTimeline(spans.value(), 2,
                          name + ", FP32 in and out, " + std::to_string(rows) + " rows, " +
                              (chain ? "layer_chain_kernel auto" : "default options") +
                              ", graph replays under CUPTI (mean " + std::to_string(timed.value()) +
                              " µs a pass as timed)");
    }
  }
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [max_batch] [copies | skinny | skinny-profile | skinny-profile-128 | chain | chain-ab | chain-trace | norm | attention | layernorm | gemm-search | search-ab | pass-ab | launch-ab | staged-ab | workspace-ab | memset-ab | cutlass-ab | cutlass-table | timeline | idle]\n", argv[0]);
    return 2;
  }
  std::string reason;
  if (!ltserve::GpuAvailable(&reason) || !torch::cuda::is_available()) {
    std::fprintf(stderr, "no GPU: %s\n", reason.c_str());
    return 0;
  }
  const std::string dir = argv[1];
  const std::int64_t max_batch = argc > 2 ? std::stoll(argv[2]) : 8192;
  if (argc > 3 && std::string(argv[3]) == "copies") {
    // Only the lone-request anatomy (the served benchmark's run prints it beside its tables).
    return BenchCopiesInGraph("MLP 1024-4096-4096-1024 ReLU", dir + "/mlp.pt");
  }
  if (argc > 3 && std::string(argv[3]) == "skinny-profile") return ProfileFewRowGemms();
  if (argc > 3 && std::string(argv[3]) == "skinny-profile-128") return ProfileWideGemms();
  if (argc > 3 && std::string(argv[3]) == "skinny") {
    // The few-row kernels' tables alone: one GEMM at a time, then the MLP's layers as a graph.
    return PrintSkinnyGemmTable(MeasureCopyTBps());
  }
  if (argc > 3 && std::string(argv[3]) == "chain-trace") return PrintChainRingTrace();
  // CUTLASS's tiles and schedules against cuBLASLt on BERT-base's GEMMs, alone and as a graph.
  if (argc > 3 && std::string(argv[3]) == "cutlass-table") return PrintCutlassGemmTable();
  if (argc > 3 && (std::string(argv[3]) == "chain" || std::string(argv[3]) == "chain-profile")) {
    // The layer-chain kernel alone: its table, or one launch of each configuration to profile.
    return PrintChainGemmTable(MeasureCopyTBps(), std::string(argv[3]) == "chain-profile");
  }
  if (argc > 3 && (std::string(argv[3]) == "norm" || std::string(argv[3]) == "norm-profile")) {
    // The GEMM + LayerNorm kernel alone: its table, or one launch of each configuration to profile.
    return PrintNormGemmTable(MeasureCopyTBps(), std::string(argv[3]) == "norm-profile");
  }
  if (argc > 3 && (std::string(argv[3]) == "attention" || std::string(argv[3]) == "attention-profile")) {
    // The attention kernel alone: its table, or one launch per batch to profile.
    return PrintAttentionTable(MeasureCopyTBps(), std::string(argv[3]) == "attention-profile");
  }
  if (argc > 3 && (std::string(argv[3]) == "layernorm" || std::string(argv[3]) == "layernorm-profile")) {
    // The LayerNorm kernel's two schedules: their table, or one launch of each to profile.
    return PrintLayerNormTable(MeasureCopyTBps(), std::string(argv[3]) == "layernorm-profile");
  }
  if (argc > 3 && std::string(argv[3]) == "gemm-search") {
    // cuBLASLt's heuristic against every configuration it accepts, BERT-base's GEMMs.
    return PrintGemmSearchTable(MeasurePeakTflops());
  }
  if (argc > 3 && std::string(argv[3]) == "staged-ab") {
    // In the MLP's graphs, every bucket to 128 (the staged-weights kernel's rows): that kernel
    // where it times faster, then on every GEMM, against the defaults.
    auto module = torch::jit::load(dir + "/mlp.pt");
    auto plan = Lower(module);
    if (plan == nullptr || !plan->Validate().ok()) return 1;
    const std::int64_t batches[] = {1, 2, 4, 8, 16, 32, 64, 128};
    const std::string name = "MLP 1024-4096-4096-1024 ReLU";
    return PrintOptionAB(name + ", FP32 in and out", StagedGemmAB(), plan,
                         Fp32IoSpec(name, *plan), std::nullopt, batches, 0) +
           PrintOptionAB(name + ", FP32 in and out", StagedEverywhereAB(), plan,
                         Fp32IoSpec(name, *plan), std::nullopt, batches, 0);
  }
  if (argc > 3 && (std::string(argv[3]) == "workspace-ab" || std::string(argv[3]) == "memset-ab" ||
                   std::string(argv[3]) == "cutlass-ab")) {
    // The MLP from one row to the large batches, where cuBLASLt's persistent kernels run:
    // cuBLASLt's workspace at its default against 1 byte (no memset nodes before those
    // kernels), its counter memsets as one a pass against one a GEMM, or CUTLASS's GEMMs
    // against cuBLASLt and the own kernels.
    auto module = torch::jit::load(dir + "/mlp.pt");
    auto plan = Lower(module);
    if (plan == nullptr || !plan->Validate().ok()) return 1;
    const std::int64_t batches[] = {1, 8, 32, 256, 2048, 8192};
    const std::string name = "MLP 1024-4096-4096-1024 ReLU";
    ltserve::ModelSpec spec = Fp32IoSpec(name, *plan);
    spec.max_batch_size = 8192;
    const std::string mode = argv[3];
    const OptionAB ab = mode == "workspace-ab" ? WorkspaceAB()
                        : mode == "memset-ab"  ? MemsetConsolidationAB()
                                               : CutlassGemmAB();
    if (mode == "cutlass-ab") {
      return PrintOptionAB(name + ", FP32 in and out", CutlassGemmAutoAB(), plan, spec,
                           std::nullopt, batches, 0) +
             PrintOptionAB(name + ", FP32 in and out", ab, plan, spec, std::nullopt, batches, 0);
    }
    return PrintOptionAB(name + ", FP32 in and out", ab, plan, spec, std::nullopt, batches, 0);
  }
  if (argc > 3 && std::string(argv[3]) == "launch-ab") {
    // In the MLP's graphs, every bucket to 256: programmatic launch on against off, then
    // chosen per bucket (auto) against on.
    auto module = torch::jit::load(dir + "/mlp.pt");
    auto plan = Lower(module);
    if (plan == nullptr || !plan->Validate().ok()) return 1;
    const std::int64_t batches[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    const std::string name = "MLP 1024-4096-4096-1024 ReLU";
    return PrintOptionAB(name + ", FP32 in and out", ProgrammaticLaunchAB(), plan,
                         Fp32IoSpec(name, *plan), std::nullopt, batches, 0) +
           PrintOptionAB(name + ", FP32 in and out", ProgrammaticAutoAB(), plan,
                         Fp32IoSpec(name, *plan), std::nullopt, batches, 0);
  }
  if (argc > 3 && (std::string(argv[3]) == "search-ab" || std::string(argv[3]) == "pass-ab")) {
    // In the MLP's graphs, every bucket to 256: the wide cuBLASLt search against the
    // heuristic, or own-kernel choices checked in the pass against per kernel.
    auto module = torch::jit::load(dir + "/mlp.pt");
    auto plan = Lower(module);
    if (plan == nullptr || !plan->Validate().ok()) return 1;
    const std::int64_t batches[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    return PrintOptionAB("MLP 1024-4096-4096-1024 ReLU, FP32 in and out",
                         std::string(argv[3]) == "search-ab" ? GemmSearchAB() : KernelsInPassAB(),
                         plan, Fp32IoSpec("MLP 1024-4096-4096-1024 ReLU", *plan), std::nullopt,
                         batches, 0);
  }
  if (argc > 3 && std::string(argv[3]) == "chain-ab") {
    // In the MLP's graphs at every bucket the layer-chain kernel may take: where the load
    // times it faster (either schedule) against never.
    auto module = torch::jit::load(dir + "/mlp.pt");
    auto plan = Lower(module);
    if (plan == nullptr || !plan->Validate().ok()) return 1;
    const std::int64_t batches[] = {1, 2, 4, 8, 16, 32};
    return PrintOptionAB("MLP 1024-4096-4096-1024 ReLU, FP32 in and out", LayerChainAB(), plan,
                         Fp32IoSpec("MLP 1024-4096-4096-1024 ReLU", *plan), std::nullopt, batches,
                         0);
  }
  if (argc > 3 && std::string(argv[3]) == "timeline") {
    return PrintMlpTimelines("MLP 1024-4096-4096-1024 ReLU", dir + "/mlp.pt");
  }
  if (argc > 3 && std::string(argv[3]) == "idle") {
    return BenchLoneAfterIdle("MLP 1024-4096-4096-1024 ReLU", dir + "/mlp.pt");
  }
  try {
    const double peak = MeasurePeakTflops();
    const double copy = MeasureCopyTBps();
    std::printf("measured: bf16 matmul peak %.0f TFLOP/s (8192^3 torch.mm), copy %.2f TB/s "
                "(2 GiB device-to-device, read+write)\n\n", peak, copy);
    std::printf("| model | batch | floor µs | ltserve graph µs | ltserve Execute e2e µs | "
                "torch eager µs | torch graph µs | torch graph / ltserve | torch eager / ltserve "
                "| ltserve / floor | ltserve %% of peak |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    int failures = 0;
    failures += BenchModel("MLP 1024-4096-4096-1024 ReLU", dir + "/mlp.pt", max_batch, peak, copy);
    failures += BenchModel("FFN 4096-16384-4096 GELU(tanh)", dir + "/ffn.pt", max_batch, peak, copy);
    failures += PrintSkinnyGemmTable(copy);
    failures += PrintChainGemmTable(copy, /*profile=*/false);
    failures += PrintAttentionTable(copy, /*profile=*/false);
    failures += BenchOwnKernelsAndLaunch("MLP 1024-4096-4096-1024 ReLU", dir + "/mlp.pt");
    failures += BenchCopiesInGraph("MLP 1024-4096-4096-1024 ReLU", dir + "/mlp.pt");
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench failed: %s\n", error.what());
    return 1;
  }
}
