// Request tracing as Triton does it (`--trace-config`, TIMESTAMPS level): one request in every
// `rate` gets a RequestTrace, the front ends and the scheduler stamp it, and the finished traces
// go to a JSON file in Triton's format, which Triton's trace_summary.py and
// bench/profile/trace_summary.py read.
//
// Thread-safety: Sample and Finish may be called from any thread concurrently; a request that is
// not sampled costs one relaxed atomic increment. Files are written by the Tracer's own thread,
// never on a request's path. The settings are fixed at Create.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"
#include "trace/request_trace.h"

namespace ltserve {

struct TraceSettings {
  bool timestamps = false;        // level=TIMESTAMPS; level=OFF (Triton's default) traces nothing
  std::uint32_t rate = 1000;      // one request in every `rate` is traced
  std::int64_t count = -1;        // traces still to collect; -1: no end
  std::uint32_t log_frequency = 0;  // 0: every trace to `file` at shutdown; N: each N to file.<i>
  std::filesystem::path file;
};

// Triton's --trace-config values, in order (a later one overrides): "level=TIMESTAMPS",
// "rate=100", "count=100", "mode=triton", "triton,file=/tmp/trace.json",
// "triton,log-frequency=50". TENSORS and OpenTelemetry are refused, saying so.
Result<TraceSettings> ParseTraceConfig(const std::vector<std::string>& values);

class Tracer {
 public:
  // Checks that the trace file can be written (creating it) when tracing is on.
  static Result<std::unique_ptr<Tracer>> Create(TraceSettings settings);
  // Writes every trace not yet written.
  ~Tracer();

  // A trace for this request, or nullptr when it is not sampled (or tracing is off).
  std::unique_ptr<RequestTrace> Sample(std::string_view model_name, std::string_view model_version,
                                       std::string_view request_id);

  // Takes a request's trace once nothing records into it any more.
  void Finish(std::unique_ptr<RequestTrace> trace);

  const TraceSettings& settings() const { return settings_; }

  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

 private:
  explicit Tracer(TraceSettings settings);

  using Batch = std::vector<std::unique_ptr<RequestTrace>>;
  struct FileBatch {
    std::filesystem::path path;
    Batch traces;
  };

  bool TakeFromCount();
  std::filesystem::path NextPathLocked();
  void WriterLoop();

  const TraceSettings settings_;
  std::atomic<std::uint64_t> requests_seen_{0};
  std::atomic<std::int64_t> remaining_;
  std::atomic<std::uint64_t> next_id_{1};

  std::mutex mutex_;
  std::condition_variable ready_cv_;
  Batch collecting_;                 // guarded by mutex_
  std::vector<FileBatch> to_write_;  // guarded by mutex_
  std::uint32_t next_file_index_ = 0;  // guarded by mutex_
  bool stopping_ = false;              // guarded by mutex_
  std::thread writer_;
};

}  // namespace ltserve
