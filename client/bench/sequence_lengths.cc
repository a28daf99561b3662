#include "sequence_lengths.h"

#include <algorithm>
#include <charconv>

namespace ltserve::client {
namespace {

bool ParseCount(std::string_view text, std::int64_t* value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

Result<LengthRange> ParseLengthRange(std::string_view text) {
  const auto fail = [&] {
    return InvalidArgument("--sequence-lengths '" + std::string(text) +
                           "': expected MIN:MAX with 1 <= MIN <= MAX");
  };
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) return fail();
  LengthRange range;
  if (!ParseCount(text.substr(0, colon), &range.min) || !ParseCount(text.substr(colon + 1), &range.max) ||
      range.min < 1 || range.max < range.min) {
    return fail();
  }
  return range;
}

std::vector<std::int64_t> DrawLengths(const LengthRange& range, std::size_t count, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int64_t> dist(range.min, range.max);
  std::vector<std::int64_t> lengths(count);
  for (auto& length : lengths) length = dist(rng);
  return lengths;
}

Result<std::size_t> SequenceDim(const inference::ModelMetadataResponse& metadata, int max_batch_size) {
  if (metadata.inputs_size() == 0) {
    return InvalidArgument("model '" + metadata.name() + "' has no inputs to vary the length of");
  }
  const auto& input = metadata.inputs(0);
  const int first = max_batch_size > 0 ? 1 : 0;  // the batch dimension is not the sequence's
  std::size_t dim = 0;
  int variable = 0;
  for (int i = first; i < input.shape_size(); ++i) {
    if (input.shape(i) == -1) {
      dim = static_cast<std::size_t>(i - first);
      ++variable;
    }
  }
  if (variable != 1) {
    return InvalidArgument("--sequence-lengths needs input '" + input.name() +
                           "' to have exactly one variable dimension (a token model's [-1, d]); it has " +
                           std::to_string(variable));
  }
  return dim;
}

Result<std::vector<InputSpec>> ResolveWithLength(
    const inference::ModelMetadataResponse& metadata, int max_batch_size, int batch,
    const std::map<std::string, std::vector<std::int64_t>>& shape_overrides, std::size_t dim,
    std::int64_t length) {
  if (metadata.inputs_size() == 0) return InvalidArgument("model '" + metadata.name() + "' has no inputs");
  const auto& input = metadata.inputs(0);
  if (shape_overrides.count(input.name()) != 0) {
    return InvalidArgument("--shape for '" + input.name() +
                           "' conflicts with --sequence-lengths, which sets its shape");
  }
  std::vector<std::int64_t> dims(input.shape().begin() + (max_batch_size > 0 ? 1 : 0), input.shape().end());
  if (dim >= dims.size()) {
    return InvalidArgument("input '" + input.name() + "' has no dimension " + std::to_string(dim));
  }
  dims[dim] = length;
  auto overrides = shape_overrides;
  overrides[input.name()] = std::move(dims);
  // The other inputs of a token model (a mask, token types) share input 0's sequence: those
  // with the same dims as input 0, variable at the same place, take the length too.
  for (int i = 1; i < metadata.inputs_size(); ++i) {
    const auto& other = metadata.inputs(i);
    if (overrides.count(other.name()) != 0 || other.shape_size() != input.shape_size()) continue;
    std::vector<std::int64_t> other_dims(other.shape().begin() + (max_batch_size > 0 ? 1 : 0),
                                         other.shape().end());
    if (other_dims[dim] != -1) continue;
    const auto variable = std::count(other_dims.begin(), other_dims.end(), std::int64_t{-1});
    if (variable != 1) continue;
    other_dims[dim] = length;
    overrides[other.name()] = std::move(other_dims);
  }
  return ResolveInputs(metadata, max_batch_size, batch, overrides);
}

Result<std::vector<PooledRequest>> BuildLengthPool(
    const inference::ModelMetadataResponse& metadata, int max_batch_size, int batch,
    const std::map<std::string, std::vector<std::int64_t>>& shape_overrides,
    const std::map<std::string, std::string>& files, const LengthRange& range, std::size_t count,
    std::mt19937_64& rng, const std::map<std::string, ValueRange>& value_ranges) {
  if (count == 0) return InvalidArgument("the request pool needs at least one request");
  LTSERVE_ASSIGN_OR_RETURN(const std::size_t dim, SequenceDim(metadata, max_batch_size));
  if (files.count(metadata.inputs(0).name()) != 0) {
    return InvalidArgument("input '" + metadata.inputs(0).name() +
                           "' varies in length with --sequence-lengths; it cannot come from a file");
  }
  const std::vector<std::int64_t> lengths = DrawLengths(range, count, rng);
  std::vector<PooledRequest> pool;
  pool.reserve(count);
  for (const std::int64_t length : lengths) {
    LTSERVE_ASSIGN_OR_RETURN(auto specs,
                             ResolveWithLength(metadata, max_batch_size, batch, shape_overrides, dim, length));
    LTSERVE_RETURN_IF_ERROR(ApplyValueRanges(value_ranges, &specs));
    LTSERVE_ASSIGN_OR_RETURN(InferRequest request, BuildRequest(metadata.name(), specs, files, rng));
    pool.push_back({std::make_shared<const InferRequest>(std::move(request)), length * batch});
  }
  return pool;
}

}  // namespace ltserve::client
