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
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "common/data_type.h"
#include "common/status.h"
#include "executor/executor.h"
#include "scheduler/model_stats.h"

namespace ltserve {

// One per model input, in config order, already validated by the service.
struct RequestInput {
  // Row-major, batch first; points into memory kept alive by InferenceRequest::keep_alive.
  std::span<const std::byte> bytes;
  // Full shape as sent (batch dim first when max_batch_size > 0).
  std::vector<std::int64_t> shape;
};

struct OutputSlice {
  std::span<const std::byte> bytes;
  std::vector<std::int64_t> shape;
};

// Called exactly once per accepted request: from a worker thread, or inline from Cancel, Drain or
// the destructor (never from Enqueue). `outputs` (config order) are valid only during the call
// (the gRPC layer copies them into the response); on failure `outputs` is empty. It must not
// throw, and must not destroy the Scheduler.
using CompletionFn = std::function<void(const Status& status, std::span<const OutputSlice> outputs)>;

struct InferenceRequest {
  std::vector<RequestInput> inputs;
  std::int64_t batch_size = 1;     // the request's own batch dimension (1 when max_batch_size == 0)
  std::uint32_t priority = 0;      // 0: the model's default_priority_level; 1 is the highest
  std::uint64_t timeout_us = 0;    // the request's "timeout" parameter; 0: none
  std::chrono::steady_clock::time_point deadline =
      std::chrono::steady_clock::time_point::max();  // the gRPC deadline
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
  std::shared_ptr<const void> keep_alive;
  CompletionFn on_complete;
};

// Built from the ModelSpec and config.pbtxt's dynamic_batching.
struct SchedulerOptions {
  int max_batch_size = 0;  // 0: no batching dimension
  bool dynamic_batching = false;
  std::vector<int> preferred_batch_sizes;
  std::uint64_t max_queue_delay_us = 0;
  std::uint32_t priority_levels = 0;  // 0: one level
  std::uint32_t default_priority_level = 0;
  // A request expires at the earliest of its gRPC deadline, arrival + default_timeout_us, and
  // arrival + its own timeout_us, the last counted only when allow_timeout_override is set or
  // there is no default (so a request can shorten its wait, never lengthen it).
  struct QueuePolicy {
    std::uint64_t default_timeout_us = 0;  // 0: none
    bool allow_timeout_override = false;
    std::uint32_t max_queue_size = 0;      // 0: unbounded
  };
  QueuePolicy default_policy;
  std::map<std::uint32_t, QueuePolicy> priority_policies;  // by level; others use default_policy
  // Token models on the fused plan path (a plan whose input is InputKind::kTokens): every input
  // is [batch, seq, ...]; requests of different sequence lengths batch together, packed back to
  // back without padding; the executor gets one sequence length per sample and returns outputs
  // as [total tokens, ...], which reach each request as [batch, seq, ...].
  bool packed_sequences = false;
  // With packed_sequences: the most tokens one batch may hold (what an instance was sized for,
  // the GPU executor's max_tokens_per_batch); 0: no limit beyond max_batch_size. A longer request is
  // INVALID_ARGUMENT.
  std::int64_t max_batch_tokens = 0;
  // With packed_sequences: the longest seq one request may send (0: no limit). A longer request
  // is INVALID_ARGUMENT naming both numbers.
  std::int64_t max_sequence_length = 0;
  // With packed_sequences: the input (config order) that is a key-padding mask, BOOL
  // [batch, seq] with true = padding, or -1. The executor never sees it: staging copies only
  // the real tokens of the other inputs (each sample's real tokens, wherever they are, form one
  // sequence, possibly of 0 tokens), and each output comes back as [batch, seq, ...] with
  // zeros at the padded positions, scattered into a buffer each worker allocates at Create
  // (max_batch_tokens x output_token_bytes per output). Needs max_batch_tokens > 0 and
  // output_token_bytes.
  int key_padding_mask_input = -1;
  // With a key-padding mask: bytes of one token of each output (width x element size).
  std::vector<std::size_t> output_token_bytes;
  // One entry per model output, config order: the scheduler slices this many outputs.
  std::vector<DataType> output_types;
  // Per output, config order, the dims after the batch dimension (-1: any), or empty: not
  // checked. A batch whose outputs have other dims fails with INTERNAL rather than answering
  // shapes the model's metadata does not promise (kWhole and kRows layouts).
  std::vector<std::vector<std::int64_t>> output_dims;
};

// Thread-safety: Enqueue, Cancel, Drain and pending() may be called from any thread
// concurrently. Each executor instance has one worker thread and is driven only by it; the
// N workers pull batches from the shared queues concurrently.
class Scheduler {
 public:
  // Fails with INVALID_ARGUMENT on inconsistent options (no instances or outputs, a null
  // instance or stats, default_priority_level outside [1, priority_levels], preferred sizes
  // outside [1, max_batch_size], packed_sequences without a batch dimension). `stats` must
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
  // first dim is not batch_size, no inputs or no on_complete, with packed_sequences a missing,
  // zero or unequal sequence dim, a seq over max_sequence_length, more than max_batch_tokens
  // tokens, or a missing key-padding mask or one not [batch, seq]: INVALID_ARGUMENT; queue full:
  // RESOURCE_EXHAUSTED; draining: UNAVAILABLE): returns the error, records the failure in stats,
  // and on_complete is NOT called. A priority of 0 or above priority_levels means the default
  // level, as in Triton.
  Result<std::uint64_t> Enqueue(std::unique_ptr<InferenceRequest> request);

  // Client cancelled: a still-queued request is removed and answered CANCELLED; a running one
  // finishes; an unknown or answered id is ignored.
  void Cancel(std::uint64_t request_id);

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
