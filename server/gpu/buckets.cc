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

std::vector<std::int64_t> BucketSequences(const std::vector<std::int64_t>& buckets,
                                          std::int64_t max_sequences) {
  std::vector<std::int64_t> sequences;
  for (std::int64_t rows : buckets) sequences.push_back(std::min(rows, max_sequences));
  if (!sequences.empty()) sequences.back() = max_sequences;
  return sequences;
}

std::size_t SmallestBucket(const std::vector<std::int64_t>& buckets,
                           const std::vector<std::int64_t>& bucket_sequences, std::int64_t rows,
                           std::int64_t sequences) {
  std::size_t bucket = 0;
  while (bucket + 1 < buckets.size() &&
         (buckets[bucket] < rows ||
          (!bucket_sequences.empty() && bucket_sequences[bucket] < sequences))) {
    ++bucket;
  }
  return bucket;
}

}  // namespace ltserve::gpu
