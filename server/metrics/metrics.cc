#include "metrics/metrics.h"

#include <cmath>
#include <exception>
#include <sstream>

#include <prometheus/text_serializer.h>

#include "metrics/families.h"
#include "metrics/gpu_gauges.h"
#include "metrics/model_observer.h"

namespace ltserve {

namespace {

// Prometheus' histogram_quantile needs ordered, finite bounds; prometheus-cpp would throw.
Status CheckBuckets(const std::vector<double>& bounds, const char* what) {
  if (bounds.empty()) return InvalidArgument(std::string(what) + ": at least one bucket bound is needed");
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      return InvalidArgument(std::string(what) + ": bucket bounds must be finite, got " +
                             std::to_string(bounds[i]));
    }
    if (i > 0 && !(bounds[i - 1] < bounds[i])) {
      return InvalidArgument(std::string(what) + ": bucket bounds must increase strictly, got " +
                             std::to_string(bounds[i - 1]) + " then " + std::to_string(bounds[i]));
    }
  }
  return Status::Ok();
}

prometheus::Labels ModelLabels(const std::string& model, const std::string& version) {
  return {{"model", model}, {"version", version}};
}

}  // namespace

std::vector<double> DefaultLatencyBuckets() {
  // Written out rather than computed: repeated *10 leaves bounds like 2.5000000000000001e-05.
  return {2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
          1e-2,   2.5e-2, 5e-2, 0.1,  0.25, 0.5,  1.0,  2.5,  5.0,  10.0};
}

std::vector<double> DefaultBatchSizeBuckets() {
  std::vector<double> bounds;
  for (double size = 1; size <= 8192; size *= 2) bounds.push_back(size);
  return bounds;
}

Result<std::unique_ptr<Metrics>> Metrics::Create(MetricsOptions options) {
  LTSERVE_RETURN_IF_ERROR(CheckBuckets(options.latency_buckets_s, "latency histogram"));
  LTSERVE_RETURN_IF_ERROR(CheckBuckets(options.batch_size_buckets, "batch-size histogram"));
  try {
    auto families = std::make_unique<MetricFamilies>();
#ifdef LTSERVE_METRICS_CUDA
    const char* cuda = "yes";
#else
    const char* cuda = "no";
#endif
    families->build_info.Add({{"version", LTSERVE_METRICS_VERSION}, {"cuda", cuda}}).Set(1);
    auto gpu = GpuGauges::Create(families->registry, options.nvml_library);
    return std::unique_ptr<Metrics>(
        new Metrics(std::move(options), std::move(families), std::move(gpu)));
  } catch (const std::exception& e) {
    return Internal(std::string("creating the metrics registry: ") + e.what());
  }
}

Metrics::Metrics(MetricsOptions options, std::unique_ptr<MetricFamilies> families,
                 std::unique_ptr<GpuGauges> gpu)
    : options_(std::move(options)), families_(std::move(families)), gpu_(std::move(gpu)) {}

Metrics::~Metrics() = default;

std::unique_ptr<StatsObserver> Metrics::CreateModelObserver(const std::string& model,
                                                            const std::string& version) {
  return std::make_unique<ModelObserver>(*families_, ModelLabels(model, version),
                                         options_.latency_buckets_s, options_.batch_size_buckets);
}

void Metrics::SetModelLoad(const std::string& model, const std::string& version,
                           const char* path, double load_seconds) {
  prometheus::Labels labels = ModelLabels(model, version);
  labels.emplace("path", path != nullptr ? path : "unknown");
  std::lock_guard lock(families_->load_mutex);
  prometheus::Gauge*& series = families_->load_series[{model, version}];
  prometheus::Gauge& gauge = families_->model_load_duration.Add(labels);
  if (series != nullptr && series != &gauge) families_->model_load_duration.Remove(series);
  series = &gauge;
  gauge.Set(load_seconds);
}

void Metrics::SetModelReady(const std::string& model, const std::string& version, bool ready) {
  families_->model_ready.Add(ModelLabels(model, version)).Set(ready ? 1 : 0);
}

void Metrics::CountUnauthenticated(std::string_view protocol) {
  families_->unauthenticated.Add({{"protocol", std::string(protocol)}}).Increment();
}

void Metrics::CountGrpcUnauthenticated(std::string_view protocol) {
  families_->grpc_unauthenticated.Add({{"protocol", std::string(protocol)}}).Increment();
}

std::string Metrics::Serialize() {
  if (gpu_ != nullptr) gpu_->Refresh();
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families_->registry.Collect());
  return out.str();
}

}  // namespace ltserve
