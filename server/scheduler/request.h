// What the batcher takes and gives back: a request's inputs as the client sent them, its
// completion callback, and the output slices the callback receives.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "trace/request_trace.h"

namespace ltserve {


// One per model input, in config order, already validated by the service.
// A request tensor in the client's GPU memory (a CUDA shared-memory region, which the request's
// maker keeps open until on_complete has run), on the GPU the model's instances address
// directly.
struct DeviceTensor {
  void* data = nullptr;  // nullptr: not in GPU memory
  std::size_t bytes = 0;
};

struct RequestInput {
  // Row-major, batch first; points into memory kept alive by InferenceRequest::keep_alive.
  // Empty when the input is in GPU memory (`device`).
  std::span<const std::byte> bytes;
  // Full shape as sent (batch dim first when max_batch_size > 0).
  std::vector<std::int64_t> shape;
  DeviceTensor device;

  std::size_t size() const { return device.data != nullptr ? device.bytes : bytes.size(); }
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
  // Token models: the seq of the layout's sequence input, set by the scheduler when it accepts
  // the request; 0 otherwise.
  std::int64_t sequence_length = 0;
  std::uint32_t priority = 0;      // 0: the model's default_priority_level; 1 is the highest
  std::uint64_t timeout_us = 0;    // the request's "timeout" parameter; 0: none
  std::chrono::steady_clock::time_point deadline =
      std::chrono::steady_clock::time_point::max();  // the gRPC deadline
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
  // Per output (config order), where the executor writes it in GPU memory itself; empty, or an
  // entry without data, for outputs answered from host memory.
  std::vector<DeviceTensor> device_outputs;
  std::shared_ptr<const void> keep_alive;
  CompletionFn on_complete;
  // Set for a sampled request (--trace-config): the scheduler stamps its queue and compute
  // times. Owned by the request's maker, which keeps it until on_complete has run.
  RequestTrace* trace = nullptr;
};

}  // namespace ltserve
