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
  if (options.priority_levels > 0 && (options.default_priority_level < 1 ||
                                      options.default_priority_level > options.priority_levels)) {
    return InvalidArgument("scheduler: default_priority_level " +
                           std::to_string(options.default_priority_level) + " is outside [1, " +
                           std::to_string(options.priority_levels) + "]");
  }
  return Status::Ok();
}

namespace {

// With packed sequences: every input has a sequence dim, the same in all, and the request's
// tokens fit one batch.
Status ValidateSequences(const InferenceRequest& request, std::int64_t max_batch_tokens) {
  const std::int64_t seq = request.inputs[0].shape.size() >= 2 ? request.inputs[0].shape[1] : 0;
  for (const RequestInput& input : request.inputs) {
    if (input.shape.size() < 2 || input.shape[1] != seq || seq < 1 ||
        seq > std::numeric_limits<std::int32_t>::max()) {
      return InvalidArgument("every input of a token model must be [batch, seq, ...] with the "
                             "same seq >= 1");
    }
  }
  if (max_batch_tokens > 0 && request.batch_size * seq > max_batch_tokens) {
    return InvalidArgument(std::to_string(request.batch_size * seq) +
                           " tokens exceed the model's max tokens per batch " +
                           std::to_string(max_batch_tokens));
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
  if (options.packed_sequences) return ValidateSequences(*request, options.max_batch_tokens);
  return Status::Ok();
}

}  // namespace ltserve
