#include "scheduler/scheduler_checks.h"

#include <algorithm>
#include <cstring>
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
      return InvalidArgument("scheduler: a mask needs packed sequences, a token "
                             "budget, and an input other than the mask that holds the tokens");
    }
    if (tokens.output_token_bytes.size() != options.output_types.size() ||
        std::find(tokens.output_token_bytes.begin(), tokens.output_token_bytes.end(), 0u) !=
            tokens.output_token_bytes.end()) {
      return InvalidArgument("scheduler: a mask needs the bytes of one token of "
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
  if (options.worker_poll_us > kMaxWorkerPollUs) {
    return InvalidArgument("scheduler: worker_poll_microseconds " +
                           std::to_string(options.worker_poll_us) + " is over " +
                           std::to_string(kMaxWorkerPollUs));
  }
  return Status::Ok();
}

namespace {

// The mask of a request whose sequence input is [batch, seq, ...]: [batch, seq] of BOOL for a
// key-padding mask; of BOOL, INT32 or INT64 for an attention mask (the service checked that
// the bytes match the config's dtype).
Status ValidateMask(const InferenceRequest& request, const TokenLayout& layout, std::int64_t seq) {
  const std::size_t index = *layout.mask_input;
  const bool key_padding = layout.mask_kind == MaskKind::kKeyPadding;
  const std::string what = key_padding ? "key-padding mask (input " + std::to_string(index) +
                                             ", BOOL [batch, seq], true = padding)"
                                       : "attention mask (input " + std::to_string(index) +
                                             ", [batch, seq], nonzero = a real token)";
  if (request.inputs.size() <= index) {
    return InvalidArgument("the model takes a " + what + "; the request has " +
                           std::to_string(request.inputs.size()) + " input(s)");
  }
  const RequestInput& mask = request.inputs[index];
  const std::vector<std::int64_t> expected{request.batch_size, seq};
  if (mask.shape != expected) {
    return InvalidArgument("the " + what + " must be " + ShapeString(expected) +
                           ", [batch, seq] of input " + std::to_string(layout.sequence_input) +
                           "; got " + ShapeString(mask.shape));
  }
  const auto cells = static_cast<std::size_t>(request.batch_size * seq);
  const std::size_t element = mask.bytes.size() / cells;
  const bool sized = mask.bytes.size() % cells == 0 &&
                     (element == 1 || (!key_padding && (element == 4 || element == 8)));
  if (!sized) {
    return InvalidArgument("the " + what + " holds " + std::to_string(mask.bytes.size()) +
                           " bytes for " + std::to_string(cells) + " tokens");
  }
  // Hugging Face models multiply by the mask when they pool: a 2 would weigh a token twice
  // there while attention treats it as 1, so only 0 and 1 have one meaning.
  for (std::size_t i = 0; !key_padding && i < cells; ++i) {
    std::int64_t value = 0;
    if (element == 1) value = static_cast<std::int64_t>(mask.bytes[i]);
    if (element == 4) {
      std::int32_t narrow = 0;
      std::memcpy(&narrow, mask.bytes.data() + i * element, element);
      value = narrow;
    }
    if (element == 8) std::memcpy(&value, mask.bytes.data() + i * element, element);
    if (value != 0 && value != 1) {
      return InvalidArgument("the " + what + " holds " + std::to_string(value) + " at token " +
                             std::to_string(i) + "; its values must be 0 or 1");
    }
  }
  return Status::Ok();
}

// An INT32 or INT64 input of [batch, seq] integers, each in [0, limit).
Status ValidateIntegers(const RequestInput& input, std::size_t cells, std::int64_t limit,
                        const std::string& what) {
  const std::size_t element = cells == 0 ? 0 : input.bytes.size() / cells;
  if (input.bytes.size() != cells * element || (element != 4 && element != 8)) {
    return InvalidArgument(what + " must be INT32 or INT64 [batch, seq]; got " +
                           std::to_string(input.bytes.size()) + " bytes for " +
                           std::to_string(cells) + " tokens");
  }
  for (std::size_t i = 0; i < cells; ++i) {
    std::int64_t value = 0;
    if (element == 4) {
      std::int32_t narrow = 0;
      std::memcpy(&narrow, input.bytes.data() + i * element, element);
      value = narrow;
    } else {
      std::memcpy(&value, input.bytes.data() + i * element, element);
    }
    if (value < 0 || value >= limit) {
      return InvalidArgument(what + " holds " + std::to_string(value) + " at token " +
                             std::to_string(i) + "; the model's are in [0, " +
                             std::to_string(limit) + ")");
    }
  }
  return Status::Ok();
}

// A token-id model's ids and token types within their vocabularies, and (first-token pooling)
// every row's first token real.
Status ValidateTokenIds(const InferenceRequest& request, const TokenLayout& layout,
                        std::int64_t seq) {
  const TokenIds& ids = *layout.ids;
  const auto cells = static_cast<std::size_t>(request.batch_size * seq);
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    if (request.inputs[i].shape.size() != 2 && layout.mask_input != i) {
      return InvalidArgument("input " + std::to_string(i) + " of a token-id model must be "
                             "[batch, seq]; got " + ShapeString(request.inputs[i].shape));
    }
  }
  LTSERVE_RETURN_IF_ERROR(ValidateIntegers(request.inputs[ids.ids_input], cells, ids.vocab_size,
                                           "token ids (input " + std::to_string(ids.ids_input) + ")"));
  if (ids.type_input) {
    LTSERVE_RETURN_IF_ERROR(ValidateIntegers(
        request.inputs[*ids.type_input], cells, std::max<std::int64_t>(ids.type_vocab_size, 1),
        "token type ids (input " + std::to_string(*ids.type_input) + ")"));
  }
  if (ids.first_token_real && layout.mask_input) {
    const RequestInput& mask = request.inputs[*layout.mask_input];
    const std::size_t element = mask.bytes.size() / cells;
    for (std::int64_t b = 0; b < request.batch_size; ++b) {
      bool nonzero = false;
      const std::byte* first = mask.bytes.data() + static_cast<std::size_t>(b * seq) * element;
      for (std::size_t i = 0; i < element; ++i) nonzero |= first[i] != std::byte{0};
      if (nonzero == (layout.mask_kind == MaskKind::kKeyPadding)) {
        return InvalidArgument("row " + std::to_string(b) + " starts with padding; the model "
                               "pools its first token, which must be real");
      }
    }
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
  if (layout.mask_input) LTSERVE_RETURN_IF_ERROR(ValidateMask(request, layout, seq));
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
  if (layout.ids) LTSERVE_RETURN_IF_ERROR(ValidateTokenIds(request, layout, seq));
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
