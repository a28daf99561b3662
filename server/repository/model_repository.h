// The set of models the server serves, loaded from a Triton-style model repository, and their
// life cycle under Triton's model control modes.
//
// Loading a model version: its config.pbtxt is parsed (server/config), the TorchScript file
// loaded and lowered (server/torch), given an executor (GPU fused when a GPU is usable, else the
// CPU plan executor, else the TorchScript fallback), warmed up and put behind its own
// Scheduler. A model that fails at any step is reported UNAVAILABLE with its reason; the others
// serve. version_policy decides which versions serve side by side.
//
// Control modes (Triton's): kNone loads every model at start and never changes; kExplicit loads
// the startup models named in the options and then what Load/Unload ask for; kPoll loads every
// model at start and rescans the repository every poll interval, loading new and changed
// models and unloading removed ones.
//
// A reload swaps versions without failing a request: the new versions load beside the old ones,
// then Find returns the new ones; requests that already hold the old Model finish on it, and
// its executors and memory are released after the last of them, on a thread of the repository
// (never on a scheduler or gRPC thread).
//
// Thread-safety: every public method may be called from any thread. The state of the models is
// under one mutex held only to read or swap it; loads and unloads are serialised by a second
// one, held for the whole operation; the change listener is called with neither held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
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
  // The GPU whose memory the executor reads inputs from and writes outputs to itself, for
  // tensors in CUDA shared memory (ExecutorFactory::DirectDeviceMemory, batched models only);
  // nullopt: such tensors go through host memory.
  std::optional<std::int64_t> direct_device_memory() const { return direct_device_memory_; }
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
  std::optional<std::int64_t> direct_device_memory_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::vector<std::string>> output_labels_;
};

// Triton's names, as RepositoryIndex reports them.
enum class VersionState { kLoading, kReady, kUnavailable };
const char* VersionStateName(VersionState state);

// One row of the repository index: a version of a model, or a model without a version (its
// config failed, or it was never loaded: then `state` is empty, as in Triton's index).
struct ModelState {
  std::string name;
  std::string version;  // empty when the model never got as far as a version
  std::optional<VersionState> state;
  std::string reason;   // why not ready
  bool ready() const { return state == VersionState::kReady; }
};

enum class ModelControlMode { kNone, kPoll, kExplicit };

struct RepositoryOptions {
  std::filesystem::path repository;
  bool allow_gpu = true;    // false: never use the GPU even when one is present
  ModelControlMode control_mode = ModelControlMode::kNone;
  // kExplicit: the models loaded at start; "*" loads every model.
  std::vector<std::string> startup_models;
  // kPoll: how often the repository is rescanned.
  std::chrono::milliseconds poll_interval{15'000};
  // Called after every change of a model's state (readiness may have changed), from the thread
  // that made it, with no lock of the repository held.
  std::function<void()> on_change;
};

class ModelRepository {
 public:
  // Loads the models the control mode loads at start. Fails only when the repository itself
  // cannot be read, or kExplicit names a startup model it does not hold; broken models are
  // reported per model.
  static Result<std::unique_ptr<ModelRepository>> Create(const RepositoryOptions& options,
                                                         Metrics* metrics);
  // Every Model handed out must have been released (the app shuts gRPC down first).
  ~ModelRepository();

  ModelRepository(const ModelRepository&) = delete;
  ModelRepository& operator=(const ModelRepository&) = delete;

  // `version` empty: the highest ready version. NOT_FOUND names the known models, or says the
  // version does not exist; UNAVAILABLE when the model or version is not ready.
  Result<std::shared_ptr<Model>> Find(const std::string& name, const std::string& version) const;
  // Every ready version of every model, by name then version.
  std::vector<std::shared_ptr<Model>> Models() const;
  // The ready versions of `name`, lowest first.
  std::vector<std::string> ReadyVersions(const std::string& name) const;
  // Every model directory, one row per version it has or had.
  std::vector<ModelState> States() const;
  // Every model asked to serve (all at start in kNone and kPoll, those loaded in kExplicit)
  // serves every version its policy names; in kNone and kPoll an empty repository is never
  // ready.
  bool AllReady() const;
  bool AnyReady() const;

  // Load or reload `name` (kExplicit only; else UNAVAILABLE, as Triton answers). With
  // `config_override` that config replaces config.pbtxt for this load. Blocks until done. If a
  // loaded model fails to reload, the old versions keep serving and the error is returned.
  Status Load(const std::string& name, const inference::ModelConfig* config_override);
  // Stops serving `name` (kExplicit only); accepted requests finish first. Unloading a model
  // that is not loaded succeeds.
  Status Unload(const std::string& name);
  // Load and Unload on the repository's control thread; `done` is called there.
  void LoadAsync(const std::string& name, std::optional<inference::ModelConfig> config_override,
                 std::function<void(const Status&)> done);
  void UnloadAsync(const std::string& name, std::function<void(const Status&)> done);

  ModelControlMode control_mode() const { return options_.control_mode; }
  // Model objects not yet destroyed (served, or retired and still finishing requests).
  std::size_t LiveModelCount() const;

  // Stops every scheduler from accepting and finishes what they accepted, until `deadline`;
  // loads and unloads are refused from then on. True when everything accepted finished in time.
  bool Drain(std::chrono::steady_clock::time_point deadline);

 private:
  struct VersionSlot {
    VersionState state = VersionState::kLoading;
    std::string reason;
    std::shared_ptr<Model> model;  // set when kReady
  };
  struct ModelRecord {
    std::map<std::int64_t, VersionSlot> versions;
    std::optional<std::string> model_error;  // the config failed: no version could be chosen
    bool requested = false;                  // asked to serve: counts for readiness
    std::string fingerprint;                 // kPoll: the directory as last loaded
  };
  class Reaper;  // destroys retired models on its own thread

  explicit ModelRepository(RepositoryOptions options, Metrics* metrics);
  Status LoadLocked(const std::string& name, const inference::ModelConfig* config_override);
  Status UnloadLocked(const std::string& name, bool forget);
  Result<std::shared_ptr<Model>> LoadVersion(const ModelSpec& spec,
                                             const inference::ModelConfig& config,
                                             const std::filesystem::path& dir);
  Status RequireExplicit() const;
  void Poll();
  void ControlLoop();
  void Enqueue(std::function<void()> task);
  void Notify() const;
  // Under mutex_: keeps weak references to the models leaving service, for Drain.
  void RememberRetired(const std::vector<std::shared_ptr<Model>>& retiring);

  const RepositoryOptions options_;
  Metrics* const metrics_;
  std::unique_ptr<Reaper> reaper_;  // destroyed last of all but the options

  mutable std::mutex mutex_;  // guards records_, retired_, draining_
  std::map<std::string, ModelRecord> records_;
  std::vector<std::weak_ptr<Model>> retired_;  // still finishing requests; Drain waits for them
  bool draining_ = false;

  std::mutex control_mutex_;  // one load, unload or poll at a time

  std::mutex queue_mutex_;  // guards tasks_, stopping_
  std::condition_variable queue_changed_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread control_thread_;  // last: started once everything above exists
};

}  // namespace ltserve
