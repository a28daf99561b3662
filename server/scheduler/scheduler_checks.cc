#include "scheduler/scheduler_checks.h"

#include <algorithm>
#include <limits>
#include <string>

namespace ltserve {

bool SameSampleShape(const InferenceRequest& a, const InferenceRequest& b, BatchLayout layout) {
  if (a.inputs.size() != b.inputs.size()) return false;
  const std::size_t free_dims = layout == BatchLayout::kPackedSequences ? 2 : 1;
  for (std::size_t i = 0; i < a.inputs.size(); ++i) {
    const auto& x = a.inputs[i].shape;
    const auto& y = b.inputs[i].shape;
    if (x.size() != y.size() || x.size() < free_dims ||
        !std::equal(x.begin() + free_dims, x.end(), y.begin() + free_dims)) {
      return false;
    }
  }
  return true;
}

namespace {

Status ValidateTokenLayout(const TokenLayout& tokens, const SchedulerOptions& options) {
  if (options.max_batch_size == 0) {
    return InvalidArgument("scheduler: packed sequences need a batch dimension");
  }
  if (tokens.max_batch_tokens < 0) return InvalidArgument("scheduler: max_batch_tokens is negative");
  if (tokens.max_sequence_length < 0) {
    return InvalidArgument("scheduler: max_sequence_length is negative");
  }
  if (tokens.token_inputs.empty() || tokens.token_inputs.front() != tokens.sequence_input) {
    return InvalidArgument("scheduler: a token layout needs token inputs, the first of them the "
                           "sequence input");
  }
  if (tokens.mask_input) {
    // The scatter buffers need a token budget; the sequence comes from a token input.
    if (tokens.max_batch_tokens == 0 || *tokens.mask_input == tokens.sequence_input) {
      return InvalidArgument("scheduler: a key-padding mask needs packed sequences, a token "
                             "budget, and an input other than the mask that holds the tokens");
    }
    if (tokens.output_token_bytes.size() != options.output_types.size() ||
        std::find(tokens.output_token_bytes.begin(), tokens.output_token_bytes.end(), 0u) !=
            tokens.output_token_bytes.end()) {
      return InvalidArgument("scheduler: a key-padding mask needs the bytes of one token of "
                             "every output");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateOptions(const SchedulerOptions& options) {
  if (options.output_types.empty()) return InvalidArgument("scheduler: the model has no outputs");
  if (options.max_batch_size < 0) return InvalidArgument("scheduler: max_batch_size is negative");
  for (int size : options.preferred_batch_sizes) {
    if (size < 1 || size > options.max_batch_size) {
      return InvalidArgument("scheduler: preferred_batch_size " + std::to_string(size) +
                             " is outside [1, max_batch_size=" +
                             std::to_string(options.max_batch_size) + "]");
    }
  }
  if (options.tokens) LTSERVE_RETURN_IF_ERROR(ValidateTokenLayout(*options.tokens, options));
  if (options.priority_levels > 0 && (options.default_priority_level < 1 ||
                                      options.default_priority_level > options.priority_levels)) {
    return InvalidArgument("scheduler: default_priority_level " +
                           std::to_string(options.default_priority_level) + " is outside [1, " +
                           std::to_string(options.priority_levels) + "]");
  }
  return Status::Ok();
}

namespace {

// The key-padding mask of a request whose sequence input is [batch, seq, ...]: BOOL
// [batch, seq].
Status ValidateMask(const InferenceRequest& request, std::size_t index,
                    std::size_t sequence_input, std::int64_t seq) {
  if (request.inputs.size() <= index) {
    return InvalidArgument("the model takes a key-padding mask as input " + std::to_string(index) +
                           " (BOOL [batch, seq], true = padding); the request has " +
                           std::to_string(request.inputs.size()) + " input(s)");
  }
  const RequestInput& mask = request.inputs[index];
  const std::vector<std::int64_t> expected{request.batch_size, seq};
  if (mask.shape != expected) {
    return InvalidArgument("the key-padding mask (input " + std::to_string(index) + ") must be " +
                           ShapeString(expected) + ", [batch, seq] of input " +
                           std::to_string(sequence_input) + "; got " +
                           ShapeString(mask.shape));
  }
  if (mask.bytes.size() != static_cast<std::size_t>(request.batch_size * seq)) {
    return InvalidArgument("the key-padding mask (input " + std::to_string(index) + ") must hold " +
                           std::to_string(request.batch_size * seq) + " BOOL bytes; got " +
                           std::to_string(mask.bytes.size()));
  }
  return Status::Ok();
}

// With a token layout: every token input has a sequence dim, the same in all (a key-padding
// mask is exactly [batch, seq]), within max_sequence_length, and the request's tokens fit one
// batch. Sets the request's sequence_length.
Status ValidateSequences(InferenceRequest& request, const TokenLayout& layout) {
  const std::size_t sequence_input = layout.sequence_input;
  if (request.inputs.size() <= sequence_input) {
    return InvalidArgument("the model's tokens are input " + std::to_string(sequence_input) +
                           "; the request has " + std::to_string(request.inputs.size()) +
                           " input(s)");
  }
  const std::vector<std::int64_t>& tokens = request.inputs[sequence_input].shape;
  if (tokens.size() < 2) {
    return InvalidArgument("input " + std::to_string(sequence_input) +
                           " of a token model must be [batch, seq, ...]; got " +
                           ShapeString(tokens));
  }
  const std::int64_t seq = tokens[1];
  if (seq < 1) {
    return InvalidArgument("sequence length " + std::to_string(seq) +
                           "; a token model takes seq >= 1");
  }
  if (layout.max_sequence_length > 0 && seq > layout.max_sequence_length) {
    return InvalidArgument("sequence length " + std::to_string(seq) +
                           " exceeds the model's max_sequence_length " +
                           std::to_string(layout.max_sequence_length));
  }
  if (seq > std::numeric_limits<std::int32_t>::max()) {
    return InvalidArgument("sequence length " + std::to_string(seq) + " is out of range");
  }
  if (layout.mask_input) LTSERVE_RETURN_IF_ERROR(ValidateMask(request, *layout.mask_input, sequence_input, seq));
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    const std::vector<std::int64_t>& shape = request.inputs[i].shape;
    if (layout.mask_input == i) continue;
    if (shape.size() < 2 || shape[1] != seq) {
      return InvalidArgument("every input of a token model must be [batch, seq, ...] with the "
                             "same seq; input " + std::to_string(sequence_input) + " has seq " +
                             std::to_string(seq) + ", input " + std::to_string(i) + " is " +
                             ShapeString(shape));
    }
  }
  if (layout.max_batch_tokens > 0 && request.batch_size * seq > layout.max_batch_tokens) {
    return InvalidArgument(std::to_string(request.batch_size * seq) +
                           " tokens exceed the model's max tokens per batch " +
                           std::to_string(layout.max_batch_tokens));
  }
  request.sequence_length = seq;
  return Status::Ok();
}

}  // namespace

Status ValidateRequest(InferenceRequest* request, const SchedulerOptions& options) {
  const int max_batch_size = options.max_batch_size;
  if (request == nullptr) return InvalidArgument("no request");
  if (!request->on_complete) return InvalidArgument("request has no completion callback");
  if (request->inputs.empty()) return InvalidArgument("request has no inputs");
  if (max_batch_size == 0) {
    request->batch_size = 1;
    return Status::Ok();
  }
  if (request->batch_size < 1 || request->batch_size > max_batch_size) {
    return InvalidArgument("batch size " + std::to_string(request->batch_size) +
                           " is outside [1, max_batch_size=" + std::to_string(max_batch_size) +
                           "]");
  }
  for (const RequestInput& input : request->inputs) {
    if (input.shape.empty() || input.shape.front() != request->batch_size) {
      return InvalidArgument("every input's first dimension must be the batch size " +
                             std::to_string(request->batch_size));
    }
  }
  if (options.tokens) return ValidateSequences(*request, *options.tokens);
  return Status::Ok();
}

}  // namespace ltserve
