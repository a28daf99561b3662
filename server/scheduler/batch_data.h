// The batcher's data path: gather the requests of one batch into an executor instance's input
// staging buffers (the one copy of request data) and cut the instance's outputs back into
// per-request slices (no copy: the slices point into the instance's output buffers).
//
// Thread-safety: free functions over the caller's data; the instance must be driven by the
// calling thread only (ExecutorInstance's contract).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "executor/executor.h"
#include "scheduler/scheduler.h"

namespace ltserve {

// The requests of one batch, in batch order. All have the same number of inputs and, with a
// batch dimension, the same dims after it (the batcher only groups such requests).
using BatchRequests = std::span<const InferenceRequest* const>;

// Copies every request's input bytes back to back into instance.InputBuffer(i, total) and
// returns the shape to Execute with. Without a batch dimension there is exactly one request and
// its full shapes are passed on. Fails with the instance's error (INVALID_ARGUMENT when the batch
// is larger than the instance was sized for).
Result<BatchShape> StageInputs(ExecutorInstance& instance, BatchRequests requests,
                               bool has_batch_dim);

// Per request (batch order), its `num_outputs` output slices: rows [offset, offset + batch) of
// each output of the last Execute. Fails with INTERNAL when an output does not have the batch's
// row count as its first dimension.
Result<std::vector<std::vector<OutputSlice>>> SliceOutputs(const ExecutorInstance& instance,
                                                           BatchRequests requests,
                                                           std::size_t num_outputs,
                                                           bool has_batch_dim);

}  // namespace ltserve
