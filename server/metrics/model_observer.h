// The StatsObserver that Metrics::CreateModelObserver hands out: it resolves one model's series
// once, at creation, so that each event is a few atomic adds and no label lookups.
//
// Thread-safety: every method may be called from any thread concurrently (prometheus-cpp's
// metrics are thread-safe).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "metrics/families.h"
#include "scheduler/model_stats.h"

namespace ltserve {

// Every FailureReason, so that each model exports all of its failure series from the start: a
// series that appears only at the first failure makes rate() miss that failure.
inline constexpr std::array kAllFailureReasons = {
    FailureReason::kInvalidInput, FailureReason::kQueueFull,   FailureReason::kTimeout,
    FailureReason::kCancelled,    FailureReason::kUnavailable, FailureReason::kInternal,
};

class ModelObserver final : public StatsObserver {
 public:
  ModelObserver(MetricFamilies& families, const prometheus::Labels& labels,
                const std::vector<double>& latency_buckets_s,
                const std::vector<double>& batch_size_buckets);

  void OnRequestSuccess(std::uint64_t request_ns, std::uint64_t queue_ns,
                        std::int64_t batch_size) override;
  // Failed requests count by reason but stay out of the latency histograms: a rejection by a
  // full queue answers in microseconds and would pull the served requests' percentiles down.
  void OnRequestFailure(FailureReason reason, std::uint64_t request_ns) override;
  void OnBatchExecuted(std::int64_t batch_size, const ExecuteTimings& timings) override;
  void OnPendingChanged(std::int64_t delta) override;

 private:
  prometheus::Counter& success_;
  std::array<prometheus::Counter*, kAllFailureReasons.size()> failures_{};
  prometheus::Counter& inferences_;
  prometheus::Counter& executions_;
  prometheus::Gauge& pending_;
  prometheus::Histogram& request_duration_;
  prometheus::Histogram& queue_duration_;
  prometheus::Histogram& compute_input_;
  prometheus::Histogram& compute_infer_;
  prometheus::Histogram& compute_output_;
  prometheus::Histogram& batch_size_;
};

}  // namespace ltserve
