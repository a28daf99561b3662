#include "metrics/families.h"

namespace ltserve {

namespace {

using prometheus::Registry;

prometheus::Family<prometheus::Counter>& Counter(Registry& r, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}
prometheus::Family<prometheus::Gauge>& Gauge(Registry& r, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}
prometheus::Family<prometheus::Histogram>& Histogram(Registry& r, const char* name,
                                                     const char* help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r);
}

}  // namespace

// Names and meanings are the contract in docs/architecture.md; change them only there first.
MetricFamilies::MetricFamilies()
    : request_success(Counter(registry, "ltserve_request_success_total",
                              "Inference requests answered OK.")),
      request_failure(Counter(registry, "ltserve_request_failure_total",
                              "Inference requests that failed, by reason.")),
      inference_count(Counter(registry, "ltserve_inference_count_total",
                              "Samples inferred; a request of batch 8 counts 8.")),
      execution_count(Counter(registry, "ltserve_execution_count_total",
                              "Batches executed; inference count over this is the mean batch size.")),
      pending_requests(Gauge(registry, "ltserve_pending_requests",
                             "Requests accepted by the scheduler and not yet answered.")),
      request_duration(Histogram(registry, "ltserve_request_duration_seconds",
                                 "Successful requests, arrival to response.")),
      queue_duration(Histogram(registry, "ltserve_queue_duration_seconds",
                               "Successful requests, time waiting in the scheduler queue.")),
      compute_input_duration(Histogram(registry, "ltserve_compute_input_duration_seconds",
                                       "Per batch: input staging and host-to-device copies.")),
      compute_infer_duration(Histogram(registry, "ltserve_compute_infer_duration_seconds",
                                       "Per batch: the forward pass.")),
      compute_output_duration(Histogram(registry, "ltserve_compute_output_duration_seconds",
                                        "Per batch: device-to-host copies and output slicing.")),
      batch_size(Histogram(registry, "ltserve_batch_size", "Sizes of executed batches.")),
      model_load_duration(Gauge(registry, "ltserve_model_load_duration_seconds",
                                "Model load and warm-up time, by execution path.")),
      model_ready(Gauge(registry, "ltserve_model_ready", "1 when the model serves requests.")),
      unauthenticated(Counter(registry, "ltserve_unauthenticated_requests_total",
                              "Requests refused for a missing or wrong bearer token, by protocol.")),
      build_info(Gauge(registry, "ltserve_build_info",
                       "Always 1; the labels say the version and whether CUDA was built in.")),
      grpc_unauthenticated(Counter(registry, "ltserve_grpc_unauthenticated_total",
                              "gRPC calls refused UNAUTHENTICATED (a missing or wrong token), by protocol.")) {}

}  // namespace ltserve
