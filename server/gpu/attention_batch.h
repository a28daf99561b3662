// The per-batch description the attention kernel reads (attention.h): sequence offsets and
// work items, and for a pooled model the sequence table pooling reads (token_kernels.h),
// written into pinned host memory and uploaded with one asynchronous copy per batch into a
// device buffer allocated once, so a request allocates nothing.
//
// Thread-safety: one thread at a time (it belongs to one executor instance).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "common/status.h"
#include "gpu/cuda_resources.h"

namespace ltserve::gpu {

class AttentionBatch {
 public:
  // Sized for batches of up to `max_tokens` packed tokens. With `max_sequences` > 0 the buffer
  // also holds the sequence table, for batches of at most that many sequences; without it a
  // batch may hold up to max_tokens sequences.
  // With `last_sequence_first` the work items go from the batch's last sequence to its first
  // (ModelOptions::attention_last_sequence_first); the sequence table keeps the batch's order.
  static Result<AttentionBatch> Create(std::int64_t max_tokens, std::int64_t max_sequences = 0,
                                       bool last_sequence_first = false);

  // Describes a batch of sequences of `lengths` tokens, packed back to back, and enqueues the
  // upload on `stream`. The pinned copy is rewritten by the next call, so the caller
  // synchronises the stream in between. INVALID_ARGUMENT on a negative length, or more tokens
  // or sequences than the buffer was sized for.
  Status Upload(std::span<const std::int32_t> lengths, cudaStream_t stream);

  // The attention kernel's part (attention.h's layout).
  const std::int32_t* device() const {
    return reinterpret_cast<const std::int32_t*>(device_.data()) + table_ints_;
  }
  // The sequence table (token_kernels.h's layout); null when created without one.
  const std::int32_t* sequences() const {
    return table_ints_ == 0 ? nullptr : reinterpret_cast<const std::int32_t*>(device_.data());
  }
  std::int64_t max_tokens() const { return max_tokens_; }

 private:
  AttentionBatch() = default;

  std::int64_t max_tokens_ = 0;
  std::int64_t max_sequences_ = 0;
  std::int64_t table_ints_ = 0;  // the sequence table's ints at the front of both buffers
  bool last_sequence_first_ = false;
  PinnedBuffer host_;
  DeviceBuffer device_;
};

}  // namespace ltserve::gpu
