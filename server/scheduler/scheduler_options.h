// How one model's batcher behaves: config.pbtxt's dynamic_batching, with Triton's semantics, and
// for a token model its layout.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "common/data_type.h"
#include "model/model_options.h"
#include "model/token_layout.h"

namespace ltserve {

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
  // Token models on the fused plan path (a plan whose input is InputKind::kTokens): how
  // requests are laid out (model/token_layout.h). Every token input is [batch, seq, ...];
  // requests of different sequence lengths batch together, their real tokens packed back to
  // back; the executor gets one sequence length per sample and returns outputs as
  // [total tokens, ...], which reach each request as [batch, seq, ...]. With a key-padding mask
  // the executor never sees the mask: staging copies only the real tokens (each sample's real
  // tokens, wherever they are, form one sequence, possibly of 0 tokens), and outputs come back
  // with zeros at the padded positions, scattered into a buffer each worker allocates at Create
  // (max_batch_tokens x output_token_bytes per output). A request longer than
  // max_sequence_length or max_batch_tokens is INVALID_ARGUMENT naming both numbers.
  std::optional<TokenLayout> tokens;
  // One entry per model output, config order: the scheduler slices this many outputs.
  std::vector<DataType> output_types;
  // Per output, config order, the dims after the batch dimension (-1: any), or empty: not
  // checked. A batch whose outputs have other dims fails with INTERNAL rather than answering
  // shapes the model's metadata does not promise (kWhole and kRows layouts).
  std::vector<std::vector<std::int64_t>> output_dims;
  // A request that would start at once (no batch to wait for) while an instance is idle runs on
  // the thread that enqueued it, not on the instance's worker: the hand-off to a sleeping
  // worker costs a wake-up (28 us of a 123 us served request on the H200's host) that a lone
  // request would otherwise pay. Only for instances that may run on any thread
  // (ExecutorFactory::RunsOnAnyThread); the caller must then call Scheduler::RunClaimed.
  bool run_on_caller_when_idle = false;
  // A worker with nothing to run polls for new requests this long (µs, at most
  // kMaxWorkerPollUs, model/model_options.h) before it sleeps on the condition variable. A
  // request that comes within the window starts on a thread that is awake and whose caches hold
  // the executor's launch path, where a cold launch after gRPC's own work costs 10-20 µs on the
  // H200's host (bench/RESULTS.md); the price is a core per instance busy for the window after
  // every batch. 0: workers sleep at once. run_on_caller_when_idle should be off with it: the
  // polling worker, not the caller, is the thread to run a lone request on.
  std::uint64_t worker_poll_us = 0;
};

}  // namespace ltserve
