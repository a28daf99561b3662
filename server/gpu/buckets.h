// The row counts a GPU model captures graphs and tunes algorithms for. Host arithmetic only,
// without CUDA types, so tests and tools can include it.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/plan.h"

namespace ltserve::gpu {

// Powers of two up to `capacity`, which ends the list; for token models, once past the step
// max(kTokenBucketStep, capacity / 32 rounded up to 128), steps of it.
constexpr std::int64_t kTokenBucketStep = 512;
std::vector<std::int64_t> Buckets(plan::InputKind kind, std::int64_t capacity);

}  // namespace ltserve::gpu
