#include "scheduler/model_stats.h"

#include <chrono>

namespace ltserve {

const char* FailureReasonName(FailureReason reason) {
  switch (reason) {
    case FailureReason::kInvalidInput: return "invalid_input";
    case FailureReason::kQueueFull: return "queue_full";
    case FailureReason::kTimeout: return "timeout";
    case FailureReason::kCancelled: return "cancelled";
    case FailureReason::kUnavailable: return "unavailable";
    case FailureReason::kInternal: return "internal";
  }
  return "internal";
}

namespace {

void Add(Duration& d, std::uint64_t ns) {
  d.count += 1;
  d.ns += ns;
}

std::uint64_t NowMs() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

void ModelStats::RecordSuccess(std::uint64_t request_ns, std::uint64_t queue_ns,
                               const ExecuteTimings& batch_timings, std::int64_t batch_size) {
  {
    std::lock_guard lock(mutex_);
    Add(stats_.success, request_ns);
    Add(stats_.queue, queue_ns);
    Add(stats_.compute_input, batch_timings.input_ns);
    Add(stats_.compute_infer, batch_timings.infer_ns);
    Add(stats_.compute_output, batch_timings.output_ns);
    stats_.inference_count += static_cast<std::uint64_t>(batch_size);
    stats_.last_inference_ms = NowMs();
  }
  if (observer_ != nullptr) observer_->OnRequestSuccess(request_ns, queue_ns, batch_size);
}

void ModelStats::RecordFailure(FailureReason reason, std::uint64_t request_ns) {
  {
    std::lock_guard lock(mutex_);
    Add(stats_.fail, request_ns);
    stats_.failures_by_reason[reason] += 1;
  }
  if (observer_ != nullptr) observer_->OnRequestFailure(reason, request_ns);
}

void ModelStats::RecordBatch(std::int64_t batch_size, const ExecuteTimings& timings) {
  {
    std::lock_guard lock(mutex_);
    stats_.execution_count += 1;
    BatchSizeStats& by_size = stats_.by_batch_size[batch_size];
    Add(by_size.compute_input, timings.input_ns);
    Add(by_size.compute_infer, timings.infer_ns);
    Add(by_size.compute_output, timings.output_ns);
  }
  if (observer_ != nullptr) observer_->OnBatchExecuted(batch_size, timings);
}

void ModelStats::RecordPending(std::int64_t delta) {
  if (observer_ != nullptr) observer_->OnPendingChanged(delta);
}

ModelStatsSnapshot ModelStats::Snapshot() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace ltserve
