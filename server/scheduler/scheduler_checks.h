// The checks the batcher applies to its options (at Create) and to each request (at Enqueue),
// and the rule for which requests may share a batch. The gRPC service has already validated
// names, types and byte sizes against the model config; these guard what the batcher itself
// relies on.
//
// Thread-safety: pure functions.
#pragma once

#include "common/status.h"
#include "scheduler/batch_data.h"
#include "scheduler/request.h"
#include "scheduler/scheduler_options.h"

namespace ltserve {

Status ValidateOptions(const SchedulerOptions& options);

// Also sets batch_size to 1 for a model without a batch dimension, and a token model's
// sequence_length.
Status ValidateRequest(InferenceRequest* request, const SchedulerOptions& options);

// Requests batch together only when every input has the same dims after the batch dimension
// (after the sequence dimension when sequences are packed).
bool SameSampleShape(const InferenceRequest& a, const InferenceRequest& b, BatchLayout layout);

}  // namespace ltserve
