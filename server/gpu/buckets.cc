// Host-only, so it builds without CUDA too (the GPU tests check the bucket list on any machine).
#include "gpu/buckets.h"

#include <algorithm>

namespace ltserve::gpu {

std::vector<std::int64_t> Buckets(plan::InputKind kind, std::int64_t capacity) {
  std::vector<std::int64_t> buckets;
  // A token batch has any number of tokens, and a doubling bucket computes up to twice the
  // tokens sent; beyond kTokenBucketStep the buckets go up in steps of it (at most 32 of them),
  // so the excess stays under one step while a step's kernels are long enough that their
  // launch cost no longer matters.
  const std::int64_t step = std::max(kTokenBucketStep, (capacity / 32 + 127) / 128 * 128);
  const bool stepped = plan::TakesTokens(kind);
  for (std::int64_t rows = 1; rows < capacity; rows = stepped && rows >= step ? rows + step : rows * 2) {
    buckets.push_back(rows);
  }
  buckets.push_back(capacity);
  return buckets;
}

}  // namespace ltserve::gpu
