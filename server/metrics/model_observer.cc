#include "metrics/model_observer.h"

#include <cstddef>

namespace ltserve {

namespace {

double Seconds(std::uint64_t ns) { return static_cast<double>(ns) * 1e-9; }

prometheus::Labels With(prometheus::Labels labels, const char* name, const char* value) {
  labels.emplace(name, value);
  return labels;
}

std::size_t ReasonIndex(FailureReason reason) {
  for (std::size_t i = 0; i < kAllFailureReasons.size(); ++i) {
    if (kAllFailureReasons[i] == reason) return i;
  }
  return ReasonIndex(FailureReason::kInternal);  // a reason added later counts as internal
}

}  // namespace

ModelObserver::ModelObserver(MetricFamilies& families, const prometheus::Labels& labels,
                             const std::vector<double>& latency_buckets_s,
                             const std::vector<double>& batch_size_buckets)
    : success_(families.request_success.Add(labels)),
      inferences_(families.inference_count.Add(labels)),
      executions_(families.execution_count.Add(labels)),
      pending_(families.pending_requests.Add(labels)),
      request_duration_(families.request_duration.Add(labels, latency_buckets_s)),
      queue_duration_(families.queue_duration.Add(labels, latency_buckets_s)),
      compute_input_(families.compute_input_duration.Add(labels, latency_buckets_s)),
      compute_infer_(families.compute_infer_duration.Add(labels, latency_buckets_s)),
      compute_output_(families.compute_output_duration.Add(labels, latency_buckets_s)),
      batch_size_(families.batch_size.Add(labels, batch_size_buckets)) {
  for (std::size_t i = 0; i < kAllFailureReasons.size(); ++i) {
    failures_[i] = &families.request_failure.Add(
        With(labels, "reason", FailureReasonName(kAllFailureReasons[i])));
  }
}

void ModelObserver::OnRequestSuccess(std::uint64_t request_ns, std::uint64_t queue_ns,
                                     std::int64_t batch_size) {
  success_.Increment();
  if (batch_size > 0) inferences_.Increment(static_cast<double>(batch_size));
  request_duration_.Observe(Seconds(request_ns));
  queue_duration_.Observe(Seconds(queue_ns));
}

void ModelObserver::OnRequestFailure(FailureReason reason, std::uint64_t /*request_ns*/) {
  failures_[ReasonIndex(reason)]->Increment();
}

void ModelObserver::OnBatchExecuted(std::int64_t batch_size, const ExecuteTimings& timings) {
  executions_.Increment();
  batch_size_.Observe(static_cast<double>(batch_size));
  compute_input_.Observe(Seconds(timings.input_ns));
  compute_infer_.Observe(Seconds(timings.infer_ns));
  compute_output_.Observe(Seconds(timings.output_ns));
}

void ModelObserver::OnPendingChanged(std::int64_t delta) {
  pending_.Increment(static_cast<double>(delta));
}

}  // namespace ltserve
