// Shared pieces of the metrics tests: fresh random values and histogram expectations computed
// from the observations themselves.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "exposition.h"

namespace ltserve::testing {

// A generator seeded afresh each run; the seed is printed so that a failure can be replayed.
std::mt19937_64 FreshRng();

// Nanoseconds spread evenly in log space over [1 µs, 20 s], so every bucket of the default
// latency histogram and its +Inf overflow get observations. Values within a part in 1e9 of a
// bound are drawn again: whether they fall below it would depend on rounding, not on the code.
std::uint64_t RandomNs(std::mt19937_64& rng, const std::vector<double>& bounds_s);

// Checks name_bucket (every bound and +Inf, cumulative), name_count and name_sum of the series
// with `labels` against `observations`.
void ExpectHistogram(const Exposition& exposition, const std::string& name,
                     const LabelSet& labels, const std::vector<double>& bounds,
                     const std::vector<double>& observations);

}  // namespace ltserve::testing
