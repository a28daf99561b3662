// ltserve-bench: a load generator in the spirit of perf_analyzer. Sweeps concurrency levels (or
// request rates) against one model, measures each until throughput is stable, and reports
// client latency percentiles next to the server's own queue/compute breakdown.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <numeric>

#include "connection_flags.h"
#include "input_flags.h"
#include "load_runner.h"
#include "model_inputs.h"
#include "report.h"
#include "sequence_lengths.h"

namespace {

// Concurrent streams one channel carries comfortably before they queue behind HTTP/2's
// default limit of 100 per connection.
constexpr int kStreamsPerChannel = 64;
constexpr int kMaxAutoChannels = 16;
// Requests a mixed-length run draws up front: enough lengths that their mean is within a few %
// of the range's, few enough to stay ~100 MB for a BERT-sized fp32 input.
constexpr std::size_t kDefaultPool = 128;

int Fail(const ltserve::Status& status) {
  std::cerr << "error: " << status.ToString() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ltserve::client;
  CLI::App app("ltserve-bench: throughput and latency of a model served over KServe v2 gRPC");
  ConnectionFlags connection;
  connection.Register(app);
  std::string model, version;
  std::vector<int> concurrency;
  std::vector<double> rates;
  int batch = 1;
  std::vector<std::string> input_files, shapes, value_range_flags;
  std::int64_t warmup_ms = 1000, window_ms = 2000;
  int max_windows = 10, stable_windows = 3;
  double stability_pct = 5;
  std::string json_path, csv_path, plot_path;
  bool quiet = false;
  std::string sequence_lengths;
  std::uint64_t seed = 0;
  std::size_t pool_size = kDefaultPool;

  app.add_option("-m,--model", model, "model name")->required();
  app.add_option("--model-version", version, "version (default: latest)");
  auto* conc = app.add_option("--concurrency", concurrency, "requests in flight, a sweep: 1,4,16,64,256")
                   ->delimiter(',')
                   ->check(CLI::Range(1, 100000));
  app.add_option("--request-rate", rates, "open-loop requests/s instead, a sweep: 100,500,1000")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->excludes(conc);
  app.add_option("-b,--batch", batch, "samples per request")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--input-file", input_files, "raw input file: PATH for a one-input model, else INPUT=PATH");
  app.add_option("--shape", shapes, "INPUT:d1,d2 for variable dimensions (without batch)");
  app.add_option("--value-range", value_range_flags,
                 "INPUT=MIN:MAX: random integers of INPUT uniform in [MIN, MAX] (token ids in the "
                 "vocabulary, a mask of ones: attention_mask=1:1)");
  auto* lengths_flag = app.add_option(
      "--sequence-lengths", sequence_lengths,
      "MIN:MAX: each request's sequence length (input 0's variable dimension) uniform in [MIN, MAX]; "
      "reports real tokens/s");
  app.add_option("--request-pool", pool_size, "requests drawn up front for --sequence-lengths, sent in turn")
      ->check(CLI::Range(1, 100000))
      ->needs(lengths_flag)
      ->capture_default_str();
  auto* seed_flag = app.add_option("--seed", seed, "seed for random contents and lengths (default: random)");
  app.add_option("--warmup-ms", warmup_ms, "load before measuring, per level")->capture_default_str();
  app.add_option("--window-ms", window_ms, "measurement window")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--stability-pct", stability_pct, "windows agree within this % of their mean")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--stable-windows", stable_windows, "consecutive windows that must agree")
      ->check(CLI::Range(1, 100))->capture_default_str();
  app.add_option("--max-windows", max_windows, "windows per level before giving up on stability")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--json", json_path, "write the results as JSON");
  app.add_option("--csv", csv_path, "write the results as CSV");
  app.add_option("--plot", plot_path, "draw latency vs throughput into this PNG (gnuplot)");
  app.add_flag("-q,--quiet", quiet, "no per-window progress");
  CLI11_PARSE(app, argc, argv);

  if (concurrency.empty() && rates.empty()) concurrency = {1};
  const int peak = concurrency.empty() ? 0 : *std::max_element(concurrency.begin(), concurrency.end());
  if (app.get_option("--channels")->count() == 0) {
    connection.channels = std::clamp((peak + kStreamsPerChannel - 1) / kStreamsPerChannel, 1, kMaxAutoChannels);
  }

  auto client = Client::Create(connection.ToOptions());
  if (!client.ok()) return Fail(client.status());
  auto metadata = (*client)->ModelMetadata(model, version);
  if (!metadata.ok()) return Fail(metadata.status());
  auto max_batch = FetchMaxBatchSize(**client, model, *metadata);
  if (!max_batch.ok()) return Fail(max_batch.status());
  auto shape_map = ParseShapeFlags(shapes);
  if (!shape_map.ok()) return Fail(shape_map.status());
  auto value_ranges = ParseValueRangeFlags(value_range_flags);
  if (!value_ranges.ok()) return Fail(value_ranges.status());
  std::mt19937_64 rng(seed_flag->count() > 0 ? seed : std::random_device{}());
  std::vector<PooledRequest> pool;
  if (sequence_lengths.empty()) {
    auto specs = ResolveInputs(*metadata, *max_batch, batch, *shape_map);
    if (!specs.ok()) return Fail(specs.status());
    if (ltserve::Status ranged = ApplyValueRanges(*value_ranges, &*specs); !ranged.ok()) return Fail(ranged);
    auto files = ParseInputFileFlags(input_files, *specs);
    if (!files.ok()) return Fail(files.status());
    auto request = BuildRequest(model, *specs, *files, rng);
    if (!request.ok()) return Fail(request.status());
    pool.push_back({std::make_shared<const InferRequest>(std::move(*request)), 0});
  } else {
    auto range = ParseLengthRange(sequence_lengths);
    if (!range.ok()) return Fail(range.status());
    auto dim = SequenceDim(*metadata, *max_batch);
    if (!dim.ok()) return Fail(dim.status());
    // The shortest request's inputs, only to name a bare --input-file's input.
    auto specs = ResolveWithLength(*metadata, *max_batch, batch, *shape_map, *dim, range->min);
    if (!specs.ok()) return Fail(specs.status());
    auto files = ParseInputFileFlags(input_files, *specs);
    if (!files.ok()) return Fail(files.status());
    auto built = BuildLengthPool(*metadata, *max_batch, batch, *shape_map, *files, *range, pool_size, rng,
                                 *value_ranges);
    if (!built.ok()) return Fail(built.status());
    pool = std::move(*built);
    if (!quiet) {
      const double tokens = std::accumulate(pool.begin(), pool.end(), 0.0,
                                            [](double sum, const PooledRequest& r) { return sum + r.tokens; });
      std::cerr << pool.size() << " requests drawn, mean sequence length "
                << tokens / static_cast<double>(pool.size() * batch) << std::endl;
    }
  }

  LoadOptions options;
  options.warmup = std::chrono::milliseconds(warmup_ms);
  options.window = std::chrono::milliseconds(window_ms);
  options.stable_windows = stable_windows;
  options.stability = stability_pct / 100;
  options.max_windows = std::max(max_windows, stable_windows);
  options.batch = batch;
  if (!quiet) options.progress = [](const std::string& line) { std::cerr << line << std::endl; };
  LoadRunner runner(**client, std::move(pool), model, options);

  RunInfo info{model, connection.url, batch, connection.channels, sequence_lengths};
  std::vector<LevelResult> levels;
  const std::size_t count = concurrency.empty() ? rates.size() : concurrency.size();
  for (std::size_t i = 0; i < count; ++i) {
    if (!quiet) {
      std::cerr << (concurrency.empty() ? "request rate " + std::to_string(rates[i])
                                        : "concurrency " + std::to_string(concurrency[i]))
                << " (" << i + 1 << "/" << count << ")" << std::endl;
    }
    auto level = concurrency.empty() ? runner.RunRate(rates[i]) : runner.RunConcurrency(concurrency[i]);
    if (!level.ok()) return Fail(level.status());
    std::cout << FormatLevel(*level) << std::endl;
    levels.push_back(std::move(*level));
  }
  PrintTable(info, levels);
  if (!json_path.empty()) {
    if (auto status = WriteFile(json_path, ToJson(info, levels)); !status.ok()) return Fail(status);
  }
  if (!csv_path.empty()) {
    if (auto status = WriteFile(csv_path, ToCsv(levels)); !status.ok()) return Fail(status);
  }
  if (!plot_path.empty()) {
    if (auto status = Plot(info, levels, plot_path); !status.ok()) return Fail(status);
  }
  int errors = 0;
  for (const auto& l : levels) errors += l.errors > 0;
  return errors ? 1 : 0;
}
