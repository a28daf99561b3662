// The set of models the server serves, loaded from a Triton-style model repository.
//
// At start every model directory is parsed (server/config), loaded by libtorch and lowered to a
// plan (server/torch), given an executor (GPU fused when a GPU is usable, else the CPU plan
// executor, else the TorchScript fallback), warmed up and put behind its own Scheduler. A model
// that fails at any step is kept in the list as UNAVAILABLE with its reason; the others serve.
//
// Thread-safety: after Create, Find/List/ready queries are safe from any thread (the set of
// models is immutable); Drain may be called once, from any thread.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "executor/executor.h"
#include "model/model_spec.h"
#include "model_config.pb.h"
#include "scheduler/model_stats.h"
#include "scheduler/scheduler.h"

namespace ltserve {

class Metrics;

// One served model version.
class Model {
 public:
  Model(ModelSpec spec, inference::ModelConfig config, ExecutionPath path, std::string description,
        std::unique_ptr<StatsObserver> observer);
  ~Model();

  const ModelSpec& spec() const { return spec_; }
  const inference::ModelConfig& config() const { return config_; }
  ExecutionPath path() const { return path_; }
  const std::string& description() const { return description_; }
  ModelStats& stats() { return stats_; }
  Scheduler& scheduler() { return *scheduler_; }
  std::string version_string() const { return std::to_string(spec_.version); }
  // The lines of output `index`'s label_filename (config order); empty when it has none.
  const std::vector<std::string>& output_labels(std::size_t index) const {
    static const std::vector<std::string> kNone;
    return index < output_labels_.size() ? output_labels_[index] : kNone;
  }

 private:
  friend class ModelRepository;
  ModelSpec spec_;
  inference::ModelConfig config_;
  ExecutionPath path_;
  std::string description_;
  std::unique_ptr<StatsObserver> observer_;  // before stats_: stats_ points to it
  ModelStats stats_;
  std::unique_ptr<ExecutorFactory> factory_;  // outlives the instances the scheduler owns
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::vector<std::string>> output_labels_;
};

struct ModelState {
  std::string name;
  std::string version;      // empty when the model never got as far as a version
  bool ready = false;
  std::string reason;       // why not ready
};

struct RepositoryOptions {
  std::filesystem::path repository;
  bool allow_gpu = true;    // false: never use the GPU even when one is present
};

class ModelRepository {
 public:
  // Fails only when the repository itself cannot be read; broken models are reported per model.
  static Result<std::unique_ptr<ModelRepository>> Create(const RepositoryOptions& options,
                                                         Metrics* metrics);
  ~ModelRepository();

  // `version` empty: the served version. NOT_FOUND names the known models.
  Result<std::shared_ptr<Model>> Find(const std::string& name, const std::string& version) const;
  std::vector<std::shared_ptr<Model>> Models() const { return models_; }
  std::vector<ModelState> States() const { return states_; }
  bool AllReady() const;
  bool AnyReady() const;
  // Stops every scheduler from accepting and finishes what they accepted, until `deadline`.
  // True when everything accepted finished in time.
  bool Drain(std::chrono::steady_clock::time_point deadline);

 private:
  ModelRepository() = default;
  std::vector<std::shared_ptr<Model>> models_;  // ready models only
  std::vector<ModelState> states_;              // every directory, ready or not
};

}  // namespace ltserve
