// Mixed-length load for token models (encoders): the --sequence-lengths MIN:MAX range, lengths
// drawn uniformly from it, and a pool of requests built from them up front, so that the load
// loop only picks the next ready request and counts its real tokens.
//
// Thread-safety: free functions over values.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "grpc_service.pb.h"
#include "infer_data.h"
#include "model_inputs.h"

namespace ltserve::client {

struct LengthRange {
  std::int64_t min = 0, max = 0;  // inclusive
};

// "MIN:MAX" with 1 <= MIN <= MAX.
Result<LengthRange> ParseLengthRange(std::string_view text);

// `count` lengths uniform in [range.min, range.max].
std::vector<std::int64_t> DrawLengths(const LengthRange& range, std::size_t count, std::mt19937_64& rng);

// The position, in input 0's dims without the batch dimension, of its one variable dimension:
// the sequence dimension of a token model ([-1, d] for an encoder). An error when input 0 has
// none or several.
Result<std::size_t> SequenceDim(const inference::ModelMetadataResponse& metadata, int max_batch_size);

// The inputs of a request of `batch` samples whose input 0 has `length` at its sequence
// dimension `dim` (from SequenceDim); so do the other inputs with input 0's dims (a token
// model's mask and token types, [-1] where input 0 is [-1]) unless shape_overrides names them;
// the rest as ResolveInputs makes them.
Result<std::vector<InputSpec>> ResolveWithLength(
    const inference::ModelMetadataResponse& metadata, int max_batch_size, int batch,
    const std::map<std::string, std::vector<std::int64_t>>& shape_overrides, std::size_t dim,
    std::int64_t length);

// A request ready to send and the real tokens it carries (sequence length x batch; 0 when the
// run does not count tokens).
struct PooledRequest {
  std::shared_ptr<const InferRequest> request;
  std::int64_t tokens = 0;
};

// `count` requests of `batch` samples each, request i with input 0's sequence dimension set to
// a length drawn from `range` (drawn first, then the random contents, all from `rng`). The
// other inputs resolve as for a fixed-shape run (`shape_overrides`, `files`); input 0 takes
// neither, since its shape varies. `value_ranges` bounds random integer contents (token ids in
// the vocabulary, a mask of ones).
Result<std::vector<PooledRequest>> BuildLengthPool(
    const inference::ModelMetadataResponse& metadata, int max_batch_size, int batch,
    const std::map<std::string, std::vector<std::int64_t>>& shape_overrides,
    const std::map<std::string, std::string>& files, const LengthRange& range, std::size_t count,
    std::mt19937_64& rng, const std::map<std::string, ValueRange>& value_ranges = {});

}  // namespace ltserve::client
