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

// The requests of one batch, in batch order. All have the same number of inputs and the same
// dims after the batch dimension (after the sequence dimension when packed): the batcher only
// groups such requests.
using BatchRequests = std::span<const InferenceRequest* const>;

// How requests map onto an executor batch.
enum class BatchLayout : std::uint8_t {
  kWhole,            // no batch dimension: one request, its full shapes
  kRows,             // [batch, ...]: samples concatenated
  kPackedSequences,  // [batch, seq, ...]: every sequence's tokens concatenated, no padding
};

// Copies every request's input bytes back to back into instance.InputBuffer(i, total) and
// returns the shape to Execute with. For kPackedSequences the sequence lengths are written to
// `sequence_lengths`, which the returned shape points into. Fails with the instance's error
// (INVALID_ARGUMENT when the batch is larger than the instance was sized for).
Result<BatchShape> StageInputs(ExecutorInstance& instance, BatchRequests requests,
                               BatchLayout layout, std::vector<std::int32_t>* sequence_lengths);

// Per request (batch order), its `num_outputs` output slices: its rows (kRows) or tokens
// (kPackedSequences, reshaped to [batch, seq, ...]) of each output of the last Execute. Fails
// with INTERNAL when an output's first dimension is not the batch's rows or tokens.
Result<std::vector<std::vector<OutputSlice>>> SliceOutputs(const ExecutorInstance& instance,
                                                           BatchRequests requests,
                                                           std::size_t num_outputs,
                                                           BatchLayout layout);

// Rows a request contributes to the executor's first dimension: batch_size, or batch_size x seq
// tokens when packed; 1 for kWhole.
std::int64_t RowsOf(const InferenceRequest& request, BatchLayout layout);

}  // namespace ltserve
