// What ltserve-bench writes: a console table, JSON, CSV, and a latency-throughput PNG drawn by
// gnuplot.
//
// Thread-safety: free functions; call from one thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "load_runner.h"

namespace ltserve::client {

struct RunInfo {
  std::string model;
  std::string url;
  int batch = 1;
  int channels = 1;
  std::string sequence_lengths;  // "MIN:MAX" of a mixed-length run; empty for fixed shapes
};

std::string FormatLevel(const LevelResult& level);
void PrintTable(const RunInfo& info, const std::vector<LevelResult>& levels);
std::string ToJson(const RunInfo& info, const std::vector<LevelResult>& levels);
std::string ToCsv(const std::vector<LevelResult>& levels);
Status WriteFile(const std::string& path, const std::string& contents);
// p50 and p99 latency against throughput, one point per level. Needs gnuplot on the PATH.
Status Plot(const RunInfo& info, const std::vector<LevelResult>& levels, const std::string& png_path);

}  // namespace ltserve::client
