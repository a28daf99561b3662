#include "repository/model_repository.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <fstream>

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

}  // namespace

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

Result<std::unique_ptr<ModelRepository>> ModelRepository::Create(const RepositoryOptions& options,
                                                                 Metrics* metrics) {
  LTSERVE_ASSIGN_OR_RETURN(auto entries, config::ScanRepository(options.repository));
  std::unique_ptr<ModelRepository> repo(new ModelRepository());
  for (auto& entry : entries) {
    for (const std::string& warning : entry.warnings) {
      spdlog::warn("model '{}': {}", entry.name, warning);
    }
    ModelState state{entry.name, "", false, ""};
    if (!entry.spec.ok()) {
      state.reason = entry.spec.status().message();
      spdlog::error("model '{}' not loaded: {}", entry.name, state.reason);
      repo->states_.push_back(std::move(state));
      continue;
    }
    ModelSpec spec = std::move(entry.spec).value();
    state.version = std::to_string(spec.version);
    const auto start = std::chrono::steady_clock::now();
    Status status = [&]() -> Status {
      LTSERVE_ASSIGN_OR_RETURN(auto labels, LoadOutputLabels(entry.config, entry.dir));
      LTSERVE_ASSIGN_OR_RETURN(ChosenExecutor chosen, ChooseExecutor(spec, options.allow_gpu));
      std::unique_ptr<StatsObserver> observer;
      if (metrics != nullptr) observer = metrics->CreateModelObserver(spec.name, state.version);
      const ExecutionPath path = chosen.factory->path();
      auto model = std::make_shared<Model>(spec, entry.config, path,
                                           chosen.factory->Describe(), std::move(observer));
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
      model->factory_ = std::move(chosen.factory);
      model->output_labels_ = std::move(labels);
      SchedulerOptions scheduler_options = MakeSchedulerOptions(spec, entry.config);
      scheduler_options.tokens = std::move(chosen.tokens);
      LTSERVE_ASSIGN_OR_RETURN(model->scheduler_,
                               Scheduler::Create(std::move(scheduler_options),
                                                 std::move(instances), &model->stats_));
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      spdlog::info("model '{}' version {} ready: path {} ({}), {} instance(s), loaded in {:.1f} ms",
                   spec.name, spec.version, ExecutionPathName(path), model->description(),
                   std::max(1, spec.instance_count), seconds * 1e3);
      if (metrics != nullptr) {
        metrics->SetModelLoad(spec.name, state.version, ExecutionPathName(path), seconds);
        metrics->SetModelReady(spec.name, state.version, true);
      }
      repo->models_.push_back(std::move(model));
      return Status::Ok();
    }();
    if (!status.ok()) {
      state.reason = status.message();
      spdlog::error("model '{}' version {} not loaded: {}", spec.name, spec.version,
                    status.ToString());
      if (metrics != nullptr) metrics->SetModelReady(spec.name, state.version, false);
    } else {
      state.ready = true;
    }
    repo->states_.push_back(std::move(state));
  }
  return repo;
}

ModelRepository::~ModelRepository() = default;

Result<std::shared_ptr<Model>> ModelRepository::Find(const std::string& name,
                                                     const std::string& version) const {
  for (const auto& model : models_) {
    if (model->spec().name != name) continue;
    if (!version.empty() && version != model->version_string()) {
      return NotFound("model '" + name + "' has no version '" + version + "' (serving version " +
                      model->version_string() + ")");
    }
    return model;
  }
  for (const ModelState& state : states_) {
    if (state.name == name) {
      return Unavailable("model '" + name + "' is not ready: " + state.reason);
    }
  }
  std::string known;
  for (const auto& model : models_) {
    known += known.empty() ? "" : ", ";
    known += "'" + model->spec().name + "'";
  }
  return NotFound("unknown model '" + name + "'; this server serves " +
                  (known.empty() ? std::string("no models") : known));
}

bool ModelRepository::AllReady() const {
  return !states_.empty() &&
         std::all_of(states_.begin(), states_.end(), [](const ModelState& s) { return s.ready; });
}

bool ModelRepository::AnyReady() const { return !models_.empty(); }

bool ModelRepository::Drain(std::chrono::steady_clock::time_point deadline) {
  bool all = true;
  for (const auto& model : models_) all = model->scheduler().Drain(deadline) && all;
  return all;
}

}  // namespace ltserve
