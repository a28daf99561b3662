// The per-batch description the attention kernel reads (attention.h): sequence offsets and
// work items, written into pinned host memory and uploaded with one asynchronous copy per
// batch into a device buffer allocated once, so a request allocates nothing.
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
  // Sized for batches of up to `max_tokens` packed tokens.
  static Result<AttentionBatch> Create(std::int64_t max_tokens);

  // Describes a batch of sequences of `lengths` tokens, packed back to back, and enqueues the
  // upload on `stream`. The pinned copy is rewritten by the next call, so the caller
  // synchronises the stream in between. INVALID_ARGUMENT on a negative length, or more tokens
  // or sequences than the buffer was sized for.
  Status Upload(std::span<const std::int32_t> lengths, cudaStream_t stream);

  const std::int32_t* device() const {
    return reinterpret_cast<const std::int32_t*>(device_.data());
  }
  std::int64_t max_tokens() const { return max_tokens_; }

 private:
  AttentionBatch() = default;

  std::int64_t max_tokens_ = 0;
  PinnedBuffer host_;
  DeviceBuffer device_;
};

}  // namespace ltserve::gpu
