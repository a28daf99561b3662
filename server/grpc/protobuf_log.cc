#include "grpc/protobuf_log.h"

#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <mutex>

namespace ltserve {

namespace {

// Enough to see that something is wrong and what; a flood repeats the same few lines.
constexpr int kLinesPerInterval = 5;
constexpr std::chrono::seconds kInterval{10};

thread_local std::string last_line;

struct Limiter {
  std::mutex mutex;
  std::chrono::steady_clock::time_point interval_start{};
  int logged = 0;
  std::uint64_t dropped = 0;

  // Whether this line may be logged; reports the lines dropped in the interval before.
  bool Admit() {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(mutex);
    if (now - interval_start >= kInterval) {
      if (dropped > 0) {
        const auto seconds =
            std::chrono::duration_cast<std::chrono::seconds>(now - interval_start).count();
        spdlog::warn("libprotobuf: {} more line(s) not logged in the last {} s", dropped, seconds);
      }
      interval_start = now;
      logged = 0;
      dropped = 0;
    }
    if (logged < kLinesPerInterval) {
      ++logged;
      return true;
    }
    ++dropped;
    return false;
  }
};

Limiter& limiter() {
  static Limiter instance;
  return instance;
}

void Handle(google::protobuf::LogLevel level, const char* filename, int line,
            const std::string& message) {
  last_line = message;
  // FATAL is followed by an abort; it must not be lost to the limit.
  if (level != google::protobuf::LOGLEVEL_FATAL && !limiter().Admit()) return;
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      spdlog::info("libprotobuf {}:{}: {}", filename, line, message);
      break;
    case google::protobuf::LOGLEVEL_WARNING:
    case google::protobuf::LOGLEVEL_ERROR:
      // Parse errors come from what clients send; they are the client's error, not the server's.
      spdlog::warn("libprotobuf {}:{}: {}", filename, line, message);
      break;
    case google::protobuf::LOGLEVEL_FATAL:
      spdlog::critical("libprotobuf {}:{}: {}", filename, line, message);
      break;
  }
}

}  // namespace

void InstallProtobufLogHandler() { google::protobuf::SetLogHandler(&Handle); }

std::string TakeProtobufLogLine() {
  std::string line = std::move(last_line);
  last_line.clear();
  return line;
}

}  // namespace ltserve
