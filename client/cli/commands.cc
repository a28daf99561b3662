#include "commands.h"

#include <google/protobuf/util/json_util.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "input_flags.h"
#include "model_inputs.h"

namespace ltserve::client {
namespace {

// Values shown per output without --print.
constexpr std::size_t kPreviewValues = 8;

int Fail(const Status& status) {
  std::cerr << "error: " << status.ToString() << "\n";
  return 1;
}

std::string ShapeText(const auto& shape) {
  std::string out = "[";
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

int PrintJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) return Fail(Internal("JSON conversion: " + status.ToString()));
  std::cout << json;
  return 0;
}

double AverageMs(const inference::StatisticDuration& d) {
  return d.count() ? static_cast<double>(d.ns()) / d.count() / 1e6 : 0.0;
}

}  // namespace

int RunHealth(Client& client) {
  auto live = client.ServerLive();
  if (!live.ok()) return Fail(live.status());
  auto ready = client.ServerReady();
  if (!ready.ok()) return Fail(ready.status());
  std::cout << "live: " << (*live ? "true" : "false") << "\nready: " << (*ready ? "true" : "false") << "\n";
  auto health = client.HealthCheck();
  std::cout << "grpc.health.v1: "
            << (health.ok() ? HealthStatusName(*health) : health.status().ToString()) << "\n";
  auto server = client.ServerMetadata();
  if (server.ok()) std::cout << "server: " << server->name() << " " << server->version() << "\n";
  return *live && *ready ? 0 : 1;
}

int RunMetadata(Client& client, const std::string& model, bool json) {
  auto metadata = client.ModelMetadata(model);
  if (!metadata.ok()) return Fail(metadata.status());
  auto config = client.ModelConfig(model);
  if (json) {
    int rc = PrintJson(*metadata);
    if (config.ok()) rc |= PrintJson(*config);
    return rc;
  }
  std::cout << "model: " << metadata->name() << "\nplatform: " << metadata->platform() << "\nversions:";
  for (const auto& v : metadata->versions()) std::cout << " " << v;
  std::cout << "\n";
  if (config.ok()) std::cout << "max_batch_size: " << config->config().max_batch_size() << "\n";
  for (const auto* list : {&metadata->inputs(), &metadata->outputs()}) {
    std::cout << (list == &metadata->inputs() ? "inputs:\n" : "outputs:\n");
    for (const auto& t : *list) {
      std::cout << "  " << t.name() << " " << t.datatype() << " " << ShapeText(t.shape()) << "\n";
    }
  }
  return 0;
}

int RunInfer(Client& client, const InferFlags& flags) {
  auto metadata = client.ModelMetadata(flags.model, flags.version);
  if (!metadata.ok()) return Fail(metadata.status());
  auto max_batch = FetchMaxBatchSize(client, flags.model, *metadata);
  if (!max_batch.ok()) return Fail(max_batch.status());
  auto shapes = ParseShapeFlags(flags.shapes);
  if (!shapes.ok()) return Fail(shapes.status());
  auto specs = ResolveInputs(*metadata, *max_batch, flags.batch, *shapes);
  if (!specs.ok()) return Fail(specs.status());
  auto files = ParseInputFileFlags(flags.input_files, *specs);
  if (!files.ok()) return Fail(files.status());
  std::mt19937_64 rng(flags.seed ? flags.seed : std::random_device{}());
  auto request = BuildRequest(flags.model, *specs, *files, rng);
  if (!request.ok()) return Fail(request.status());

  const auto start = std::chrono::steady_clock::now();
  auto result = client.Infer(*request);
  const auto took = std::chrono::steady_clock::now() - start;
  if (!result.ok()) return Fail(result.status());
  std::printf("model %s: %.3f ms\n", flags.model.c_str(),
              std::chrono::duration<double, std::milli>(took).count());
  for (const std::string& name : result->OutputNames()) {
    auto view = result->Output(name);
    auto values = result->OutputAsFloat(name);
    if (!view.ok() || !values.ok()) return Fail(view.ok() ? values.status() : view.status());
    std::cout << name << " " << WireName(view->type) << " " << ShapeText(view->shape) << ":";
    const std::size_t shown = flags.print ? values->size() : std::min(values->size(), kPreviewValues);
    for (std::size_t i = 0; i < shown; ++i) std::printf(" %.6g", static_cast<double>((*values)[i]));
    if (shown < values->size()) std::cout << " ... (--print shows all " << values->size() << ")";
    std::cout << "\n";
  }
  return 0;
}

int RunStats(Client& client, const std::string& model, bool json) {
  auto stats = client.ModelStatistics(model);
  if (!stats.ok()) return Fail(stats.status());
  if (json) return PrintJson(*stats);
  std::printf("%-20s %-8s %12s %12s %10s %10s %10s %10s %10s\n", "model", "version", "inferences",
              "executions", "request ms", "queue ms", "input ms", "infer ms", "output ms");
  for (const auto& m : stats->model_stats()) {
    const auto& s = m.inference_stats();
    std::printf("%-20s %-8s %12llu %12llu %10.3f %10.3f %10.3f %10.3f %10.3f\n", m.name().c_str(),
                m.version().c_str(), static_cast<unsigned long long>(m.inference_count()),
                static_cast<unsigned long long>(m.execution_count()), AverageMs(s.success()),
                AverageMs(s.queue()), AverageMs(s.compute_input()), AverageMs(s.compute_infer()),
                AverageMs(s.compute_output()));
  }
  return 0;
}

}  // namespace ltserve::client
