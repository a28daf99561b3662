// Per-model inference statistics: the numbers behind Triton's ModelStatistics RPC and the
// Prometheus metrics.
//
// The scheduler records every request outcome and every executed batch here; the gRPC layer
// records requests it rejects before they reach the scheduler (invalid input). ModelStats keeps
// Triton's cumulative counters (count + nanoseconds) and forwards each event to an optional
// StatsObserver, which is how server/metrics fills its histograms without the scheduler
// knowing about Prometheus.
//
// Thread-safety: every method may be called from any thread concurrently. Record* take one
// short mutex; Snapshot copies under it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "executor/executor.h"

namespace ltserve {

enum class FailureReason : std::uint8_t {
  kInvalidInput,  // INVALID_ARGUMENT before or at scheduling
  kQueueFull,     // RESOURCE_EXHAUSTED: max_queue_size reached
  kTimeout,       // DEADLINE_EXCEEDED in the queue
  kCancelled,     // client went away while queued
  kUnavailable,   // shutting down
  kInternal,      // executor failure
};
const char* FailureReasonName(FailureReason reason);  // "invalid_input", "queue_full", ...

struct Duration {
  std::uint64_t count = 0;
  std::uint64_t ns = 0;
};

struct BatchSizeStats {
  Duration compute_input;
  Duration compute_infer;
  Duration compute_output;
};

struct ModelStatsSnapshot {
  std::uint64_t last_inference_ms = 0;  // since the epoch
  std::uint64_t inference_count = 0;    // samples
  std::uint64_t execution_count = 0;    // batches
  Duration success;                     // request durations, arrival to response
  Duration fail;
  Duration queue;
  Duration compute_input;  // per request (each request in a batch counts the batch's time)
  Duration compute_infer;
  Duration compute_output;
  std::map<FailureReason, std::uint64_t> failures_by_reason;
  std::map<std::int64_t, BatchSizeStats> by_batch_size;  // per executed batch
};

// Receives every event as it happens; implemented by server/metrics.
// Called from scheduler and gRPC threads: implementations must be thread-safe and cheap.
class StatsObserver {
 public:
  virtual ~StatsObserver() = default;
  virtual void OnRequestSuccess(std::uint64_t request_ns, std::uint64_t queue_ns,
                                std::int64_t batch_size) = 0;
  virtual void OnRequestFailure(FailureReason reason, std::uint64_t request_ns) = 0;
  virtual void OnBatchExecuted(std::int64_t batch_size, const ExecuteTimings& timings) = 0;
  // +1 when a request is accepted by the scheduler, -1 when it is answered.
  virtual void OnPendingChanged(std::int64_t delta) = 0;
};

class ModelStats {
 public:
  // The observer may be null; it must outlive this object.
  explicit ModelStats(StatsObserver* observer = nullptr) : observer_(observer) {}

  // A request answered OK. `batch_size` is the request's own batch dimension (samples).
  void RecordSuccess(std::uint64_t request_ns, std::uint64_t queue_ns,
                     const ExecuteTimings& batch_timings, std::int64_t batch_size);
  void RecordFailure(FailureReason reason, std::uint64_t request_ns);
  // One executed batch of `batch_size` samples.
  void RecordBatch(std::int64_t batch_size, const ExecuteTimings& timings);
  void RecordPending(std::int64_t delta);

  ModelStatsSnapshot Snapshot() const;

 private:
  StatsObserver* const observer_;
  mutable std::mutex mutex_;
  ModelStatsSnapshot stats_;
};

}  // namespace ltserve
