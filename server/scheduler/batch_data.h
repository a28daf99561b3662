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
#include <string>
#include <vector>

#include "common/status.h"
#include "executor/executor.h"
#include "model/token_layout.h"
#include "scheduler/request.h"

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
// returns the shape to Execute with. For kPackedSequences (`tokens` given, requests validated
// by ValidateRequest) only the layout's token inputs are staged, as executor inputs 0, 1, ...
// in the layout's order, and the sequence lengths are written to `sequence_lengths`, which the
// returned shape points into. Fails with the instance's error (INVALID_ARGUMENT when the batch
// is larger than the instance was sized for).
//
// With a mask in the layout the token inputs get only the real tokens (mask_kind says which
// those are), so a sample's sequence is its real tokens wherever they are, of length 0 when all
// are padding. A token-id layout (tokens->ids) stages executor inputs kIdsInput,
// kPositionInput and kTypeInput as int32 instead of the config's token inputs.
//
// Inputs and outputs in GPU memory (RequestInput::device, InferenceRequest::device_outputs;
// kRows only, else INTERNAL) are not staged: they go into the shape's device_inputs and
// device_outputs at their requests' rows, and their part of the staging buffer is left as it is.
Result<BatchShape> StageInputs(ExecutorInstance& instance, BatchRequests requests,
                               BatchLayout layout, std::vector<std::int32_t>* sequence_lengths,
                               const TokenLayout* tokens = nullptr);

// Per request (batch order), its `num_outputs` output slices: its rows (kRows) or tokens
// (kPackedSequences, reshaped to [batch, seq, ...]) of each output of the last Execute. Fails
// with INTERNAL when an output's first dimension is not the batch's rows or tokens, or (kWhole,
// kRows) when its other dims differ from `output_dims` (SchedulerOptions::output_dims).
Result<std::vector<std::vector<OutputSlice>>> SliceOutputs(
    const ExecutorInstance& instance, BatchRequests requests, std::size_t num_outputs,
    BatchLayout layout, std::span<const std::vector<std::int64_t>> output_dims = {});

// Whether `shape` (an executed output's, batch dimension first when `batched`) has the dims
// `dims` (-1: any) after it; INTERNAL naming both otherwise.
Status CheckOutputDims(std::size_t output, const std::vector<std::int64_t>& shape,
                       const std::vector<std::int64_t>& dims, bool batched);

// After a masked batch (StageInputs with a mask) of per-token outputs: per request, its outputs as
// [batch, seq, width] with the executor's rows at the real tokens' positions and zeros at the
// padded ones, written into `buffers` (one per output, each at least max_batch_tokens x that
// output's token bytes: the batch's full batch x seq tokens fit). The slices point into
// `buffers`. INTERNAL when an output does not hold one row of output_token_bytes per real token.
Result<std::vector<std::vector<OutputSlice>>> ScatterMaskedOutputs(
    const ExecutorInstance& instance, BatchRequests requests, const TokenLayout& tokens,
    std::span<const DataType> output_types, std::span<std::vector<std::byte>> buffers);

// "[2, 128]" for messages.
std::string ShapeString(const std::vector<std::int64_t>& shape);

// Rows a request contributes to the executor's first dimension: batch_size, or batch_size x
// sequence_length tokens when packed; 1 for kWhole.
std::int64_t RowsOf(const InferenceRequest& request, BatchLayout layout);

}  // namespace ltserve
