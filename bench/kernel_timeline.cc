#include "kernel_timeline.h"

#include <cuda_runtime_api.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>

#if defined(LTSERVE_WITH_CUPTI)
#include <cupti.h>
#endif

namespace ltserve_bench {
namespace {

#if defined(LTSERVE_WITH_CUPTI)
std::mutex g_mutex;
std::vector<KernelSpan> g_spans;  // guarded by g_mutex
std::size_t g_dropped = 0;        // guarded by g_mutex
bool g_recording = false;         // guarded by g_mutex
bool g_registered = false;        // guarded by g_mutex

constexpr std::size_t kBufferBytes = std::size_t{8} << 20;

void CUPTIAPI BufferRequested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI BufferCompleted(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer,
                              std::size_t /*size*/, std::size_t valid_bytes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* memset = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      g_spans.push_back(KernelSpan{"memset of " + std::to_string(memset->bytes) + " bytes",
                                   memset->start, memset->end, memset->correlationId});
      continue;
    }
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    KernelSpan span{ShortKernelName(kernel->name), kernel->start, kernel->end,
                    kernel->correlationId};
    span.blocks = std::int64_t{kernel->gridX} * kernel->gridY * kernel->gridZ;
    span.threads = kernel->blockX * kernel->blockY * kernel->blockZ;
    span.shared_bytes = kernel->staticSharedMemory + kernel->dynamicSharedMemory;
    span.cluster = static_cast<int>(std::max(1u, kernel->clusterX) * std::max(1u, kernel->clusterY) *
                                    std::max(1u, kernel->clusterZ));
    g_spans.push_back(std::move(span));
  }
  std::size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS) {
    g_dropped += dropped;
  }
  std::free(buffer);
}

ltserve::Status CuptiStatus(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return ltserve::Status::Ok();
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  return ltserve::Internal(std::string(what) + ": " + (text != nullptr ? text : "CUPTI error"));
}
#endif

}  // namespace

std::string ShortKernelName(const char* mangled) {
  if (mangled == nullptr) return "?";
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : mangled;
  std::free(demangled);
  if (name.rfind("void ", 0) == 0) name = name.substr(5);
  int depth = 0;
  std::size_t last_scope = std::string::npos;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (depth == 0 && c == '(') {  // the parameters, unless a scope's name
      constexpr std::string_view kAnonymous = "(anonymous namespace)";
      if (name.compare(i, kAnonymous.size(), kAnonymous) == 0) {
        i += kAnonymous.size() - 1;
        continue;
      }
      name.resize(i);
      break;
    }
    if (depth == 0 && c == ':' && i + 1 < name.size() && name[i + 1] == ':') last_scope = i + 1;
  }
  if (last_scope != std::string::npos) name = name.substr(last_scope + 1);
  return name.size() > 72 ? name.substr(0, 72) + "…" : name;
}

bool KernelTimelineAvailable(std::string* reason) {
#if defined(LTSERVE_WITH_CUPTI)
  (void)reason;
  return true;
#else
  if (reason != nullptr) *reason = "built without CUPTI (the CUDA toolkit's CUPTI was not found)";
  return false;
#endif
}

ltserve::Status StartKernelTimeline() {
#if defined(LTSERVE_WITH_CUPTI)
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_recording) return ltserve::FailedPrecondition("the kernel timeline is already recording");
  if (!g_registered) {
    if (auto status = CuptiStatus(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted),
                                  "cuptiActivityRegisterCallbacks");
        !status.ok()) {
      return status;
    }
    g_registered = true;
  }
  g_spans.clear();
  g_dropped = 0;
  if (auto status = CuptiStatus(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
                                "cuptiActivityEnable");
      !status.ok()) {
    return status;
  }
  if (auto status = CuptiStatus(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET),
                                "cuptiActivityEnable (memsets)");
      !status.ok()) {
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    return status;
  }
  g_recording = true;
  return ltserve::Status::Ok();
#else
  std::string reason;
  KernelTimelineAvailable(&reason);
  return ltserve::FailedPrecondition(reason);
#endif
}

ltserve::Result<std::vector<KernelSpan>> StopKernelTimeline() {
#if defined(LTSERVE_WITH_CUPTI)
  if (const cudaError_t error = cudaDeviceSynchronize(); error != cudaSuccess) {
    return ltserve::Internal(std::string("cudaDeviceSynchronize: ") + cudaGetErrorString(error));
  }
  // The buffers are completed (and BufferCompleted takes the lock) inside the flush.
  const ltserve::Status flushed =
      CuptiStatus(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  ltserve::Status disabled =
      CuptiStatus(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityDisable");
  if (const ltserve::Status memsets = CuptiStatus(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET),
                                                  "cuptiActivityDisable (memsets)");
      disabled.ok()) {
    disabled = memsets;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_recording = false;
  if (!flushed.ok()) return flushed;
  if (!disabled.ok()) return disabled;
  if (g_dropped > 0) {
    return ltserve::Internal("CUPTI dropped " + std::to_string(g_dropped) + " kernel records");
  }
  std::vector<KernelSpan> spans = std::move(g_spans);
  g_spans.clear();
  std::sort(spans.begin(), spans.end(),
            [](const KernelSpan& a, const KernelSpan& b) { return a.start_ns < b.start_ns; });
  return spans;
#else
  std::string reason;
  KernelTimelineAvailable(&reason);
  return ltserve::FailedPrecondition(reason);
#endif
}

TimelineSummary SummarizeKernelTimeline(const std::vector<KernelSpan>& spans,
                                        std::size_t min_kernels) {
  std::map<std::uint32_t, std::vector<KernelSpan>> launches;
  for (const KernelSpan& span : spans) launches[span.correlation].push_back(span);
  std::vector<std::pair<double, std::vector<KernelSpan>*>> walls;
  for (auto& [correlation, kernels] : launches) {
    if (kernels.empty() || kernels.size() < min_kernels) continue;
    std::sort(kernels.begin(), kernels.end(),
              [](const KernelSpan& a, const KernelSpan& b) { return a.start_ns < b.start_ns; });
    std::uint64_t last = 0;
    for (const KernelSpan& k : kernels) last = std::max(last, k.end_ns);
    walls.emplace_back(static_cast<double>(last - kernels.front().start_ns) / 1e3, &kernels);
  }
  TimelineSummary summary;
  summary.launches = walls.size();
  if (walls.empty()) return summary;
  std::sort(walls.begin(), walls.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  summary.min_wall_us = walls.front().first;
  summary.median_wall_us = walls[walls.size() / 2].first;
  summary.max_wall_us = walls.back().first;
  summary.median = *walls[walls.size() / 2].second;
  std::uint64_t busy_until = summary.median.front().start_ns;  // time after it had no kernel
  for (const KernelSpan& k : summary.median) {
    summary.summed_us += static_cast<double>(k.end_ns - k.start_ns) / 1e3;
    if (k.end_ns > busy_until) {
      summary.busy_us += static_cast<double>(k.end_ns - std::max(k.start_ns, busy_until)) / 1e3;
      busy_until = k.end_ns;
    }
  }
  return summary;
}

void PrintKernelTimeline(const std::vector<KernelSpan>& spans, std::size_t min_kernels,
                         const std::string& title) {
  const TimelineSummary summary = SummarizeKernelTimeline(spans, min_kernels);
  std::printf("\n%s\n\n", title.c_str());
  if (summary.median.empty()) {
    std::printf("no launch of %zu or more kernels was recorded\n", min_kernels);
    return;
  }
  std::printf("%zu launches of %zu kernels: wall %.1f / %.1f / %.1f µs (min / median / max); the "
              "median one:\n\n", summary.launches, summary.median.size(), summary.min_wall_us,
              summary.median_wall_us, summary.max_wall_us);
  std::printf("| # | kernel | start µs | µs | gap µs | blocks x threads | cluster | shared KB a block "
              "|\n|---:|---|---:|---:|---:|---:|---:|---:|\n");
  const std::uint64_t origin = summary.median.front().start_ns;
  std::map<std::string, std::pair<int, double>> by_name;
  for (std::size_t i = 0; i < summary.median.size(); ++i) {
    const KernelSpan& k = summary.median[i];
    const double us = static_cast<double>(k.end_ns - k.start_ns) / 1e3;
    const double gap_us =
        i == 0 ? 0.0
               : (static_cast<double>(k.start_ns) - static_cast<double>(summary.median[i - 1].end_ns)) / 1e3;
    std::printf("| %zu | %s | %.2f | %.2f | %.2f | %lld x %d | %d | %.1f |\n", i,
                k.name.c_str(), static_cast<double>(k.start_ns - origin) / 1e3, us, gap_us,
                static_cast<long long>(k.blocks), k.threads, k.cluster, k.shared_bytes / 1024.0);
    auto& [count, total] = by_name[k.name];
    ++count;
    total += us;
  }
  std::vector<std::pair<std::string, std::pair<int, double>>> names(by_name.begin(), by_name.end());
  std::sort(names.begin(), names.end(),
            [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  std::printf("\n| kernel | launches | µs in all | µs each | share of kernel time |\n"
              "|---|---:|---:|---:|---:|\n");
  for (const auto& [name, stats] : names) {
    std::printf("| %s | %d | %.1f | %.2f | %.1f %% |\n", name.c_str(), stats.first, stats.second,
                stats.second / stats.first, 100.0 * stats.second / summary.summed_us);
  }
  std::printf("\nwall %.1f µs: a kernel running %.1f µs, none running %.1f µs; kernels' own "
              "times summed %.1f µs (%.1f µs of it overlapping)\n",
              summary.median_wall_us, summary.busy_us, summary.median_wall_us - summary.busy_us,
              summary.summed_us, summary.summed_us - summary.busy_us);
  std::fflush(stdout);
}

}  // namespace ltserve_bench
