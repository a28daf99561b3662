#include "trace/tracer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

namespace ltserve {

std::string_view TraceActivityName(TraceActivity activity) {
  switch (activity) {
    case TraceActivity::kGrpcWaitReadEnd: return "GRPC_WAITREAD_END";
    case TraceActivity::kHttpRecvEnd: return "HTTP_RECV_END";
    case TraceActivity::kRequestStart: return "REQUEST_START";
    case TraceActivity::kQueueStart: return "QUEUE_START";
    case TraceActivity::kComputeStart: return "COMPUTE_START";
    case TraceActivity::kComputeInputEnd: return "COMPUTE_INPUT_END";
    case TraceActivity::kComputeOutputStart: return "COMPUTE_OUTPUT_START";
    case TraceActivity::kComputeEnd: return "COMPUTE_END";
    case TraceActivity::kRequestEnd: return "REQUEST_END";
    case TraceActivity::kGrpcSendStart: return "GRPC_SEND_START";
    case TraceActivity::kGrpcSendEnd: return "GRPC_SEND_END";
    case TraceActivity::kHttpSendStart: return "HTTP_SEND_START";
    case TraceActivity::kCount: break;
  }
  return "UNKNOWN";
}

namespace {

template <typename Int>
Result<Int> ParseInt(const std::string& key, std::string_view text, Int min) {
  Int value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < min) {
    return InvalidArgument("--trace-config " + key + "=" + std::string(text) +
                           ": expected an integer >= " + std::to_string(min));
  }
  return value;
}

Status ApplyGlobal(const std::string& key, std::string_view value, TraceSettings* settings) {
  if (key == "level") {
    if (value == "TIMESTAMPS") {
      settings->timestamps = true;
    } else if (value == "OFF") {
      settings->timestamps = false;
    } else if (value == "TENSORS") {
      return InvalidArgument("--trace-config level=TENSORS: ltserve traces TIMESTAMPS only");
    } else {
      return InvalidArgument("--trace-config level=" + std::string(value) +
                             ": expected TIMESTAMPS or OFF");
    }
    return Status::Ok();
  }
  if (key == "rate") {
    LTSERVE_ASSIGN_OR_RETURN(settings->rate, ParseInt<std::uint32_t>(key, value, 1));
    return Status::Ok();
  }
  if (key == "count") {
    LTSERVE_ASSIGN_OR_RETURN(settings->count, ParseInt<std::int64_t>(key, value, -1));
    return Status::Ok();
  }
  if (key == "mode") {
    if (value == "triton") return Status::Ok();
    return InvalidArgument("--trace-config mode=" + std::string(value) +
                           ": ltserve writes Triton's trace files only (mode=triton)");
  }
  return InvalidArgument("--trace-config " + key +
                         ": unknown setting; expected level, rate, count or mode, or "
                         "triton,file=<path> or triton,log-frequency=<n>");
}

Status ApplyTriton(const std::string& key, std::string_view value, TraceSettings* settings) {
  if (key == "file") {
    settings->file = std::filesystem::path(value);
    return Status::Ok();
  }
  if (key == "log-frequency") {
    LTSERVE_ASSIGN_OR_RETURN(settings->log_frequency,
                             ParseInt<std::uint32_t>("triton,log-frequency", value, 0));
    return Status::Ok();
  }
  return InvalidArgument("--trace-config triton," + key +
                         ": unknown setting; expected triton,file or triton,log-frequency");
}

// Triton's "model_version" is a number; ltserve's versions are too, but keep any other text.
nlohmann::ordered_json VersionJson(const std::string& version) {
  if (!version.empty() && std::all_of(version.begin(), version.end(),
                                      [](char c) { return c >= '0' && c <= '9'; })) {
    std::int64_t number = 0;
    const auto [end, error] = std::from_chars(version.data(), version.data() + version.size(),
                                              number);
    if (error == std::errc()) return number;
  }
  return version;
}

// Triton's layout: per trace, one object naming the model, then one with its timestamps
// (in time order).
void AppendTrace(const RequestTrace& trace, nlohmann::ordered_json* out) {
  nlohmann::ordered_json model = {{"id", trace.id()},
                                  {"model_name", trace.model_name()},
                                  {"model_version", VersionJson(trace.model_version())}};
  if (!trace.request_id().empty()) model["request_id"] = trace.request_id();
  out->push_back(std::move(model));
  std::vector<std::pair<std::int64_t, std::string_view>> stamps;
  for (std::size_t a = 0; a < static_cast<std::size_t>(TraceActivity::kCount); ++a) {
    const auto activity = static_cast<TraceActivity>(a);
    if (auto ns = trace.At(activity)) stamps.emplace_back(*ns, TraceActivityName(activity));
  }
  std::stable_sort(stamps.begin(), stamps.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  nlohmann::ordered_json timestamps = nlohmann::ordered_json::array();
  for (const auto& [ns, name] : stamps) timestamps.push_back({{"name", name}, {"ns", ns}});
  out->push_back({{"id", trace.id()}, {"timestamps", std::move(timestamps)}});
}

Status WriteTraceFile(const std::filesystem::path& path,
                      const std::vector<std::unique_ptr<RequestTrace>>& traces) {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const auto& trace : traces) AppendTrace(*trace, &all);
  std::ofstream file(path, std::ios::trunc);
  file << all.dump(1) << '\n';
  file.close();
  if (!file) return Internal("cannot write the trace file " + path.string());
  return Status::Ok();
}

}  // namespace

Result<TraceSettings> ParseTraceConfig(const std::vector<std::string>& values) {
  TraceSettings settings;
  for (const std::string& value : values) {
    const std::size_t equals = value.find('=');
    if (equals == std::string::npos) {
      return InvalidArgument("--trace-config " + value +
                             ": expected <setting>=<value> or triton,<setting>=<value>");
    }
    const std::string key = value.substr(0, equals);
    const std::string_view setting = std::string_view(value).substr(equals + 1);
    if (const std::size_t comma = key.find(','); comma != std::string::npos) {
      const std::string mode = key.substr(0, comma);
      if (mode != "triton") {
        return InvalidArgument("--trace-config " + value +
                               ": ltserve writes Triton's trace files only (mode triton)");
      }
      LTSERVE_RETURN_IF_ERROR(ApplyTriton(key.substr(comma + 1), setting, &settings));
    } else {
      LTSERVE_RETURN_IF_ERROR(ApplyGlobal(key, setting, &settings));
    }
  }
  if (settings.timestamps && settings.file.empty()) {
    return InvalidArgument(
        "--trace-config level=TIMESTAMPS needs a file: add --trace-config triton,file=<path>");
  }
  return settings;
}

Result<std::unique_ptr<Tracer>> Tracer::Create(TraceSettings settings) {
  if (settings.timestamps) {
    // The first file this tracer writes, created now so that a bad path fails at start-up.
    const std::filesystem::path first =
        settings.log_frequency == 0 ? settings.file
                                    : std::filesystem::path(settings.file.string() + ".0");
    std::ofstream probe(first, std::ios::trunc);
    if (!probe) {
      return InvalidArgument("cannot create the trace file " + first.string() +
                             " (--trace-config triton,file)");
    }
  }
  return std::unique_ptr<Tracer>(new Tracer(std::move(settings)));
}

Tracer::Tracer(TraceSettings settings)
    : settings_(std::move(settings)), remaining_(settings_.count) {
  if (settings_.timestamps) writer_ = std::thread([this] { WriterLoop(); });
}

Tracer::~Tracer() {
  if (!writer_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    // Without a log frequency every trace goes to the one file, even none ("[]").
    if (!collecting_.empty() || settings_.log_frequency == 0) {
      to_write_.push_back({NextPathLocked(), std::move(collecting_)});
    }
    stopping_ = true;
  }
  ready_cv_.notify_one();
  writer_.join();
}

bool Tracer::TakeFromCount() {
  std::int64_t remaining = remaining_.load(std::memory_order_relaxed);
  while (true) {
    if (remaining < 0) return true;  // no end
    if (remaining == 0) return false;
    if (remaining_.compare_exchange_weak(remaining, remaining - 1, std::memory_order_relaxed)) {
      return true;
    }
  }
}

std::unique_ptr<RequestTrace> Tracer::Sample(std::string_view model_name,
                                             std::string_view model_version,
                                             std::string_view request_id) {
  if (!settings_.timestamps) return nullptr;
  const std::uint64_t seen = requests_seen_.fetch_add(1, std::memory_order_relaxed);
  if (seen % settings_.rate != 0 || !TakeFromCount()) return nullptr;
  return std::make_unique<RequestTrace>(next_id_.fetch_add(1, std::memory_order_relaxed),
                                        std::string(model_name), std::string(model_version),
                                        std::string(request_id));
}

std::filesystem::path Tracer::NextPathLocked() {
  if (settings_.log_frequency == 0) return settings_.file;
  return settings_.file.string() + "." + std::to_string(next_file_index_++);
}

void Tracer::Finish(std::unique_ptr<RequestTrace> trace) {
  if (trace == nullptr) return;
  bool batch_ready = false;
  {
    std::lock_guard lock(mutex_);
    collecting_.push_back(std::move(trace));
    if (settings_.log_frequency > 0 && collecting_.size() >= settings_.log_frequency) {
      to_write_.push_back({NextPathLocked(), std::move(collecting_)});
      collecting_.clear();
      batch_ready = true;
    }
  }
  if (batch_ready) ready_cv_.notify_one();
}

void Tracer::WriterLoop() {
  std::unique_lock lock(mutex_);
  while (true) {
    ready_cv_.wait(lock, [this] { return stopping_ || !to_write_.empty(); });
    std::vector<FileBatch> batches = std::move(to_write_);
    to_write_.clear();
    const bool stop = stopping_;
    lock.unlock();
    for (const FileBatch& batch : batches) {
      if (Status written = WriteTraceFile(batch.path, batch.traces); !written.ok()) {
        spdlog::error("{}", written.message());
      }
    }
    if (stop) return;
    lock.lock();
  }
}

}  // namespace ltserve
