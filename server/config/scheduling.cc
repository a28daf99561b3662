// dynamic_batching and instance_group validation.
#include <climits>

#include "config/config_internal.h"

namespace ltserve::config::internal {
namespace {

std::string KindName(inference::ModelInstanceGroup::Kind kind) {
  return inference::ModelInstanceGroup::Kind_Name(kind);
}

DeviceKind ToDeviceKind(inference::ModelInstanceGroup::Kind kind) {
  switch (kind) {
    case inference::ModelInstanceGroup::KIND_GPU: return DeviceKind::kGpu;
    case inference::ModelInstanceGroup::KIND_CPU: return DeviceKind::kCpu;
    default: return DeviceKind::kAuto;
  }
}

Status ValidatePriorities(const inference::ModelDynamicBatching& batching,
                          const ConfigErrors& errors) {
  const std::uint64_t levels = batching.priority_levels();
  const std::string range = levels == 0 ? "priority_levels is 0 (priorities are off), so none is"
                                        : "[1, " + std::to_string(levels) + "] is";
  if (batching.default_priority_level() != 0 &&
      (levels == 0 || batching.default_priority_level() > levels)) {
    return errors.Invalid({{"dynamic_batching"}, {"default_priority_level"}},
                          std::to_string(batching.default_priority_level()) + " is out of range; " +
                              range + " valid (set priority_levels to enable priorities)");
  }
  if (levels > 0 && batching.default_priority_level() == 0) {
    return errors.Invalid({{"dynamic_batching"}, {"default_priority_level"}},
                          "is missing; with priority_levels " + std::to_string(levels) +
                              " give the level of requests that name none, in [1, " +
                              std::to_string(levels) + "]");
  }
  for (const auto& [key, policy] : batching.priority_queue_policy()) {
    if (key >= 1 && key <= levels) continue;
    return errors.Invalid(
        {{"dynamic_batching"}, {"priority_queue_policy", -1, std::to_string(key)}},
        "key " + std::to_string(key) + " is out of range; " + range + " valid");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateDynamicBatching(const inference::ModelConfig& config, const ConfigErrors& errors) {
  if (!config.has_dynamic_batching()) return Status::Ok();
  if (config.max_batch_size() == 0) {
    return errors.Invalid({{"dynamic_batching"}},
                          "needs max_batch_size > 0: a model without a batch dimension cannot "
                          "batch requests; set max_batch_size or remove dynamic_batching");
  }
  const auto& batching = config.dynamic_batching();
  for (int i = 0; i < batching.preferred_batch_size_size(); ++i) {
    const int size = batching.preferred_batch_size(i);
    if (size >= 1 && size <= config.max_batch_size()) continue;
    return errors.Invalid({{"dynamic_batching"}, {"preferred_batch_size", i}},
                          std::to_string(size) +
                              " is out of range; preferred batch sizes lie in [1, " +
                              std::to_string(config.max_batch_size()) + "] (max_batch_size)");
  }
  return ValidatePriorities(batching, errors);
}

Status ValidateInstanceGroups(const inference::ModelConfig& config, const ConfigErrors& errors,
                              ModelSpec* spec, std::vector<std::string>* warnings) {
  const auto& groups = config.instance_group();
  if (groups.empty()) return Status::Ok();  // one instance where the server decides
  std::int64_t total = 0;
  for (int i = 0; i < groups.size(); ++i) {
    const auto& group = groups[i];
    if (group.count() < 0) {
      return errors.Invalid(
          {{"instance_group", i}, {"count"}},
          std::to_string(group.count()) + " is negative; give the number of instances (>= 1)");
    }
    total += group.count() == 0 ? 1 : group.count();  // Triton reads 0 as 1
    if (group.kind() == inference::ModelInstanceGroup::KIND_MODEL) {
      return errors.Invalid({{"instance_group", i}, {"kind"}},
                            "KIND_MODEL is not supported; use KIND_GPU, KIND_CPU or KIND_AUTO");
    }
    if (group.kind() != groups[0].kind()) {
      return errors.Invalid({{"instance_group", i}, {"kind"}},
                            KindName(group.kind()) + " differs from instance_group[0]'s " +
                                KindName(groups[0].kind()) +
                                "; all instances of a model run on one kind of device, so give "
                                "every group the same kind");
    }
    if (group.gpus_size() > 0 && group.kind() == inference::ModelInstanceGroup::KIND_CPU) {
      return errors.Invalid({{"instance_group", i}, {"gpus"}},
                            "is set for a KIND_CPU group; remove gpus or use KIND_GPU");
    }
    for (int g = 0; g < group.gpus_size(); ++g) {
      if (group.gpus(g) < 0) {
        return errors.Invalid({{"instance_group", i}, {"gpus", g}},
                              std::to_string(group.gpus(g)) + " is not a GPU index (>= 0)");
      }
    }
    if (group.gpus_size() > 0) {
      warnings->push_back("instance_group[" + std::to_string(i) +
                          "].gpus is ignored: ltserve runs every instance on the first visible "
                          "GPU (choose it with CUDA_VISIBLE_DEVICES)");
    }
  }
  if (total > INT_MAX) {
    return errors.Invalid({{"instance_group"}}, "the counts add up to " + std::to_string(total) +
                                                    " instances; give a realistic count");
  }
  spec->instance_count = static_cast<int>(total);
  spec->device = ToDeviceKind(groups[0].kind());
  return Status::Ok();
}

}  // namespace ltserve::config::internal
