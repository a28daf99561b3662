#include "load_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ltserve::client {
namespace {

double Rank(const std::vector<std::int64_t>& sorted, double percent) {
  const auto n = sorted.size();
  auto rank = static_cast<std::size_t>(std::ceil(percent / 100.0 * static_cast<double>(n)));
  rank = std::clamp<std::size_t>(rank, 1, n);
  return static_cast<double>(sorted[rank - 1]) / 1e3;
}

struct Totals {
  std::uint64_t inferences = 0, executions = 0;
  inference::StatisticDuration success, queue, input, infer, output;
};

void Add(inference::StatisticDuration& to, const inference::StatisticDuration& d) {
  to.set_count(to.count() + d.count());
  to.set_ns(to.ns() + d.ns());
}

Totals Sum(const inference::ModelStatisticsResponse& stats, const std::string& model) {
  Totals t;
  for (const auto& m : stats.model_stats()) {
    if (m.name() != model) continue;
    t.inferences += m.inference_count();
    t.executions += m.execution_count();
    const auto& s = m.inference_stats();
    Add(t.success, s.success());
    Add(t.queue, s.queue());
    Add(t.input, s.compute_input());
    Add(t.infer, s.compute_infer());
    Add(t.output, s.compute_output());
  }
  return t;
}

bool Grew(const inference::StatisticDuration& a, const inference::StatisticDuration& b) {
  return b.count() >= a.count() && b.ns() >= a.ns();
}

double AverageUs(const inference::StatisticDuration& a, const inference::StatisticDuration& b) {
  const auto count = b.count() - a.count();
  return count ? static_cast<double>(b.ns() - a.ns()) / static_cast<double>(count) / 1e3 : 0.0;
}

}  // namespace

LatencySummary Summarize(std::vector<std::int64_t>& latencies_ns) {
  LatencySummary s;
  if (latencies_ns.empty()) return s;
  std::sort(latencies_ns.begin(), latencies_ns.end());
  s.count = latencies_ns.size();
  const double total = std::accumulate(latencies_ns.begin(), latencies_ns.end(), 0.0);
  s.avg_us = total / static_cast<double>(s.count) / 1e3;
  s.p50_us = Rank(latencies_ns, 50);
  s.p90_us = Rank(latencies_ns, 90);
  s.p95_us = Rank(latencies_ns, 95);
  s.p99_us = Rank(latencies_ns, 99);
  s.max_us = static_cast<double>(latencies_ns.back()) / 1e3;
  return s;
}

bool IsStable(std::span<const double> throughputs, int windows, double tolerance) {
  if (windows < 1 || throughputs.size() < static_cast<std::size_t>(windows)) return false;
  const auto last = throughputs.subspan(throughputs.size() - windows);
  const double mean = std::accumulate(last.begin(), last.end(), 0.0) / windows;
  if (mean <= 0) return false;
  return std::all_of(last.begin(), last.end(),
                     [&](double t) { return std::abs(t - mean) <= tolerance * mean; });
}

ServerBreakdown Breakdown(const inference::ModelStatisticsResponse& before,
                          const inference::ModelStatisticsResponse& after, const std::string& model) {
  const Totals a = Sum(before, model), b = Sum(after, model);
  ServerBreakdown out;
  if (b.inferences < a.inferences || b.executions < a.executions || !Grew(a.success, b.success) ||
      !Grew(a.queue, b.queue) || !Grew(a.input, b.input) || !Grew(a.infer, b.infer) ||
      !Grew(a.output, b.output)) {
    return out;
  }
  out.requests = b.success.count() - a.success.count();
  out.inferences = b.inferences - a.inferences;
  out.executions = b.executions - a.executions;
  out.request_us = AverageUs(a.success, b.success);
  out.queue_us = AverageUs(a.queue, b.queue);
  out.compute_input_us = AverageUs(a.input, b.input);
  out.compute_infer_us = AverageUs(a.infer, b.infer);
  out.compute_output_us = AverageUs(a.output, b.output);
  return out;
}

}  // namespace ltserve::client
