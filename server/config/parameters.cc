// `parameters`: ltserve's keys with their values checked; Triton's PyTorch-backend keys
// accepted and ignored so that Triton repositories load unchanged.
#include <algorithm>
#include <array>
#include <charconv>

#include "config/config_internal.h"

namespace ltserve::config::internal {
namespace {

bool OneOf(std::string_view value, std::initializer_list<std::string_view> allowed) {
  for (std::string_view a : allowed) {
    if (value == a) return true;
  }
  return false;
}

bool PositiveInteger(std::string_view value) {
  std::int64_t parsed = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  return ec == std::errc() && end == value.data() + value.size() && parsed > 0;
}

struct KnownParameter {
  std::string_view key;
  std::string_view expected;  // for the error message
  bool (*valid)(std::string_view value);
};

const std::array<KnownParameter, 12> kKnown{{
    {"precision", "bf16, fp16, fp32 or tf32",
     [](std::string_view v) {
       return OneOf(v, {"bf16", "fp16", "fp32", "tf32"});
     }},
    {"gelu_epilogue", "auto, tanh or exact",
     [](std::string_view v) {
       return OneOf(v, {"auto", "tanh", "exact"});
     }},
    {"algo_candidates", "an integer > 0", PositiveInteger},
    {"fuse_epilogues", "true or false",
     [](std::string_view v) {
       return OneOf(v, {"true", "false"});
     }},
    {"small_batch_kernel", "auto, always or off",
     [](std::string_view v) {
       return OneOf(v, {"auto", "always", "off"});
     }},
    {"gpu_device", "an integer >= 0",
     [](std::string_view v) {
       return v == "0" || PositiveInteger(v);
     }},
    {"cublaslt_workspace_bytes", "an integer > 0", PositiveInteger},
    {"algo_cache_file", "a file path (relative to the model directory)",
     [](std::string_view v) { return !v.empty(); }},
    {"cuda_graphs", "true or false",
     [](std::string_view v) {
       return OneOf(v, {"true", "false"});
     }},
    {"execution_path", "auto, plan or torchscript",
     [](std::string_view v) {
       return OneOf(v, {"auto", "plan", "torchscript"});
     }},
    {"max_sequence_length", "an integer > 0", PositiveInteger},
    {"max_tokens_per_batch", "an integer > 0", PositiveInteger},
}};

// Triton's PyTorch backend settings; ltserve has its own execution paths and ignores them.
constexpr std::array<std::string_view, 12> kTritonPytorch{
    "INFERENCE_MODE",        "DISABLE_OPTIMIZED_EXECUTION", "ENABLE_NVFUSER",
    "ENABLE_WEIGHT_SHARING", "ENABLE_CACHE_CLEANING",       "ENABLE_JIT_EXECUTOR",
    "ENABLE_JIT_PROFILING",  "ENABLE_TENSOR_FUSER",         "DISABLE_CUDNN",
    "NUM_THREADS",           "INTER_OP_THREAD_COUNT",       "INTRA_OP_THREAD_COUNT",
};

const KnownParameter* FindKnown(std::string_view key) {
  for (const auto& known : kKnown) {
    if (known.key == key) return &known;
  }
  return nullptr;
}

std::string KnownKeys() {
  std::string keys;
  for (const auto& known : kKnown) {
    if (!keys.empty()) keys += ", ";
    keys += known.key;
  }
  return keys;
}

}  // namespace

Status ValidateParameters(const inference::ModelConfig& config, const ConfigErrors& errors,
                          const std::filesystem::path& model_dir, ModelSpec* spec,
                          std::vector<std::string>* warnings) {
  for (const auto& [key, parameter] : config.parameters()) {
    const std::string& value = parameter.string_value();
    if (std::find(kTritonPytorch.begin(), kTritonPytorch.end(), key) != kTritonPytorch.end()) {
      warnings->push_back("parameter '" + key +
                          "' is a Triton PyTorch-backend setting; ltserve ignores it");
      continue;
    }
    const KnownParameter* known = FindKnown(key);
    if (known == nullptr) {
      return errors.Invalid({{"parameters", -1, key}},
                            "unknown parameter; ltserve knows " + KnownKeys() +
                                " (see docs/model_repository.md); remove it or fix its name");
    }
    if (!known->valid(value)) {
      return errors.Invalid(
          {{"parameters", -1, key}, {"value"}, {"string_value"}},
          "'" + value + "' is not valid; expected " + std::string(known->expected));
    }
    // Consumers see no model directory, so the cache file travels resolved.
    spec->parameters[key] =
        key == "algo_cache_file" ? (model_dir / value).lexically_normal().string() : value;
  }
  return Status::Ok();
}

}  // namespace ltserve::config::internal
