// `parameters`: ltserve's keys parsed into ModelOptions (model/model_options.h), each with its
// rule, default and message in one table; Triton's PyTorch-backend keys accepted and ignored so
// that Triton repositories load unchanged. The string map ends here: nothing outside
// server/config reads a parameter by name.
#include <string_view>
#include <type_traits>
#include <vector>
#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <map>
#include <functional>
#include <optional>

#include "config/parameters.h"

namespace ltserve::config::internal {
namespace {

std::optional<std::int64_t> ParseInteger(std::string_view value, std::int64_t min_value) {
  std::int64_t parsed = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (ec != std::errc() || end != value.data() + value.size() || parsed < min_value) {
    return std::nullopt;
  }
  return parsed;
}

// A key's rule: parses `value` into `options`, or returns false (then `expected` says why).
struct KnownParameter {
  std::string_view key;
  std::string_view expected;  // for the error message
  std::function<bool(std::string_view value, const std::filesystem::path& model_dir,
                     ModelOptions* options)>
      apply;
};

// A parameter spelled as one of a fixed set of words.
template <typename T>
KnownParameter Choice(std::string_view key, std::string_view expected,
                      std::vector<std::pair<std::string_view, T>> choices, T ModelOptions::*field) {
  return {key, expected,
          [choices = std::move(choices), field](std::string_view value, const std::filesystem::path&,
                                                ModelOptions* options) {
            for (const auto& [spelling, choice] : choices) {
              if (value == spelling) {
                options->*field = choice;
                return true;
              }
            }
            return false;
          }};
}

KnownParameter Boolean(std::string_view key, bool ModelOptions::*field) {
  return Choice<bool>(key, "true or false", {{"true", true}, {"false", false}}, field);
}

// An integer >= min_value, stored as T (int, std::size_t or std::optional<std::int64_t>).
template <typename T>
KnownParameter Integer(std::string_view key, std::string_view expected, std::int64_t min_value,
                       T ModelOptions::*field) {
  return {key, expected,
          [min_value, field](std::string_view value, const std::filesystem::path&,
                             ModelOptions* options) {
            std::optional<std::int64_t> parsed = ParseInteger(value, min_value);
            if (!parsed) return false;
            if constexpr (std::is_same_v<T, std::optional<std::int64_t>>) {
              options->*field = *parsed;
            } else {
              if (static_cast<std::uint64_t>(*parsed) >
                  static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
                return false;
              }
              options->*field = static_cast<T>(*parsed);
            }
            return true;
          }};
}

// Triton's thread-count keys: an integer, where 0 or less leaves the pool as it is (Triton
// applies only counts above 0), capped so that a typo cannot ask for millions of threads.
constexpr std::int64_t kMostThreads = 4096;
KnownParameter ThreadCount(std::string_view key, std::optional<int> ModelOptions::*field) {
  return {key, "an integer (above 0: that many threads, at most 4096; 0 or less: not set)",
          [field](std::string_view value, const std::filesystem::path&, ModelOptions* options) {
            std::optional<std::int64_t> parsed =
                ParseInteger(value, std::numeric_limits<std::int64_t>::min());
            if (!parsed || *parsed > kMostThreads) return false;
            options->*field = *parsed > 0 ? std::optional<int>(static_cast<int>(*parsed))
                                          : std::nullopt;
            return true;
          }};
}

const std::vector<KnownParameter>& Known() {
  static const std::vector<KnownParameter> known{
      Choice<Precision>("precision", "bf16, fp16, fp32 or tf32",
                        {{"bf16", Precision::kBf16}, {"fp16", Precision::kFp16},
                         {"fp32", Precision::kFp32}, {"tf32", Precision::kTf32}},
                        &ModelOptions::precision),
      // Checked here, applied by ResolveGelu.
      {"gelu_epilogue", "auto, tanh or exact",
       [](std::string_view v, const std::filesystem::path&, ModelOptions*) {
         return v == "auto" || v == "tanh" || v == "exact";
       }},
      Integer<int>("algo_candidates", "an integer > 0", 1, &ModelOptions::algo_candidates),
      Choice<GemmSearch>("gemm_search", "heuristic or wide",
                         {{"heuristic", GemmSearch::kHeuristic}, {"wide", GemmSearch::kWide}},
                         &ModelOptions::gemm_search),
      Boolean("fuse_epilogues", &ModelOptions::fuse_epilogues),
      Choice<OwnKernelMode>("small_batch_kernel", "auto, always or off",
                            {{"auto", OwnKernelMode::kAuto},
                             {"always", OwnKernelMode::kAlways},
                             {"off", OwnKernelMode::kOff}},
                            &ModelOptions::small_batch),
      Choice<OwnKernelMode>("skinny_gemm_kernel", "auto, always or off",
                            {{"auto", OwnKernelMode::kAuto},
                             {"always", OwnKernelMode::kAlways},
                             {"off", OwnKernelMode::kOff}},
                            &ModelOptions::skinny_gemm),
      Choice<OwnKernelMode>("staged_gemm_kernel", "auto, always or off",
                            {{"auto", OwnKernelMode::kAuto},
                             {"always", OwnKernelMode::kAlways},
                             {"off", OwnKernelMode::kOff}},
                            &ModelOptions::staged_gemm),
      Choice<OwnKernelMode>("cutlass_gemm_kernel", "auto, always or off",
                            {{"auto", OwnKernelMode::kAuto},
                             {"always", OwnKernelMode::kAlways},
                             {"off", OwnKernelMode::kOff}},
                            &ModelOptions::cutlass_gemm),
      Choice<OwnKernelMode>("layer_chain_kernel", "auto, always or off",
                            {{"auto", OwnKernelMode::kAuto},
                             {"always", OwnKernelMode::kAlways},
                             {"off", OwnKernelMode::kOff}},
                            &ModelOptions::layer_chain),
      Choice<OwnKernelMode>("gemm_layernorm_kernel", "auto, always or off",
                            {{"auto", OwnKernelMode::kAuto},
                             {"always", OwnKernelMode::kAlways},
                             {"off", OwnKernelMode::kOff}},
                            &ModelOptions::gemm_layernorm),
      Choice<OwnKernelMode>("streaming_layernorm_kernel", "auto, always or off",
                            {{"auto", OwnKernelMode::kAuto},
                             {"always", OwnKernelMode::kAlways},
                             {"off", OwnKernelMode::kOff}},
                            &ModelOptions::streaming_layernorm),
      Choice<OwnKernelMode>("two_stream_halves", "auto, always or off",
                            {{"auto", OwnKernelMode::kAuto},
                             {"always", OwnKernelMode::kAlways},
                             {"off", OwnKernelMode::kOff}},
                            &ModelOptions::two_stream_halves),
      Boolean("check_kernels_in_pass", &ModelOptions::check_kernels_in_pass),
      Integer<int>("gpu_device", "an integer >= 0", 0, &ModelOptions::gpu_device),
      Integer<std::size_t>("cublaslt_workspace_bytes", "an integer > 0", 1,
                           &ModelOptions::workspace_bytes),
      Boolean("consolidate_cublaslt_memsets", &ModelOptions::consolidate_cublaslt_memsets),
      Boolean("attention_last_sequence_first", &ModelOptions::attention_last_sequence_first),
      // Consumers see no model directory, so the cache file travels resolved.
      {"algo_cache_file", "a file path (relative to the model directory)",
       [](std::string_view v, const std::filesystem::path& model_dir, ModelOptions* options) {
         if (v.empty()) return false;
         options->algo_cache_file = (model_dir / v).lexically_normal().string();
         return true;
       }},
      Boolean("cuda_graphs", &ModelOptions::cuda_graphs),
      Choice<ProgrammaticLaunch>("programmatic_launch", "true, false or auto",
                                 {{"true", ProgrammaticLaunch::kOn},
                                  {"false", ProgrammaticLaunch::kOff},
                                  {"auto", ProgrammaticLaunch::kAuto}},
                                 &ModelOptions::programmatic_launch),
      Boolean("copies_in_graph", &ModelOptions::copies_in_graph),
      Boolean("run_on_receiving_thread", &ModelOptions::run_on_receiving_thread),
      // The text names kMaxWorkerPollUs (static_assert below).
      {"worker_poll_microseconds", "an integer from 0 to 1000000",
       [](std::string_view v, const std::filesystem::path&, ModelOptions* options) {
         const std::optional<std::int64_t> parsed = ParseInteger(v, 0);
         if (!parsed || static_cast<std::uint64_t>(*parsed) > kMaxWorkerPollUs) return false;
         options->worker_poll_us = static_cast<std::uint64_t>(*parsed);
         return true;
       }},
      Choice<PathChoice>("execution_path", "auto, plan or torchscript",
                         {{"auto", PathChoice::kAuto}, {"plan", PathChoice::kPlan},
                          {"torchscript", PathChoice::kTorchScript}},
                         &ModelOptions::execution_path),
      Integer<std::optional<std::int64_t>>("max_sequence_length", "an integer > 0", 1,
                                           &ModelOptions::max_sequence_length),
      Integer<std::optional<std::int64_t>>("max_tokens_per_batch", "an integer > 0", 1,
                                           &ModelOptions::max_tokens_per_batch),
      ThreadCount("INTRA_OP_THREAD_COUNT", &ModelOptions::intra_op_threads),
      ThreadCount("INTER_OP_THREAD_COUNT", &ModelOptions::inter_op_threads),
  };
  return known;
}

// Triton's PyTorch backend settings that do not apply to ltserve's execution paths (the thread
// counts do, and are in Known()).
constexpr std::array<std::string_view, 10> kTritonPytorch{
    "INFERENCE_MODE",        "DISABLE_OPTIMIZED_EXECUTION", "ENABLE_NVFUSER",
    "ENABLE_WEIGHT_SHARING", "ENABLE_CACHE_CLEANING",       "ENABLE_JIT_EXECUTOR",
    "ENABLE_JIT_PROFILING",  "ENABLE_TENSOR_FUSER",         "DISABLE_CUDNN",
    "NUM_THREADS",
};

static_assert(kMaxWorkerPollUs == 1000000, "worker_poll_microseconds' expected text names it");

const KnownParameter* FindKnown(std::string_view key) {
  for (const auto& known : Known()) {
    if (known.key == key) return &known;
  }
  return nullptr;
}

std::string KnownKeys() {
  std::string keys;
  for (const auto& known : Known()) {
    if (!keys.empty()) keys += ", ";
    keys += known.key;
  }
  return keys;
}

GeluMode ResolveGelu(std::string_view choice, Precision precision) {
  if (choice == "tanh") return GeluMode::kTanhEpilogue;
  if (choice == "exact") return GeluMode::kExact;
  const bool half = precision == Precision::kBf16 || precision == Precision::kFp16;
  return half ? GeluMode::kTanhEpilogue : GeluMode::kExact;
}

}  // namespace

ParameterOutcome ParameterParser::Apply(const std::string& key, const std::string& value) {
  if (std::find(kTritonPytorch.begin(), kTritonPytorch.end(), key) != kTritonPytorch.end()) {
    return {ParameterOutcome::kIgnored,
            "parameter '" + key + "' is a Triton PyTorch-backend setting; ltserve ignores it"};
  }
  const KnownParameter* known = FindKnown(key);
  if (known == nullptr) {
    return {ParameterOutcome::kUnknown,
            "unknown parameter; ltserve knows " + KnownKeys() +
                " (see docs/model_repository.md); remove it or fix its name"};
  }
  if (!known->apply(value, model_dir_, &options_)) {
    return {ParameterOutcome::kInvalid,
            "'" + value + "' is not valid; expected " + std::string(known->expected)};
  }
  if (key == "gelu_epilogue") gelu_ = value;
  return {ParameterOutcome::kApplied, ""};
}

ModelOptions ParameterParser::Finish() && {
  options_.gelu = ResolveGelu(gelu_, options_.precision);
  return std::move(options_);
}

}  // namespace ltserve::config::internal

namespace ltserve::config {

Result<ModelOptions> ParseModelOptions(const std::map<std::string, std::string>& parameters,
                                       const std::filesystem::path& model_dir) {
  internal::ParameterParser parser(model_dir);
  for (const auto& [key, value] : parameters) {
    internal::ParameterOutcome outcome = parser.Apply(key, value);
    if (outcome.kind == internal::ParameterOutcome::kUnknown ||
        outcome.kind == internal::ParameterOutcome::kInvalid) {
      return InvalidArgument("parameter '" + key + "': " + outcome.message);
    }
  }
  return std::move(parser).Finish();
}

}  // namespace ltserve::config
