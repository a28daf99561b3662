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
  if (options.packed_sequences && options.max_batch_size == 0) {
    return InvalidArgument("scheduler: packed sequences need a batch dimension");
  }
  if (options.max_batch_tokens < 0) return InvalidArgument("scheduler: max_batch_tokens is negative");
  if (options.max_sequence_length < 0) {
    return InvalidArgument("scheduler: max_sequence_length is negative");
  }
  if (options.key_padding_mask_input >= 0) {
    // Input 0 holds the tokens (it defines seq); the scatter buffers need a token budget.
    if (!options.packed_sequences || options.key_padding_mask_input == 0 ||
        options.max_batch_tokens == 0) {
      return InvalidArgument("scheduler: a key-padding mask needs packed sequences, a token "
                             "budget, and an input before it that holds the tokens");
    }
    if (options.output_token_bytes.size() != options.output_types.size() ||
        std::find(options.output_token_bytes.begin(), options.output_token_bytes.end(), 0u) !=
            options.output_token_bytes.end()) {
      return InvalidArgument("scheduler: a key-padding mask needs the bytes of one token of "
                             "every output");
    }
  }
  if (options.priority_levels > 0 && (options.default_priority_level < 1 ||
                                      options.default_priority_level > options.priority_levels)) {
    return InvalidArgument("scheduler: default_priority_level " +
                           std::to_string(options.default_priority_level) + " is outside [1, " +
                           std::to_string(options.priority_levels) + "]");
  }
  return Status::Ok();
}

namespace {

// The key-padding mask of a request whose input 0 is [batch, seq, ...]: BOOL [batch, seq].
Status ValidateMask(const InferenceRequest& request, std::size_t index, std::int64_t seq) {
  if (request.inputs.size() <= index) {
    return InvalidArgument("the model takes a key-padding mask as input " + std::to_string(index) +
                           " (BOOL [batch, seq], true = padding); the request has " +
                           std::to_string(request.inputs.size()) + " input(s)");
  }
  const RequestInput& mask = request.inputs[index];
  const std::vector<std::int64_t> expected{request.batch_size, seq};
  if (mask.shape != expected) {
    return InvalidArgument("the key-padding mask (input " + std::to_string(index) + ") must be " +
                           ShapeString(expected) + ", [batch, seq] of input 0; got " +
                           ShapeString(mask.shape));
  }
  if (mask.bytes.size() != static_cast<std::size_t>(request.batch_size * seq)) {
    return InvalidArgument("the key-padding mask (input " + std::to_string(index) + ") must hold " +
                           std::to_string(request.batch_size * seq) + " BOOL bytes; got " +
                           std::to_string(mask.bytes.size()));
  }
  return Status::Ok();
}

// With packed sequences: every input has a sequence dim, the same in all (a key-padding mask
// is exactly [batch, seq]), within max_sequence_length, and the request's tokens fit one batch.
Status ValidateSequences(const InferenceRequest& request, const SchedulerOptions& options) {
  const std::vector<std::int64_t>& tokens = request.inputs[0].shape;
  if (tokens.size() < 2) {
    return InvalidArgument("input 0 of a token model must be [batch, seq, ...]; got " +
                           ShapeString(tokens));
  }
  const std::int64_t seq = tokens[1];
  if (seq < 1) {
    return InvalidArgument("sequence length " + std::to_string(seq) +
                           "; a token model takes seq >= 1");
  }
  if (options.max_sequence_length > 0 && seq > options.max_sequence_length) {
    return InvalidArgument("sequence length " + std::to_string(seq) +
                           " exceeds the model's max_sequence_length " +
                           std::to_string(options.max_sequence_length));
  }
  if (seq > std::numeric_limits<std::int32_t>::max()) {
    return InvalidArgument("sequence length " + std::to_string(seq) + " is out of range");
  }
  const int mask = options.key_padding_mask_input;
  if (mask >= 0) LTSERVE_RETURN_IF_ERROR(ValidateMask(request, static_cast<std::size_t>(mask), seq));
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    const std::vector<std::int64_t>& shape = request.inputs[i].shape;
    if (static_cast<int>(i) == mask) continue;
    if (shape.size() < 2 || shape[1] != seq) {
      return InvalidArgument("every input of a token model must be [batch, seq, ...] with the "
                             "same seq; input 0 has seq " + std::to_string(seq) + ", input " +
                             std::to_string(i) + " is " + ShapeString(shape));
    }
  }
  if (options.max_batch_tokens > 0 && request.batch_size * seq > options.max_batch_tokens) {
    return InvalidArgument(std::to_string(request.batch_size * seq) +
                           " tokens exceed the model's max tokens per batch " +
                           std::to_string(options.max_batch_tokens));
  }
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
  if (options.packed_sequences) return ValidateSequences(*request, options);
  return Status::Ok();
}

}  // namespace ltserve
