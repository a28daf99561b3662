// Metrics: what each observer event does to the exposition, labels, the contract's metric
// types, bucket options, load/ready/build-info gauges, the GPU gauges and promtool's verdict.
#include "metrics/metrics.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <limits>
#include <map>
#include <thread>

#include "exposition.h"
#include "metrics_test_util.h"
#include "promtool.h"
#include "scheduler/model_stats.h"

namespace ltserve {
namespace {

using testing::Exposition;
using testing::ExpectHistogram;
using testing::LabelSet;

// Every FailureReason, listed here independently of server/metrics.
constexpr FailureReason kReasons[] = {
    FailureReason::kInvalidInput, FailureReason::kQueueFull,   FailureReason::kTimeout,
    FailureReason::kCancelled,    FailureReason::kUnavailable, FailureReason::kInternal,
};

std::unique_ptr<Metrics> MakeMetrics(MetricsOptions options = {}) {
  auto metrics = Metrics::Create(std::move(options));
  EXPECT_TRUE(metrics.ok()) << metrics.status().ToString();
  return metrics.ok() ? std::move(metrics).value() : nullptr;
}

Exposition Scrape(Metrics& metrics) {
  Exposition exposition = testing::ParseExposition(metrics.Serialize());
  EXPECT_TRUE(exposition.errors.empty()) << "unreadable line: " << exposition.errors.front();
  return exposition;
}

LabelSet With(LabelSet labels, const std::string& name, const std::string& value) {
  labels[name] = value;
  return labels;
}

// prometheus-cpp writes 15 significant digits, not the 17 that would round-trip a double.
constexpr double kTextRelativePrecision = 1e-14;

void ExpectNearValue(const Exposition& x, const std::string& name, const LabelSet& labels,
                     double expected) {
  const std::optional<double> got = x.Value(name, labels);
  ASSERT_TRUE(got.has_value()) << name << " missing";
  EXPECT_NEAR(*got, expected, kTextRelativePrecision * std::abs(expected)) << name;
}

// What a model's events should add up to, kept by the test alongside ModelStats.
struct Expected {
  double successes = 0, inferences = 0, executions = 0, pending = 0;
  std::map<FailureReason, double> failures;
  std::vector<double> request_s, queue_s, input_s, infer_s, output_s, batch_sizes;
};

// Drives `stats` with a random mix of every kind of event and returns what they should sum to.
Expected DriveRandomEvents(ModelStats& stats, std::mt19937_64& rng, const MetricsOptions& options) {
  Expected e;
  auto ns = [&] { return testing::RandomNs(rng, options.latency_buckets_s); };
  const int requests = std::uniform_int_distribution<int>(50, 150)(rng);
  for (int i = 0; i < requests; ++i) {
    const std::uint64_t request_ns = ns(), queue_ns = ns();
    const std::int64_t samples = std::uniform_int_distribution<std::int64_t>(1, 64)(rng);
    stats.RecordSuccess(request_ns, queue_ns, ExecuteTimings{ns(), ns(), ns()}, samples);
    e.successes += 1;
    e.inferences += static_cast<double>(samples);
    e.request_s.push_back(static_cast<double>(request_ns) / 1e9);
    e.queue_s.push_back(static_cast<double>(queue_ns) / 1e9);
  }
  const int failures = std::uniform_int_distribution<int>(10, 60)(rng);
  for (int i = 0; i < failures; ++i) {
    const FailureReason reason = kReasons[std::uniform_int_distribution<std::size_t>(0, 5)(rng)];
    stats.RecordFailure(reason, ns());
    e.failures[reason] += 1;
  }
  const int batches = std::uniform_int_distribution<int>(20, 80)(rng);
  for (int i = 0; i < batches; ++i) {
    // Exact powers of two land on bucket bounds, which are inclusive ("le").
    const std::int64_t size = i % 3 == 0 ? std::int64_t{1} << (i % 14)
                                         : std::uniform_int_distribution<std::int64_t>(1, 10000)(rng);
    const ExecuteTimings t{ns(), ns(), ns()};
    stats.RecordBatch(size, t);
    e.executions += 1;
    e.batch_sizes.push_back(static_cast<double>(size));
    e.input_s.push_back(static_cast<double>(t.input_ns) / 1e9);
    e.infer_s.push_back(static_cast<double>(t.infer_ns) / 1e9);
    e.output_s.push_back(static_cast<double>(t.output_ns) / 1e9);
  }
  const int accepted = std::uniform_int_distribution<int>(5, 40)(rng);
  const int answered = std::uniform_int_distribution<int>(0, accepted)(rng);
  for (int i = 0; i < accepted; ++i) stats.RecordPending(+1);
  for (int i = 0; i < answered; ++i) stats.RecordPending(-1);
  e.pending = accepted - answered;
  return e;
}

void ExpectSeries(const Exposition& x, const LabelSet& model, const Expected& e,
                  const MetricsOptions& options) {
  EXPECT_EQ(x.Value("ltserve_request_success_total", model), e.successes);
  EXPECT_EQ(x.Value("ltserve_inference_count_total", model), e.inferences);
  EXPECT_EQ(x.Value("ltserve_execution_count_total", model), e.executions);
  EXPECT_EQ(x.Value("ltserve_pending_requests", model), e.pending);
  for (FailureReason reason : kReasons) {
    const auto it = e.failures.find(reason);
    EXPECT_EQ(x.Value("ltserve_request_failure_total", With(model, "reason", FailureReasonName(reason))),
              it == e.failures.end() ? 0.0 : it->second)
        << FailureReasonName(reason);
  }
  EXPECT_EQ(x.Matching("ltserve_request_failure_total", model).size(), std::size(kReasons));
  const auto& lat = options.latency_buckets_s;
  ExpectHistogram(x, "ltserve_request_duration_seconds", model, lat, e.request_s);
  ExpectHistogram(x, "ltserve_queue_duration_seconds", model, lat, e.queue_s);
  ExpectHistogram(x, "ltserve_compute_input_duration_seconds", model, lat, e.input_s);
  ExpectHistogram(x, "ltserve_compute_infer_duration_seconds", model, lat, e.infer_s);
  ExpectHistogram(x, "ltserve_compute_output_duration_seconds", model, lat, e.output_s);
  ExpectHistogram(x, "ltserve_batch_size", model, options.batch_size_buckets, e.batch_sizes);
}

TEST(MetricsTest, NewObserverExportsEverySeriesAtZero) {
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  auto observer = metrics->CreateModelObserver("mlp", "1");
  ExpectSeries(Scrape(*metrics), {{"model", "mlp"}, {"version", "1"}}, Expected{}, MetricsOptions{});
}

TEST(MetricsTest, ObserverEventsMoveEachModelsSeriesByTheExpectedAmounts) {
  std::mt19937_64 rng = testing::FreshRng();
  const MetricsOptions options;
  auto metrics = MakeMetrics(options);
  ASSERT_NE(metrics, nullptr);
  auto mlp_observer = metrics->CreateModelObserver("mlp", "1");
  auto encoder_observer = metrics->CreateModelObserver("encoder", "3");
  ModelStats mlp(mlp_observer.get());
  ModelStats encoder(encoder_observer.get());

  const Expected mlp_expected = DriveRandomEvents(mlp, rng, options);
  const Expected encoder_expected = DriveRandomEvents(encoder, rng, options);
  const Exposition x = Scrape(*metrics);
  {
    SCOPED_TRACE("mlp");
    ExpectSeries(x, {{"model", "mlp"}, {"version", "1"}}, mlp_expected, options);
  }
  {
    SCOPED_TRACE("encoder");
    ExpectSeries(x, {{"model", "encoder"}, {"version", "3"}}, encoder_expected, options);
  }
  // ModelStats and the metrics agree on the totals they both keep.
  const ModelStatsSnapshot snapshot = mlp.Snapshot();
  EXPECT_EQ(static_cast<double>(snapshot.inference_count), mlp_expected.inferences);
  EXPECT_EQ(static_cast<double>(snapshot.execution_count), mlp_expected.executions);
}

TEST(MetricsTest, SecondObserverForTheSameModelContinuesItsSeries) {
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  const LabelSet model{{"model", "mlp"}, {"version", "2"}};
  auto first = metrics->CreateModelObserver("mlp", "2");
  first->OnRequestSuccess(1000, 100, 3);
  first.reset();  // an unload
  auto second = metrics->CreateModelObserver("mlp", "2");
  second->OnRequestSuccess(2000, 200, 4);
  const Exposition x = Scrape(*metrics);
  EXPECT_EQ(x.Value("ltserve_request_success_total", model), 2.0);
  EXPECT_EQ(x.Value("ltserve_inference_count_total", model), 7.0);
}

TEST(MetricsTest, FailuresStayOutOfTheLatencyHistograms) {
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  auto observer = metrics->CreateModelObserver("mlp", "1");
  observer->OnRequestFailure(FailureReason::kQueueFull, 5000);
  const Exposition x = Scrape(*metrics);
  const LabelSet model{{"model", "mlp"}, {"version", "1"}};
  EXPECT_EQ(x.Value("ltserve_request_duration_seconds_count", model), 0.0);
  EXPECT_EQ(x.Value("ltserve_request_failure_total", With(model, "reason", "queue_full")), 1.0);
}

TEST(MetricsTest, TypesMatchTheContract) {
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  auto observer = metrics->CreateModelObserver("mlp", "1");
  metrics->SetModelLoad("mlp", "1", "cpu", 0.5);
  metrics->SetModelReady("mlp", "1", true);
  const std::map<std::string, std::string> contract = {
      {"ltserve_request_success_total", "counter"},
      {"ltserve_request_failure_total", "counter"},
      {"ltserve_inference_count_total", "counter"},
      {"ltserve_execution_count_total", "counter"},
      {"ltserve_pending_requests", "gauge"},
      {"ltserve_request_duration_seconds", "histogram"},
      {"ltserve_queue_duration_seconds", "histogram"},
      {"ltserve_compute_input_duration_seconds", "histogram"},
      {"ltserve_compute_infer_duration_seconds", "histogram"},
      {"ltserve_compute_output_duration_seconds", "histogram"},
      {"ltserve_batch_size", "histogram"},
      {"ltserve_model_load_duration_seconds", "gauge"},
      {"ltserve_model_ready", "gauge"},
      {"ltserve_build_info", "gauge"},
  };
  const Exposition x = Scrape(*metrics);
  for (const auto& [name, type] : contract) {
    const auto it = x.types.find(name);
    ASSERT_NE(it, x.types.end()) << name << " has no TYPE line";
    EXPECT_EQ(it->second, type) << name;
  }
}

TEST(MetricsTest, ConfiguredBucketsReplaceTheDefaults) {
  MetricsOptions options;
  options.latency_buckets_s = {0.001, 0.01, 0.1};
  options.batch_size_buckets = {1, 3, 17};
  auto metrics = MakeMetrics(options);
  ASSERT_NE(metrics, nullptr);
  auto observer = metrics->CreateModelObserver("m", "1");
  const std::vector<double> latencies_ns = {5e5, 1e6, 2e6, 5e8};  // 1e6 ns is exactly 0.001 s
  for (double ns : latencies_ns) observer->OnRequestSuccess(static_cast<std::uint64_t>(ns), 0, 1);
  const std::vector<double> sizes = {1, 2, 3, 17, 18};
  for (double size : sizes) observer->OnBatchExecuted(static_cast<std::int64_t>(size), {});
  const Exposition x = Scrape(*metrics);
  const LabelSet model{{"model", "m"}, {"version", "1"}};
  ExpectHistogram(x, "ltserve_request_duration_seconds", model, options.latency_buckets_s,
                  {5e-4, 1e-3, 2e-3, 0.5});
  ExpectHistogram(x, "ltserve_batch_size", model, options.batch_size_buckets, sizes);
}

TEST(MetricsTest, RejectsBadBuckets) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<std::vector<double>> bad = {
      {}, {0.1, 0.01}, {0.1, 0.1}, {0.1, nan}, {nan}, {0.1, inf}, {-inf, 1}};
  for (const auto& bounds : bad) {
    MetricsOptions latency;
    latency.latency_buckets_s = bounds;
    auto a = Metrics::Create(latency);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument) << a.status().ToString();
    MetricsOptions batch;
    batch.batch_size_buckets = bounds;
    auto b = Metrics::Create(batch);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument) << b.status().ToString();
  }
}

TEST(MetricsTest, LoadDurationFollowsTheLatestPathAndReadyFollowsTheModel) {
  std::mt19937_64 rng = testing::FreshRng();
  std::uniform_real_distribution<double> seconds(0.01, 100.0);
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  const LabelSet model{{"model", "mlp"}, {"version", "1"}};
  const double first = seconds(rng), second = seconds(rng);
  metrics->SetModelLoad("mlp", "1", "cpu", first);
  metrics->SetModelReady("mlp", "1", true);
  Exposition x = Scrape(*metrics);
  ExpectNearValue(x, "ltserve_model_load_duration_seconds", With(model, "path", "cpu"), first);
  EXPECT_EQ(x.Value("ltserve_model_ready", model), 1.0);

  metrics->SetModelLoad("mlp", "1", "gpu-fused", second);  // a reload that found a GPU
  metrics->SetModelReady("mlp", "1", false);
  x = Scrape(*metrics);
  EXPECT_EQ(x.Matching("ltserve_model_load_duration_seconds", model).size(), 1u);
  ExpectNearValue(x, "ltserve_model_load_duration_seconds", With(model, "path", "gpu-fused"),
                  second);
  EXPECT_EQ(x.Value("ltserve_model_ready", model), 0.0);
}

TEST(MetricsTest, BuildInfoSaysVersionAndCuda) {
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  const Exposition x = Scrape(*metrics);
  EXPECT_EQ(x.Value("ltserve_build_info",
                    {{"version", LTSERVE_TEST_VERSION}, {"cuda", LTSERVE_TEST_CUDA}}),
            1.0);
}

TEST(MetricsTest, UnauthenticatedCallsAreCountedByProtocol) {
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  metrics->CountGrpcUnauthenticated("inference");
  metrics->CountGrpcUnauthenticated("inference");
  metrics->CountGrpcUnauthenticated("model-config");
  const Exposition x = Scrape(*metrics);
  EXPECT_EQ(x.types.at("ltserve_grpc_unauthenticated_total"), "counter");
  EXPECT_EQ(x.Value("ltserve_grpc_unauthenticated_total", {{"protocol", "inference"}}), 2.0);
  EXPECT_EQ(x.Value("ltserve_grpc_unauthenticated_total", {{"protocol", "model-config"}}), 1.0);
  EXPECT_FALSE(x.Value("ltserve_grpc_unauthenticated_total", {{"protocol", "health"}}).has_value());
}

TEST(MetricsTest, NoGpuGaugesWithoutNvml) {
  MetricsOptions options;
  options.nvml_library = "libltserve-test-no-such-nvml.so.1";
  auto metrics = MakeMetrics(options);
  ASSERT_NE(metrics, nullptr);
  EXPECT_FALSE(Scrape(*metrics).HasFamily("ltserve_gpu_"));
}

TEST(MetricsTest, GpuGaugesAreSaneWithNvml) {
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr) GTEST_SKIP() << "no NVML here (libnvidia-ml.so.1): no GPU driver";
  dlclose(nvml);
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  const Exposition x = Scrape(*metrics);
  const auto totals = x.Matching("ltserve_gpu_memory_total_bytes", {});
  if (totals.empty()) GTEST_SKIP() << "NVML is present but reports no GPU";
  for (const auto& total : totals) {
    const LabelSet gpu = total.labels;
    SCOPED_TRACE("gpu " + gpu.at("gpu"));
    EXPECT_GT(total.value, 1e9) << "a datacenter GPU has gigabytes";
    const auto used = x.Value("ltserve_gpu_memory_used_bytes", gpu);
    const auto utilization = x.Value("ltserve_gpu_utilization_ratio", gpu);
    ASSERT_TRUE(used.has_value() && utilization.has_value());
    EXPECT_GE(*used, 0.0);
    EXPECT_LE(*used, total.value);
    EXPECT_GE(*utilization, 0.0);
    EXPECT_LE(*utilization, 1.0);
  }
  // nvidia-smi is what operators compare against. Its numbers are MiB and read a moment later,
  // and this process allocates nothing on the GPU, so a few MiB of drift is all another process
  // could add; the driver's reservation (hundreds of MiB) must not be in "used".
  constexpr double kMiB = 1024.0 * 1024.0;
  constexpr double kToleranceBytes = 64 * kMiB;
  const auto smi = testing::NvidiaSmiMemory();
  if (smi.empty()) GTEST_SKIP() << "nvidia-smi not available to cross-check memory";
  for (const auto& [gpu, used_total_mib] : smi) {
    const LabelSet labels{{"gpu", std::to_string(gpu)}};
    const auto used = x.Value("ltserve_gpu_memory_used_bytes", labels);
    const auto total = x.Value("ltserve_gpu_memory_total_bytes", labels);
    ASSERT_TRUE(used && total) << "gpu " << gpu << " missing";
    EXPECT_NEAR(*used, used_total_mib.first * kMiB, kToleranceBytes) << "gpu " << gpu;
    EXPECT_NEAR(*total, used_total_mib.second * kMiB, kMiB) << "gpu " << gpu;
  }
}

TEST(MetricsTest, PromtoolAcceptsTheExposition) {
  if (!testing::PromtoolAvailable()) GTEST_SKIP() << "promtool not on PATH (Debian package prometheus)";
  std::mt19937_64 rng = testing::FreshRng();
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  // Label values that need escaping must still give a valid exposition.
  auto plain_observer = metrics->CreateModelObserver("mlp", "1");
  auto odd_observer = metrics->CreateModelObserver("odd \"name\" \\ with\nnewline", "7");
  ModelStats plain(plain_observer.get()), odd(odd_observer.get());
  DriveRandomEvents(plain, rng, MetricsOptions{});
  DriveRandomEvents(odd, rng, MetricsOptions{});
  metrics->SetModelLoad("mlp", "1", "torchscript", 1.25);
  metrics->SetModelReady("mlp", "1", true);
  const std::string text = metrics->Serialize();
  const auto result = testing::PromtoolCheckMetrics(text);
  ASSERT_TRUE(result.has_value()) << "promtool could not be run";
  EXPECT_EQ(result->exit_code, 0) << result->output;
  EXPECT_EQ(result->output, "") << "promtool lint findings";
  EXPECT_EQ(Scrape(*metrics).Value("ltserve_request_success_total",
                                   {{"model", "odd \"name\" \\ with\nnewline"}, {"version", "7"}})
                .has_value(),
            true);
}

// The check above is only worth something if promtool, run this way, does reject bad text.
TEST(MetricsTest, PromtoolRunThisWayRejectsBadExpositions) {
  if (!testing::PromtoolAvailable()) GTEST_SKIP() << "promtool not on PATH (Debian package prometheus)";
  const auto broken = testing::PromtoolCheckMetrics("ltserve_x{model=\"a\" 1\n");
  ASSERT_TRUE(broken.has_value());
  EXPECT_NE(broken->exit_code, 0) << "accepted an unterminated label set";
  const auto unlinted =
      testing::PromtoolCheckMetrics("# HELP ltserve_x Requests.\n# TYPE ltserve_x counter\nltserve_x 1\n");
  ASSERT_TRUE(unlinted.has_value());
  EXPECT_NE(unlinted->output, "") << "no lint finding for a counter without _total";
}

TEST(MetricsTest, ConcurrentEventsAndScrapesLoseNothing) {
  constexpr int kThreads = 4;
  constexpr int kEventsPerThread = 5000;
  auto metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  auto observer = metrics->CreateModelObserver("mlp", "1");
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    while (!done.load()) EXPECT_FALSE(metrics->Serialize().empty());
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&] {
      for (int i = 0; i < kEventsPerThread; ++i) {
        observer->OnPendingChanged(+1);
        observer->OnBatchExecuted(2, ExecuteTimings{1000, 2000, 3000});
        observer->OnRequestSuccess(10000, 1000, 2);
        observer->OnPendingChanged(-1);
      }
    });
  }
  for (auto& w : workers) w.join();
  done = true;
  scraper.join();
  const Exposition x = Scrape(*metrics);
  const LabelSet model{{"model", "mlp"}, {"version", "1"}};
  constexpr double kEvents = double{kThreads} * kEventsPerThread;
  EXPECT_EQ(x.Value("ltserve_request_success_total", model), kEvents);
  EXPECT_EQ(x.Value("ltserve_inference_count_total", model), 2 * kEvents);
  EXPECT_EQ(x.Value("ltserve_execution_count_total", model), kEvents);
  EXPECT_EQ(x.Value("ltserve_batch_size_count", model), kEvents);
  EXPECT_EQ(x.Value("ltserve_pending_requests", model), 0.0);
}

}  // namespace
}  // namespace ltserve
