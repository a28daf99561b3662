#include "metrics_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>

namespace ltserve::testing {

std::mt19937_64 FreshRng() {
  const std::uint64_t seed = (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^
                             std::random_device{}();
  std::printf("random seed %llu\n", static_cast<unsigned long long>(seed));
  return std::mt19937_64(seed);
}

std::uint64_t RandomNs(std::mt19937_64& rng, const std::vector<double>& bounds_s) {
  std::uniform_real_distribution<double> log10_ns(3.0, std::log10(2e10));
  for (;;) {
    const auto ns = static_cast<std::uint64_t>(std::pow(10.0, log10_ns(rng)));
    const double s = static_cast<double>(ns) / 1e9;
    const bool near_bound = std::any_of(bounds_s.begin(), bounds_s.end(),
                                        [s](double b) { return std::abs(s - b) <= 1e-9 * b; });
    if (!near_bound) return ns;
  }
}

void ExpectHistogram(const Exposition& exposition, const std::string& name,
                     const LabelSet& labels, const std::vector<double>& bounds,
                     const std::vector<double>& observations) {
  SCOPED_TRACE(name);
  const std::vector<Sample> buckets = exposition.Matching(name + "_bucket", labels);
  ASSERT_EQ(buckets.size(), bounds.size() + 1) << "one bucket per bound and +Inf";
  std::vector<double> les = bounds;
  les.push_back(std::numeric_limits<double>::infinity());
  for (double le : les) {
    const auto bucket = std::find_if(buckets.begin(), buckets.end(), [le](const Sample& s) {
      const double got = std::strtod(s.labels.at("le").c_str(), nullptr);
      return got == le || (std::isfinite(le) && std::abs(got - le) <= 1e-12 * std::abs(le));
    });
    ASSERT_NE(bucket, buckets.end()) << "no bucket le=" << le;
    const auto expected = std::count_if(observations.begin(), observations.end(),
                                        [le](double v) { return v <= le; });
    EXPECT_EQ(bucket->value, static_cast<double>(expected)) << "bucket le=" << le;
  }
  EXPECT_EQ(exposition.Value(name + "_count", labels), static_cast<double>(observations.size()));
  const double sum = std::accumulate(observations.begin(), observations.end(), 0.0);
  const std::optional<double> got_sum = exposition.Value(name + "_sum", labels);
  ASSERT_TRUE(got_sum.has_value());
  // The server adds in another order; 1e-12 relative covers the rounding of a few hundred adds.
  EXPECT_NEAR(*got_sum, sum, 1e-12 * sum + 1e-15);
}

}  // namespace ltserve::testing
