// The registry and every metric family of server/metrics, created once in Metrics::Create.
// Private to the metrics target, like every prometheus-cpp type: the public header has none.
//
// Thread-safety: prometheus::Family and the metrics it holds are thread-safe; `load_series`
// is guarded by `load_mutex`.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace ltserve {

struct MetricFamilies {
  // Registers every family; throws what prometheus-cpp throws (Metrics::Create catches it).
  MetricFamilies();

  prometheus::Registry registry;
  prometheus::Family<prometheus::Counter>& request_success;
  prometheus::Family<prometheus::Counter>& request_failure;
  prometheus::Family<prometheus::Counter>& inference_count;
  prometheus::Family<prometheus::Counter>& execution_count;
  prometheus::Family<prometheus::Gauge>& pending_requests;
  prometheus::Family<prometheus::Histogram>& request_duration;
  prometheus::Family<prometheus::Histogram>& queue_duration;
  prometheus::Family<prometheus::Histogram>& compute_input_duration;
  prometheus::Family<prometheus::Histogram>& compute_infer_duration;
  prometheus::Family<prometheus::Histogram>& compute_output_duration;
  prometheus::Family<prometheus::Histogram>& batch_size;
  prometheus::Family<prometheus::Gauge>& model_load_duration;
  prometheus::Family<prometheus::Gauge>& model_ready;
  prometheus::Family<prometheus::Counter>& unauthenticated;
  prometheus::Family<prometheus::Gauge>& build_info;
  prometheus::Family<prometheus::Counter>& grpc_unauthenticated;

  std::mutex load_mutex;
  // The load-duration series of each {model, version}, to drop it when a reload changes `path`.
  std::map<std::pair<std::string, std::string>, prometheus::Gauge*> load_series;
};

}  // namespace ltserve
