// ltserve-cli: health, model metadata, one inference, statistics, against any KServe v2 gRPC
// server.
#include <CLI/CLI.hpp>

#include <iostream>

#include "commands.h"
#include "connection_flags.h"

int main(int argc, char** argv) {
  using namespace ltserve::client;
  CLI::App app("ltserve-cli: talk to an ltserve (or any KServe v2 gRPC) server");
  app.require_subcommand(1);
  ConnectionFlags connection;
  connection.Register(app);

  auto* health = app.add_subcommand("health", "server liveness, readiness and grpc.health.v1 status");
  bool json = false;
  std::string model;
  auto* metadata = app.add_subcommand("metadata", "a model's inputs, outputs and batching");
  metadata->add_option("model", model, "model name")->required();
  metadata->add_flag("--json", json, "print the raw responses as JSON");

  InferFlags infer_flags;
  auto* infer = app.add_subcommand("infer", "send one inference request and print the outputs");
  infer->add_option("model", infer_flags.model, "model name")->required();
  infer->add_option("--model-version", infer_flags.version, "version (default: latest)");
  auto* files = infer->add_option("--input-file", infer_flags.input_files,
                                  "raw little-endian tensor file: PATH for a one-input model, else INPUT=PATH; "
                                  "a file holding one sample is repeated over the batch");
  bool random = false;
  infer->add_flag("--random", random, "random inputs (the default)")->excludes(files);
  infer->add_option("--shape", infer_flags.shapes, "INPUT:d1,d2 for variable dimensions (without batch)");
  infer->add_option("-b,--batch", infer_flags.batch, "batch size")->check(CLI::PositiveNumber)->capture_default_str();
  infer->add_flag("--print", infer_flags.print, "print every output value");
  infer->add_option("--seed", infer_flags.seed, "random seed (0: fresh)");

  std::string stats_model;
  auto* stats = app.add_subcommand("stats", "ModelStatistics: counts and average times");
  stats->add_option("model", stats_model, "model name (default: every model)");
  stats->add_flag("--json", json, "print the raw response as JSON");

  CLI11_PARSE(app, argc, argv);

  auto client = Client::Create(connection.ToOptions());
  if (!client.ok()) {
    std::cerr << "error: " << client.status().ToString() << "\n";
    return 1;
  }
  if (*health) return RunHealth(**client);
  if (*metadata) return RunMetadata(**client, model, json);
  if (*infer) return RunInfer(**client, infer_flags);
  if (*stats) return RunStats(**client, stats_model, json);
  return 1;
}
