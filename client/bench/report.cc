#include "report.h"

#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

namespace ltserve::client {
namespace {

std::string Fmt(const char* format, auto... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof(buffer), format, args...);
  return buffer;
}

struct PipeCloser {
  void operator()(FILE* pipe) const { pclose(pipe); }
};

}  // namespace

std::string FormatLevel(const LevelResult& l) {
  const auto& s = l.server;
  return Fmt("%s %g: %.1f infer/s, %.0f tokens/s, latency p50 %.0f us p90 %.0f us p99 %.0f us (avg %.0f) | server: "
             "request %.0f us = queue %.0f + input %.0f + infer %.0f + output %.0f, avg batch %.2f | "
             "%llu errors, %d windows%s",
             l.mode.c_str(), l.level, l.throughput, l.tokens_per_s, l.latency.p50_us, l.latency.p90_us,
             l.latency.p99_us, l.latency.avg_us, s.request_us, s.queue_us, s.compute_input_us, s.compute_infer_us,
             s.compute_output_us, s.avg_batch(), static_cast<unsigned long long>(l.errors), l.windows,
             l.stable ? ", stable" : ", NOT stable");
}

void PrintTable(const RunInfo& info, const std::vector<LevelResult>& levels) {
  std::printf("\nmodel %s at %s, batch %d, %d channel(s)%s%s; latencies in microseconds\n", info.model.c_str(),
              info.url.c_str(), info.batch, info.channels,
              info.sequence_lengths.empty() ? "" : ", sequence lengths ", info.sequence_lengths.c_str());
  std::printf("%-12s %10s %12s %12s %8s %8s %8s %8s | %8s %8s %8s %8s %8s %6s | %6s %s\n", "mode",
              "level", "infer/s", "tokens/s", "p50", "p90", "p99", "avg", "server", "queue", "input", "infer",
              "output", "batch", "errors", "stable");
  for (const auto& l : levels) {
    const auto& s = l.server;
    std::printf("%-12s %10g %12.1f %12.0f %8.0f %8.0f %8.0f %8.0f | %8.0f %8.0f %8.0f %8.0f %8.0f %6.2f | %6llu %s\n",
                l.mode.c_str(), l.level, l.throughput, l.tokens_per_s, l.latency.p50_us, l.latency.p90_us,
                l.latency.p99_us, l.latency.avg_us, s.request_us, s.queue_us, s.compute_input_us,
                s.compute_infer_us, s.compute_output_us, s.avg_batch(), static_cast<unsigned long long>(l.errors),
                l.stable ? "yes" : "no");
  }
}

std::string ToJson(const RunInfo& info, const std::vector<LevelResult>& levels) {
  nlohmann::json out;
  out["model"] = info.model;
  out["url"] = info.url;
  out["batch"] = info.batch;
  out["channels"] = info.channels;
  out["sequence_lengths"] = info.sequence_lengths;
  out["levels"] = nlohmann::json::array();
  for (const auto& l : levels) {
    const auto& s = l.server;
    out["levels"].push_back({
        {"mode", l.mode},
        {"level", l.level},
        {"throughput_infer_per_s", l.throughput},
        {"requests_per_s", l.request_rate},
        {"tokens_per_s", l.tokens_per_s},
        {"latency_us",
         {{"count", l.latency.count}, {"avg", l.latency.avg_us}, {"p50", l.latency.p50_us},
          {"p90", l.latency.p90_us}, {"p95", l.latency.p95_us}, {"p99", l.latency.p99_us},
          {"max", l.latency.max_us}}},
        {"server_us",
         {{"requests", s.requests}, {"request", s.request_us}, {"queue", s.queue_us},
          {"compute_input", s.compute_input_us}, {"compute_infer", s.compute_infer_us},
          {"compute_output", s.compute_output_us}, {"avg_batch", s.avg_batch()}}},
        {"errors", l.errors},
        {"first_error", l.first_error},
        {"delayed", l.delayed},
        {"windows", l.windows},
        {"stable", l.stable},
    });
  }
  return out.dump(2) + "\n";
}

std::string ToCsv(const std::vector<LevelResult>& levels) {
  std::ostringstream out;
  out << "mode,level,throughput_infer_per_s,requests_per_s,tokens_per_s,p50_us,p90_us,p95_us,p99_us,avg_us,"
         "server_request_us,server_queue_us,server_compute_input_us,server_compute_infer_us,"
         "server_compute_output_us,avg_batch,errors,windows,stable\n";
  for (const auto& l : levels) {
    const auto& s = l.server;
    out << Fmt("%s,%g,%.3f,%.3f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.3f,%llu,%d,%d\n",
               l.mode.c_str(), l.level, l.throughput, l.request_rate, l.tokens_per_s, l.latency.p50_us,
               l.latency.p90_us, l.latency.p95_us, l.latency.p99_us, l.latency.avg_us, s.request_us, s.queue_us,
               s.compute_input_us, s.compute_infer_us, s.compute_output_us, s.avg_batch(),
               static_cast<unsigned long long>(l.errors), l.windows, l.stable ? 1 : 0);
  }
  return out.str();
}

Status WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return NotFound("cannot write '" + path + "'");
  out << contents;
  out.close();
  if (!out) return Internal("writing '" + path + "' failed");
  return Status::Ok();
}

Status Plot(const RunInfo& info, const std::vector<LevelResult>& levels, const std::string& png_path) {
  if (png_path.find('"') != std::string::npos) return InvalidArgument("plot path must not contain '\"'");
  std::unique_ptr<FILE, PipeCloser> gnuplot(popen("gnuplot", "w"));
  if (!gnuplot) return Unavailable("cannot start gnuplot (Debian package gnuplot-nox)");
  std::ostringstream script;
  script << "set terminal png size 1000,640\n"
         << "set output \"" << png_path << "\"\n"
         << "set title \"" << info.model << ": latency vs throughput (batch " << info.batch << ")\" noenhanced\n"
         << "set xlabel \"throughput (infer/s)\"\nset ylabel \"latency (ms)\"\nset grid\nset key left top\n"
         << "$levels << EOD\n";
  for (const auto& l : levels) {
    script << l.throughput << " " << l.latency.p50_us / 1e3 << " " << l.latency.p99_us / 1e3 << " " << l.level
           << "\n";
  }
  script << "EOD\n"
         << "plot $levels using 1:2 with linespoints title \"p50\", "
            "$levels using 1:3 with linespoints title \"p99\", "
            "$levels using 1:3:(sprintf(\"%g\", $4)) with labels offset 0,1 notitle\n";
  const std::string text = script.str();
  if (std::fwrite(text.data(), 1, text.size(), gnuplot.get()) != text.size()) {
    return Internal("writing the gnuplot script failed");
  }
  const int rc = pclose(gnuplot.release());
  // popen runs gnuplot through the shell, which reports a missing program as exit status 127.
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 127) {
    return Unavailable("gnuplot is not installed (Debian package gnuplot-nox)");
  }
  if (rc != 0) return Internal("gnuplot exited with status " + std::to_string(rc) + " drawing '" + png_path + "'");
  return Status::Ok();
}

}  // namespace ltserve::client
