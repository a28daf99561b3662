// The per-model dynamic batcher, with Triton's semantics so that a Triton config.pbtxt carries
// over: requests queue per priority level, a batch grows up to max_batch_size (stopping early at
// a preferred size), waits at most max_queue_delay_us counted from its oldest request, and its
// outputs are sliced back to each request without a copy.
//
// Data path: a request's bytes are copied exactly once, into the executing instance's input
// staging buffer; completions receive spans into the instance's output buffers.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "executor/executor.h"
#include "scheduler/model_stats.h"
#include "scheduler/request.h"
#include "scheduler/scheduler_options.h"

namespace ltserve {

// Thread-safety: Enqueue, RunClaimed, Cancel, Drain and pending() may be called from any thread
// concurrently. Each executor instance has one worker thread and is driven by it, or, while a
// caller holds a ClaimedRun for it, by that caller alone; the N workers pull batches from the
// shared queues concurrently.
class Scheduler {
 public:
  // An idle instance that Enqueue handed to its caller, with the request to run on it.
  class ClaimedRun {
   public:
    explicit operator bool() const { return worker_ != kNone; }

   private:
    friend class Scheduler;
    static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
    std::size_t worker_ = kNone;
  };

  // Fails with INVALID_ARGUMENT on inconsistent options (no instances or outputs, a null
  // instance or stats, default_priority_level outside [1, priority_levels], preferred sizes
  // outside [1, max_batch_size], a token layout without a batch dimension or inconsistent). `stats` must
  // outlive the scheduler.
  static Result<std::unique_ptr<Scheduler>> Create(
      SchedulerOptions options, std::vector<std::unique_ptr<ExecutorInstance>> instances,
      ModelStats* stats);

  // Drains with no grace: every request still queued is answered UNAVAILABLE; running batches
  // finish first. Must not run inside a completion callback (it joins the worker threads).
  ~Scheduler();

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Never blocks on execution. Accepted: returns a request id and on_complete will be called
  // exactly once. Rejected at once (batch size < 1 or larger than max_batch_size, an input whose
  // first dim is not batch_size, no inputs or no on_complete, with a token layout a missing,
  // zero or unequal sequence dim, a seq over max_sequence_length, more than max_batch_tokens
  // tokens, or a missing key-padding mask or one not [batch, seq]: INVALID_ARGUMENT; queue full:
  // RESOURCE_EXHAUSTED; draining: UNAVAILABLE): returns the error, records the failure in stats,
  // and on_complete is NOT called. A priority of 0 or above priority_levels means the default
  // level, as in Triton.
  Result<std::uint64_t> Enqueue(std::unique_ptr<InferenceRequest> request);

  // Enqueue, and where SchedulerOptions::run_on_caller_when_idle is set, the request would start
  // at once and an instance is idle, claims that instance for the caller instead of waking its
  // worker: `*claimed` is then set, and the caller must call RunClaimed(*claimed) once, soon,
  // holding no lock that on_complete takes. Until then the request counts as running (Cancel
  // leaves it; Drain waits for it).
  Result<std::uint64_t> Enqueue(std::unique_ptr<InferenceRequest> request, ClaimedRun* claimed);

  // Runs the claimed request on this thread (staging, Execute, on_complete), then gives the
  // instance back to its worker.
  void RunClaimed(ClaimedRun& claimed);

  // Client cancelled: a still-queued request is removed and answered CANCELLED; a running one
  // finishes; an unknown or answered id is ignored. A cancellation that arrives at most
  // kDeadlineCancelLead before the request's deadline is answered DEADLINE_EXCEEDED and counted
  // as a timeout: a client gives up at its own deadline, which falls before the server's by the
  // time its request took to arrive, and its cancellation can then reach us first.
  void Cancel(std::uint64_t request_id);
  static constexpr std::chrono::milliseconds kDeadlineCancelLead{25};

  // Graceful shutdown: refuse new requests (UNAVAILABLE), finish everything accepted until
  // `deadline`; then answer the rest UNAVAILABLE. Returns true when everything accepted
  // finished before the deadline. Idempotent; the workers stay alive until destruction.
  bool Drain(std::chrono::steady_clock::time_point deadline);

  // Accepted, not yet answered.
  std::size_t pending() const;

 private:
  struct Impl;  // defined in scheduler.cc
  explicit Scheduler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ltserve
