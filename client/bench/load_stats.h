// Arithmetic of a load test: latency percentiles, the stability rule for measurement windows,
// and the server-side time breakdown from two ModelStatistics snapshots.
//
// Thread-safety: pure functions over values.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "grpc_service.pb.h"

namespace ltserve::client {

struct LatencySummary {
  std::uint64_t count = 0;
  double avg_us = 0, p50_us = 0, p90_us = 0, p95_us = 0, p99_us = 0, max_us = 0;
};

// Nearest-rank percentiles (as perf_analyzer reports them); sorts its argument.
LatencySummary Summarize(std::vector<std::int64_t>& latencies_ns);

// perf_analyzer's rule: the last `windows` throughputs each lie within tolerance (0.05 = 5%)
// of their mean. False while there are fewer windows.
bool IsStable(std::span<const double> throughputs, int windows, double tolerance);

// Per-request averages over the requests the server finished between two snapshots, in
// microseconds (Triton's semantics: a request's compute times are its batch's).
struct ServerBreakdown {
  std::uint64_t requests = 0;    // successful requests
  std::uint64_t inferences = 0;  // samples
  std::uint64_t executions = 0;  // batches
  double request_us = 0, queue_us = 0, compute_input_us = 0, compute_infer_us = 0,
         compute_output_us = 0;
  double avg_batch() const { return executions ? static_cast<double>(inferences) / executions : 0.0; }
};

// Sums every version of `model` in each snapshot; counters that went backwards (a model
// reload) give an all-zero breakdown rather than nonsense.
ServerBreakdown Breakdown(const inference::ModelStatisticsResponse& before,
                          const inference::ModelStatisticsResponse& after, const std::string& model);

}  // namespace ltserve::client
