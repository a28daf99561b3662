// When each kernel ran, as the GPU ran it: CUPTI's activity records of every kernel launched
// between Start and Stop (graph replays included), start and end in ns of the GPU's clock.
// Nsight Compute times each kernel alone with its caches emptied; this is the pass as it
// runs, kernels overlapping under programmatic launch and reading what the one before left
// in the L2, and the gaps between them. Benchmark code only.
//
// Thread-safety: one recording at a time per process; Start and Stop from one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace ltserve_bench {

struct KernelSpan {
  std::string name;  // demangled, template arguments and parameters left out
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  // The launch it belongs to: every kernel of one graph launch shares its correlation id.
  std::uint32_t correlation = 0;
  // How it ran: blocks in the grid, threads a block, shared memory a block (static and
  // dynamic) and blocks a cluster (1 without clusters). All zero for a memset, whose name says
  // so and its bytes. (CUPTI's sharedMemoryExecuted, the carveout, reads 0 on the driver this
  // was written against, so it is left out.)
  std::int64_t blocks = 0;
  int threads = 0;
  int shared_bytes = 0;
  int cluster = 0;
};

// A kernel's name for a table: demangled, without its return type, namespaces and parameters,
// cut at 72 characters ("void ns::(anonymous namespace)::Kernel<__nv_bfloat16, 1>(ns::Args)"
// -> "Kernel<__nv_bfloat16, 1>"); names that are not mangled (cuBLASLt's) stay as they are.
std::string ShortKernelName(const char* mangled);

// Whether this build can record (it was built with CUPTI); false says why in `reason`.
bool KernelTimelineAvailable(std::string* reason);

// Starts recording kernel activity (and memsets, which a graph's nodes may hold between
// kernels); FailedPrecondition without CUPTI or while recording.
ltserve::Status StartKernelTimeline();
// Stops, flushes and returns what ran since Start, in start order. Records CUPTI dropped (its
// buffers full) make it an error rather than a table with holes.
ltserve::Result<std::vector<KernelSpan>> StopKernelTimeline();

// The launches (correlation ids) in `spans` that hold at least `min_kernels` kernels, and the
// one among them with the median wall time (first start to last end), its kernels in start
// order with the time a kernel was running (the union of their spans) and their own times
// summed (more than that where kernels overlap). Empty `median` where no launch qualifies.
struct TimelineSummary {
  std::size_t launches = 0;
  double min_wall_us = 0;
  double median_wall_us = 0;
  double max_wall_us = 0;
  std::vector<KernelSpan> median;
  double busy_us = 0;
  double summed_us = 0;
};
TimelineSummary SummarizeKernelTimeline(const std::vector<KernelSpan>& spans,
                                        std::size_t min_kernels);

// Prints the summary as markdown: each kernel of the median launch in order with its start
// (from the launch's first), duration and the gap since the previous kernel ended (negative
// where they overlap), then per kernel name the count and time, and the totals: wall time,
// time with a kernel running and with none, summed kernel time.
void PrintKernelTimeline(const std::vector<KernelSpan>& spans, std::size_t min_kernels,
                         const std::string& title);

}  // namespace ltserve_bench
