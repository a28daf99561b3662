// Prometheus metrics for ltserve: one registry, the families named in docs/architecture.md (the
// contract with dashboards and alerts), and the text exposition served at /metrics.
//
// The scheduler never sees Prometheus: each model's ModelStats forwards its events to a
// StatsObserver made here, which moves that model's counters and histograms. Serialization uses
// prometheus-cpp's registry and text serializer only; the HTTP side lives in server/http because
// prometheus-cpp's civetweb Exposer cannot start threads in a process that links cuBLASLt.
//
// Thread-safety: every method may be called from any thread concurrently; observers too.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "scheduler/model_stats.h"

namespace ltserve {

// Latency bounds from 2.5 µs to 10 s: GPU batches of a small MLP take tens of microseconds, so
// Prometheus' default buckets (5 ms and up) would put every observation in the first one.
std::vector<double> DefaultLatencyBuckets();
// Powers of two from 1 to 8192, the range of batch sizes the batcher forms.
std::vector<double> DefaultBatchSizeBuckets();

struct MetricsOptions {
  // Upper bounds of the duration histograms, in seconds; strictly increasing, finite, non-empty.
  std::vector<double> latency_buckets_s = DefaultLatencyBuckets();
  // Upper bounds of ltserve_batch_size; same rules.
  std::vector<double> batch_size_buckets = DefaultBatchSizeBuckets();
  // Where the GPU gauges come from; loaded at run time so that a machine without the NVIDIA
  // driver still runs (the gauges are then absent). Tests point it elsewhere.
  std::string nvml_library = "libnvidia-ml.so.1";
};

struct MetricFamilies;
class GpuGauges;

class Metrics {
 public:
  // Fails with INVALID_ARGUMENT on bad bucket bounds.
  static Result<std::unique_ptr<Metrics>> Create(MetricsOptions options = {});
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // An observer that feeds the series labelled {model, version}. Owned by the caller; it must
  // not outlive this object. Two observers for the same labels share the same series, so a
  // reloaded model keeps counting where it left off (counters must never go back).
  std::unique_ptr<StatsObserver> CreateModelObserver(const std::string& model,
                                                     const std::string& version);

  // ltserve_model_load_duration_seconds{model, version, path}; a later call for the same model
  // and version replaces the series (the path may differ after a reload). `path` is
  // ExecutionPathName()'s text.
  void SetModelLoad(const std::string& model, const std::string& version, const char* path,
                    double load_seconds);
  void SetModelReady(const std::string& model, const std::string& version, bool ready);
  // ltserve_unauthenticated_requests_total{protocol}: one request refused for its token;
  // `protocol` is the transport, "grpc" or "http".
  void CountUnauthenticated(std::string_view protocol);
  // ltserve_grpc_unauthenticated_total{protocol}: one gRPC call refused, by Triton's protocol
  // group of its method ("inference", "model-repository", ...).
  void CountGrpcUnauthenticated(std::string_view protocol);

  // Prometheus text format (version 0.0.4). Reads the GPU gauges first, so they are as fresh
  // as the scrape.
  std::string Serialize();

 private:
  Metrics(MetricsOptions options, std::unique_ptr<MetricFamilies> families,
          std::unique_ptr<GpuGauges> gpu);

  const MetricsOptions options_;
  std::unique_ptr<MetricFamilies> families_;
  std::unique_ptr<GpuGauges> gpu_;  // null without NVML or a GPU
};

}  // namespace ltserve
