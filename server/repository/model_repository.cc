#include "repository/model_repository.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <fstream>
#include <system_error>

#include "config/model_config.h"
#include "cpu/cpu_executor.h"
#include "gpu/gpu_executor.h"
#include "metrics/metrics.h"
#include "scheduler/warm_up.h"
#include "torch/torch_loader.h"

namespace ltserve {
namespace {

SchedulerOptions::QueuePolicy ToQueuePolicy(const inference::ModelQueuePolicy& policy) {
  SchedulerOptions::QueuePolicy out;
  out.default_timeout_us = policy.default_timeout_microseconds();
  out.allow_timeout_override = policy.allow_timeout_override();
  out.max_queue_size = policy.max_queue_size();
  return out;
}

SchedulerOptions MakeSchedulerOptions(const ModelSpec& spec, const inference::ModelConfig& config) {
  SchedulerOptions options;
  options.max_batch_size = spec.max_batch_size;
  if (config.has_dynamic_batching()) {
    const auto& batching = config.dynamic_batching();
    options.dynamic_batching = true;
    options.preferred_batch_sizes.assign(batching.preferred_batch_size().begin(),
                                         batching.preferred_batch_size().end());
    options.max_queue_delay_us = batching.max_queue_delay_microseconds();
    options.priority_levels = static_cast<std::uint32_t>(batching.priority_levels());
    options.default_priority_level = static_cast<std::uint32_t>(batching.default_priority_level());
    options.default_policy = ToQueuePolicy(batching.default_queue_policy());
    for (const auto& [level, policy] : batching.priority_queue_policy()) {
      options.priority_policies[static_cast<std::uint32_t>(level)] = ToQueuePolicy(policy);
    }
  }
  for (const TensorSpec& output : spec.outputs) {
    options.output_types.push_back(output.dtype);
    options.output_dims.push_back(output.dims);
  }
  return options;
}

struct ChosenExecutor {
  std::unique_ptr<ExecutorFactory> factory;
  std::string description;
  // A token plan's layout (an encoder): the scheduler packs sequences by it, and the executor
  // was sized by it.
  std::optional<TokenLayout> tokens;
};

// Picks the fastest path the model allows: the fused GPU executor, else the CPU plan executor,
// else libtorch's TorchScript forward. Each step down is logged with its reason.
Result<ChosenExecutor> ChooseExecutor(const ModelSpec& spec, bool allow_gpu) {
  LTSERVE_ASSIGN_OR_RETURN(LoadedModel loaded, LoadTorchScriptModel(spec));
  if (loaded.plan == nullptr) {
    spdlog::info("model '{}': not lowered to a plan ({}); serving through TorchScript", spec.name,
                 loaded.lowering_report);
    return ChosenExecutor{std::move(loaded.torchscript), loaded.lowering_report, std::nullopt};
  }
  const std::optional<TokenLayout>& tokens = loaded.token_layout;
  auto chosen = [&](std::unique_ptr<ExecutorFactory> factory) {
    return ChosenExecutor{std::move(factory), loaded.lowering_report, tokens};
  };
  if (allow_gpu && spec.device != DeviceKind::kCpu) {
    std::string reason;
    if (GpuAvailable(&reason)) {
      auto gpu = CreateGpuExecutorFactory(loaded.plan, spec, tokens);
      if (gpu.ok()) return chosen(std::move(gpu).value());
      if (spec.device == DeviceKind::kGpu) return gpu.status();
      spdlog::warn("model '{}': GPU executor unavailable ({}); using the CPU", spec.name,
                   gpu.status().ToString());
    } else if (spec.device == DeviceKind::kGpu) {
      return Unavailable("instance_group asks for KIND_GPU but no GPU is usable: " + reason);
    } else {
      spdlog::info("model '{}': no GPU ({}); using the CPU executor", spec.name, reason);
    }
  }
  LTSERVE_ASSIGN_OR_RETURN(auto cpu, CreateCpuExecutorFactory(loaded.plan, spec, tokens));
  return chosen(std::move(cpu));
}

// Each output's label_filename, read once at load: a request must not touch the disk. A file
// that cannot be read makes the model UNAVAILABLE with its reason, as Triton does.
Result<std::vector<std::vector<std::string>>> LoadOutputLabels(
    const inference::ModelConfig& config, const std::filesystem::path& model_dir) {
  std::vector<std::vector<std::string>> labels(static_cast<std::size_t>(config.output_size()));
  for (int i = 0; i < config.output_size(); ++i) {
    const std::string& file_name = config.output(i).label_filename();
    if (file_name.empty()) continue;
    const std::filesystem::path path(file_name);
    if (path.has_parent_path() || path.is_absolute() || file_name == "." || file_name == "..") {
      return InvalidArgument("output '" + config.output(i).name() + "': label_filename '" +
                             file_name + "' is not a plain file name; name a file in the model "
                             "directory, without '/'");
    }
    std::ifstream in(model_dir / path);
    if (!in) {
      return NotFound("output '" + config.output(i).name() + "': label_filename '" +
                      (model_dir / path).string() + "' cannot be read");
    }
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files
      labels[static_cast<std::size_t>(i)].push_back(std::move(line));
    }
  }
  return labels;
}

// The model directory as the poll compares it: every file's relative path, size and
// modification time. Any change (a new version, a replaced model.pt, an edited config) reloads.
std::string Fingerprint(const std::filesystem::path& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code stat_ec;
    if (!it->is_regular_file(stat_ec)) continue;
    const auto size = it->file_size(stat_ec);
    const auto mtime = it->last_write_time(stat_ec).time_since_epoch().count();
    files.push_back(std::filesystem::relative(it->path(), dir, stat_ec).string() + ":" +
                    std::to_string(size) + ":" + std::to_string(mtime));
  }
  std::sort(files.begin(), files.end());
  std::string out;
  for (const std::string& file : files) out += file + "\n";
  return out;
}

// A model_version as clients send it: a positive decimal number.
std::optional<std::int64_t> ParseVersion(const std::string& text) {
  std::int64_t version = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), version);
  if (ec != std::errc() || end != text.data() + text.size() || version <= 0) return std::nullopt;
  return version;
}

constexpr const char* kUnloadedReason = "unloaded";

}  // namespace


const char* VersionStateName(VersionState state) {
  switch (state) {
    case VersionState::kLoading: return "LOADING";
    case VersionState::kReady: return "READY";
    case VersionState::kUnavailable: return "UNAVAILABLE";
  }
  return "UNAVAILABLE";
}

Model::Model(ModelSpec spec, inference::ModelConfig config, ExecutionPath path,
             std::string description, std::unique_ptr<StatsObserver> observer)
    : spec_(std::move(spec)),
      config_(std::move(config)),
      path_(path),
      description_(std::move(description)),
      observer_(std::move(observer)),
      stats_(observer_.get()) {}

Model::~Model() {
  scheduler_.reset();  // joins the workers before the factory they use goes away
}

// The last reference to a retired Model may drop anywhere: in a completion callback on one of
// its own scheduler's workers (which its destructor joins) or on a gRPC thread. Every Model's
// deleter hands it here instead, and one thread destroys it.
class ModelRepository::Reaper {
 public:
  Reaper() : thread_([this] { Run(); }) {}
  ~Reaper() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_one();
    thread_.join();
  }

  std::shared_ptr<Model> Adopt(std::unique_ptr<Model> model) {
    live_.fetch_add(1);
    return std::shared_ptr<Model>(model.release(), [this](Model* retired) { Retire(retired); });
  }
  std::size_t live() const { return live_.load(); }

 private:
  void Retire(Model* model) {
    {
      std::lock_guard lock(mutex_);
      queue_.emplace_back(model);
    }
    changed_.notify_one();
  }

  void Run() {
    std::unique_lock lock(mutex_);
    while (true) {
      changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      std::unique_ptr<Model> model = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      const std::string name = model->spec().name + " version " + model->version_string();
      model.reset();
      live_.fetch_sub(1);
      spdlog::debug("model '{}' released", name);
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Model>> queue_;
  bool stopping_ = false;
  std::atomic<std::size_t> live_{0};
  std::thread thread_;
};

ModelRepository::ModelRepository(RepositoryOptions options, Metrics* metrics)
    : options_(std::move(options)), metrics_(metrics), reaper_(std::make_unique<Reaper>()) {}

Result<std::unique_ptr<ModelRepository>> ModelRepository::Create(const RepositoryOptions& options,
                                                                 Metrics* metrics) {
  LTSERVE_ASSIGN_OR_RETURN(std::vector<std::string> names, config::ListModelNames(options.repository));
  std::unique_ptr<ModelRepository> repo(new ModelRepository(options, metrics));
  std::vector<std::string> to_load;
  if (options.control_mode == ModelControlMode::kExplicit) {
    const auto& wanted = options.startup_models;
    const bool all = std::find(wanted.begin(), wanted.end(), "*") != wanted.end();
    for (const std::string& name : wanted) {
      if (name != "*" && std::find(names.begin(), names.end(), name) == names.end()) {
        return NotFound("--load-model '" + name + "': no model directory '" + name + "' in " +
                        options.repository.string());
      }
    }
    for (const std::string& name : names) {
      if (all || std::find(wanted.begin(), wanted.end(), name) != wanted.end()) {
        to_load.push_back(name);
      }
    }
  } else {
    to_load = names;
  }
  for (const std::string& name : names) repo->records_[name];  // listed in the index
  {
    std::lock_guard control(repo->control_mutex_);
    for (const std::string& name : to_load) {
      // A broken model is reported in its record; the others still load.
      (void)repo->LoadLocked(name, nullptr);
    }
  }
  repo->control_thread_ = std::thread([r = repo.get()] { r->ControlLoop(); });
  return repo;
}

ModelRepository::~ModelRepository() {
  {
    std::lock_guard lock(mutex_);
    draining_ = true;
  }
  {
    std::lock_guard lock(queue_mutex_);
    stopping_ = true;
  }
  queue_changed_.notify_one();
  if (control_thread_.joinable()) control_thread_.join();
  std::lock_guard lock(mutex_);
  records_.clear();  // the Reaper destroys the models when it is destroyed, after this
}

Result<std::shared_ptr<Model>> ModelRepository::LoadVersion(const ModelSpec& spec,
                                                            const inference::ModelConfig& config,
                                                            const std::filesystem::path& dir) {
  const std::string version = std::to_string(spec.version);
  const auto start = std::chrono::steady_clock::now();
  LTSERVE_ASSIGN_OR_RETURN(auto labels, LoadOutputLabels(config, dir));
  LTSERVE_ASSIGN_OR_RETURN(ChosenExecutor chosen, ChooseExecutor(spec, options_.allow_gpu));
  std::unique_ptr<StatsObserver> observer;
  if (metrics_ != nullptr) observer = metrics_->CreateModelObserver(spec.name, version);
  const ExecutionPath path = chosen.factory->path();
  auto model = std::make_unique<Model>(spec, config, path, chosen.factory->Describe(),
                                       std::move(observer));
  std::vector<std::unique_ptr<ExecutorInstance>> instances;
  for (int i = 0; i < std::max(1, spec.instance_count); ++i) {
    LTSERVE_ASSIGN_OR_RETURN(auto instance, chosen.factory->CreateInstance(i));
    instances.push_back(std::move(instance));
  }
  // Plans take their output shapes from the config; a TorchScript forward answers whatever
  // it computes.
  if (path == ExecutionPath::kTorchScript) {
    LTSERVE_RETURN_IF_ERROR(WarmUpOutputShapes(*instances.front(), spec));
  }
  // Device copies are per row of a batch (BatchLayout::kRows): batched models only.
  if (spec.max_batch_size > 0 && !chosen.tokens) {
    model->direct_device_memory_ = chosen.factory->DirectDeviceMemory();
  }
  SchedulerOptions scheduler_options = MakeSchedulerOptions(spec, config);
  // A polling worker is the warmer thread to run a lone request on than the one that received it.
  scheduler_options.worker_poll_us = spec.options.worker_poll_us;
  scheduler_options.run_on_caller_when_idle = spec.options.run_on_receiving_thread &&
                                              spec.options.worker_poll_us == 0 &&
                                              chosen.factory->RunsOnAnyThread();
  model->factory_ = std::move(chosen.factory);
  model->output_labels_ = std::move(labels);
  scheduler_options.tokens = std::move(chosen.tokens);
  LTSERVE_ASSIGN_OR_RETURN(model->scheduler_,
                           Scheduler::Create(std::move(scheduler_options), std::move(instances),
                                             &model->stats_));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("model '{}' version {} ready: path {} ({}), {} instance(s), loaded in {:.1f} ms",
               spec.name, spec.version, ExecutionPathName(path), model->description(),
               std::max(1, spec.instance_count), seconds * 1e3);
  if (metrics_ != nullptr) {
    metrics_->SetModelLoad(spec.name, version, ExecutionPathName(path), seconds);
  }
  return reaper_->Adopt(std::move(model));
}

Status ModelRepository::RequireExplicit() const {
  if (options_.control_mode != ModelControlMode::kExplicit) {
    // Triton's answer, word for word, in both none and poll mode.
    return Unavailable("explicit model load / unload is not allowed if polling is enabled");
  }
  return Status::Ok();
}

Status ModelRepository::Load(const std::string& name,
                             const inference::ModelConfig* config_override) {
  LTSERVE_RETURN_IF_ERROR(RequireExplicit());
  std::lock_guard control(control_mutex_);
  return LoadLocked(name, config_override);
}

Status ModelRepository::Unload(const std::string& name) {
  LTSERVE_RETURN_IF_ERROR(RequireExplicit());
  std::lock_guard control(control_mutex_);
  return UnloadLocked(name, /*forget=*/false);
}

Status ModelRepository::LoadLocked(const std::string& name,
                                   const inference::ModelConfig* config_override) {
  {
    std::lock_guard lock(mutex_);
    if (draining_) return Unavailable("server is shutting down; model '" + name + "' not loaded");
  }
  LTSERVE_ASSIGN_OR_RETURN(config::RepositoryEntry entry,
                           config::ScanModel(options_.repository, name, config_override));
  for (const std::string& warning : entry.warnings) spdlog::warn("model '{}': {}", name, warning);
  const std::string fingerprint = Fingerprint(entry.dir);
  if (!entry.spec.ok()) {
    const std::string reason = entry.spec.status().message();
    spdlog::error("model '{}' not loaded: {}", name, reason);
    bool serving = false;
    {
      std::lock_guard lock(mutex_);
      ModelRecord& record = records_[name];
      record.requested = true;
      record.fingerprint = fingerprint;
      for (const auto& [version, slot] : record.versions) serving |= slot.model != nullptr;
      // A model that still serves keeps serving its old versions, as in Triton.
      if (!serving) record.model_error = reason;
    }
    Notify();
    return Status(entry.spec.status().code(), "failed to load '" + name + "': " + reason);
  }
  const ModelSpec& spec = *entry.spec;
  {
    std::lock_guard lock(mutex_);
    ModelRecord& record = records_[name];
    for (const VersionFile& version : spec.versions) {
      VersionSlot& slot = record.versions[version.version];
      if (slot.model == nullptr) slot = VersionSlot{VersionState::kLoading, "", nullptr};
    }
  }
  Notify();

  // Loaded outside every lock but control_mutex_: requests keep finding the old versions.
  std::vector<std::pair<std::int64_t, Result<std::shared_ptr<Model>>>> loaded;
  for (const VersionFile& version : spec.versions) {
    ModelSpec version_spec = spec;
    version_spec.version = version.version;
    version_spec.model_file = version.model_file;
    loaded.emplace_back(version.version, LoadVersion(version_spec, entry.config, entry.dir));
  }

  Status first_error;
  std::vector<std::shared_ptr<Model>> retiring;  // released outside the lock
  std::vector<std::pair<std::string, bool>> readiness;
  {
    std::lock_guard lock(mutex_);
    ModelRecord& record = records_[name];
    record.requested = true;
    record.model_error.reset();
    record.fingerprint = fingerprint;
    for (auto& [version, result] : loaded) {
      VersionSlot& slot = record.versions[version];
      if (result.ok()) {
        if (slot.model != nullptr) retiring.push_back(std::move(slot.model));
        slot = VersionSlot{VersionState::kReady, "", std::move(result).value()};
        readiness.emplace_back(std::to_string(version), true);
        continue;
      }
      spdlog::error("model '{}' version {} not loaded: {}", name, version,
                    result.status().ToString());
      if (first_error.ok()) {
        first_error = Status(result.status().code(), "failed to load '" + name + "' version " +
                                                         std::to_string(version) + ": " +
                                                         result.status().message());
      }
      // A version that served keeps serving the old model.
      if (slot.model == nullptr) {
        slot = VersionSlot{VersionState::kUnavailable, result.status().message(), nullptr};
        readiness.emplace_back(std::to_string(version), false);
      }
    }
    // Versions the policy no longer names stop serving.
    for (auto& [version, slot] : record.versions) {
      const bool named = std::any_of(spec.versions.begin(), spec.versions.end(),
                                     [&](const VersionFile& v) { return v.version == version; });
      if (named || slot.state == VersionState::kUnavailable) continue;
      if (slot.model != nullptr) retiring.push_back(std::move(slot.model));
      slot = VersionSlot{VersionState::kUnavailable, kUnloadedReason, nullptr};
      readiness.emplace_back(std::to_string(version), false);
    }
    RememberRetired(retiring);
  }
  if (metrics_ != nullptr) {
    for (const auto& [version, ready] : readiness) metrics_->SetModelReady(name, version, ready);
  }
  retiring.clear();
  Notify();
  return first_error;
}

Status ModelRepository::UnloadLocked(const std::string& name, bool forget) {
  std::vector<std::shared_ptr<Model>> retiring;
  std::vector<std::string> versions;
  {
    std::lock_guard lock(mutex_);
    auto it = records_.find(name);
    if (it == records_.end()) {
      return NotFound("cannot unload unknown model '" + name + "': the model repository has no "
                      "directory of that name");
    }
    ModelRecord& record = it->second;
    record.requested = false;
    record.model_error.reset();
    for (auto& [version, slot] : record.versions) {
      if (slot.model != nullptr) retiring.push_back(std::move(slot.model));
      if (slot.state != VersionState::kUnavailable || slot.reason != kUnloadedReason) {
        versions.push_back(std::to_string(version));
      }
      slot = VersionSlot{VersionState::kUnavailable, kUnloadedReason, nullptr};
    }
    RememberRetired(retiring);
    if (forget) records_.erase(it);
  }
  if (metrics_ != nullptr) {
    for (const std::string& version : versions) metrics_->SetModelReady(name, version, false);
  }
  if (!retiring.empty()) {
    spdlog::info("model '{}' unloaded; {} version(s) finish their accepted requests", name,
                 retiring.size());
  }
  retiring.clear();  // the Reaper destroys each once its last request is answered
  Notify();
  return Status::Ok();
}

void ModelRepository::LoadAsync(const std::string& name,
                                std::optional<inference::ModelConfig> config_override,
                                std::function<void(const Status&)> done) {
  if (Status allowed = RequireExplicit(); !allowed.ok()) {
    done(allowed);
    return;
  }
  Enqueue([this, name, config = std::move(config_override), done = std::move(done)] {
    done(Load(name, config.has_value() ? &*config : nullptr));
  });
}

void ModelRepository::UnloadAsync(const std::string& name,
                                  std::function<void(const Status&)> done) {
  if (Status allowed = RequireExplicit(); !allowed.ok()) {
    done(allowed);
    return;
  }
  Enqueue([this, name, done = std::move(done)] { done(Unload(name)); });
}

void ModelRepository::Enqueue(std::function<void()> task) {
  {
    std::lock_guard lock(queue_mutex_);
    tasks_.push_back(std::move(task));
  }
  queue_changed_.notify_one();
}

void ModelRepository::ControlLoop() {
  auto next_poll = std::chrono::steady_clock::now() + options_.poll_interval;
  std::unique_lock lock(queue_mutex_);
  while (true) {
    const bool polling = options_.control_mode == ModelControlMode::kPoll;
    auto has_work = [this] { return stopping_ || !tasks_.empty(); };
    if (polling) {
      queue_changed_.wait_until(lock, next_poll, has_work);
    } else {
      queue_changed_.wait(lock, has_work);
    }
    // Queued requests are still answered when stopping (quickly: loads are refused by then),
    // so that no gRPC call waits for an answer that never comes.
    if (stopping_ && tasks_.empty()) return;
    if (!tasks_.empty()) {
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
      continue;
    }
    if (polling && std::chrono::steady_clock::now() >= next_poll) {
      lock.unlock();
      Poll();
      next_poll = std::chrono::steady_clock::now() + options_.poll_interval;
      lock.lock();
    }
  }
}

void ModelRepository::Poll() {
  std::lock_guard control(control_mutex_);
  {
    std::lock_guard lock(mutex_);
    if (draining_) return;
  }
  auto names = config::ListModelNames(options_.repository);
  if (!names.ok()) {
    spdlog::warn("repository poll: {}", names.status().ToString());
    return;
  }
  std::vector<std::string> gone;
  std::vector<std::string> changed;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [name, record] : records_) {
      if (std::find(names->begin(), names->end(), name) == names->end()) gone.push_back(name);
    }
  }
  for (const std::string& name : *names) {
    const std::string fingerprint = Fingerprint(options_.repository / name);
    std::lock_guard lock(mutex_);
    auto it = records_.find(name);
    if (it == records_.end() || it->second.fingerprint != fingerprint) changed.push_back(name);
  }
  for (const std::string& name : gone) {
    spdlog::info("repository poll: model '{}' was removed; unloading it", name);
    (void)UnloadLocked(name, /*forget=*/true);
  }
  for (const std::string& name : changed) {
    spdlog::info("repository poll: model '{}' is new or changed; loading it", name);
    (void)LoadLocked(name, nullptr);  // a failure is in the model's state and the log
  }
}

void ModelRepository::RememberRetired(const std::vector<std::shared_ptr<Model>>& retiring) {
  std::erase_if(retired_, [](const std::weak_ptr<Model>& model) { return model.expired(); });
  for (const auto& model : retiring) retired_.push_back(model);
}

void ModelRepository::Notify() const {
  if (options_.on_change) options_.on_change();
}

std::size_t ModelRepository::LiveModelCount() const { return reaper_->live(); }

Result<std::shared_ptr<Model>> ModelRepository::Find(const std::string& name,
                                                     const std::string& version) const {
  std::lock_guard lock(mutex_);
  auto it = records_.find(name);
  if (it == records_.end()) {
    std::string known;
    for (const auto& [model_name, record] : records_) {
      known += known.empty() ? "" : ", ";
      known += "'" + model_name + "'";
    }
    return NotFound("unknown model '" + name + "'; this server serves " +
                    (known.empty() ? std::string("no models") : known));
  }
  const ModelRecord& record = it->second;
  if (version.empty()) {
    for (auto v = record.versions.rbegin(); v != record.versions.rend(); ++v) {
      if (v->second.model != nullptr) return v->second.model;
    }
    std::string reason = record.model_error.value_or("");
    if (reason.empty() && !record.versions.empty()) reason = record.versions.rbegin()->second.reason;
    if (reason.empty()) reason = record.versions.empty() ? "not loaded" : "still loading";
    return Unavailable("model '" + name + "' is not ready: " + reason);
  }
  const std::optional<std::int64_t> number = ParseVersion(version);
  if (!number.has_value()) {
    return InvalidArgument("model_version '" + version +
                           "' is not a version: versions are positive integers, or empty for "
                           "the latest");
  }
  auto slot = record.versions.find(*number);
  // Triton's messages.
  if (slot == record.versions.end()) {
    return NotFound("Request for unknown model: '" + name + "' version " + version +
                    " is not found");
  }
  if (slot->second.model == nullptr) {
    return Unavailable("Request for unknown model: '" + name + "' version " + version +
                       " is not at ready state");
  }
  return slot->second.model;
}

std::vector<std::shared_ptr<Model>> ModelRepository::Models() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<Model>> out;
  for (const auto& [name, record] : records_) {
    for (const auto& [version, slot] : record.versions) {
      if (slot.model != nullptr) out.push_back(slot.model);
    }
  }
  return out;
}

std::vector<std::string> ModelRepository::ReadyVersions(const std::string& name) const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  auto it = records_.find(name);
  if (it == records_.end()) return out;
  for (const auto& [version, slot] : it->second.versions) {
    if (slot.model != nullptr) out.push_back(std::to_string(version));
  }
  return out;
}

std::vector<ModelState> ModelRepository::States() const {
  std::lock_guard lock(mutex_);
  std::vector<ModelState> out;
  for (const auto& [name, record] : records_) {
    if (record.model_error.has_value()) {
      out.push_back({name, "", VersionState::kUnavailable, *record.model_error});
    }
    for (const auto& [version, slot] : record.versions) {
      out.push_back({name, std::to_string(version), slot.state, slot.reason});
    }
    if (!record.model_error.has_value() && record.versions.empty()) {
      out.push_back({name, "", std::nullopt, ""});
    }
  }
  return out;
}

bool ModelRepository::AllReady() const {
  std::lock_guard lock(mutex_);
  bool any_requested = false;
  for (const auto& [name, record] : records_) {
    if (!record.requested) continue;
    any_requested = true;
    if (record.model_error.has_value() || record.versions.empty()) return false;
    for (const auto& [version, slot] : record.versions) {
      if (slot.state != VersionState::kReady && slot.reason != kUnloadedReason) return false;
    }
  }
  return any_requested || options_.control_mode == ModelControlMode::kExplicit;
}

bool ModelRepository::AnyReady() const {
  std::lock_guard lock(mutex_);
  for (const auto& [name, record] : records_) {
    for (const auto& [version, slot] : record.versions) {
      if (slot.model != nullptr) return true;
    }
  }
  return false;
}

bool ModelRepository::Drain(std::chrono::steady_clock::time_point deadline) {
  std::vector<std::shared_ptr<Model>> models;
  {
    std::lock_guard lock(mutex_);
    draining_ = true;
    for (const auto& [name, record] : records_) {
      for (const auto& [version, slot] : record.versions) {
        if (slot.model != nullptr) models.push_back(slot.model);
      }
    }
    for (const auto& retired : retired_) {
      if (auto model = retired.lock()) models.push_back(std::move(model));
    }
  }
  bool all = true;
  for (const auto& model : models) all = model->scheduler().Drain(deadline) && all;
  return all;
}

}  // namespace ltserve
