// The row counts a GPU model captures graphs and tunes algorithms for. Host arithmetic only,
// without CUDA types, so tests and tools can include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "plan/plan.h"

namespace ltserve::gpu {

// Powers of two up to `capacity`, which ends the list; for token models, once past the step
// max(kTokenBucketStep, capacity / 32 rounded up to 128), steps of it.
constexpr std::int64_t kTokenBucketStep = 512;
std::vector<std::int64_t> Buckets(plan::InputKind kind, std::int64_t capacity);

// The sequences each bucket of a pooled plan computes after its PoolOp: as many as its tokens
// can make (every sequence has a token, save empty ones), at most `max_sequences`, and
// `max_sequences` for the last bucket, which must hold every batch.
std::vector<std::int64_t> BucketSequences(const std::vector<std::int64_t>& buckets,
                                          std::int64_t max_sequences);

// Index of the smallest bucket holding `rows` and, where `bucket_sequences` is not empty,
// `sequences`; the last bucket when none does.
std::size_t SmallestBucket(const std::vector<std::int64_t>& buckets,
                           const std::vector<std::int64_t>& bucket_sequences, std::int64_t rows,
                           std::int64_t sequences);

}  // namespace ltserve::gpu
