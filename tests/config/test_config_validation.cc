// Every rule BuildModelSpec enforces: the code, and a message that names the file, the field
// and, where the field is written, its line:column.
#include <gtest/gtest.h>

#include "config/model_config.h"
#include "config_test_util.h"

namespace ltserve::config {
namespace {

using testing::ExpectError;
using testing::LineColumnOf;
using testing::TempRepository;

// A valid config; each test replaces one part to break one rule.
struct ConfigText {
  std::string header = "platform: \"pytorch_libtorch\"\nmax_batch_size: 8\n";
  std::string inputs = "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n";
  std::string outputs = "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n";
  std::string extra;
  std::string str() const { return header + inputs + outputs + extra; }
};

class ConfigValidation : public ::testing::Test {
 protected:
  // Writes <repo>/m/config.pbtxt and <repo>/m/1/model.pt, parses and builds.
  Status Build(const ConfigText& config) {
    text_ = config.str();
    dir_ = repo_.WriteConfig("m", text_);
    repo_.WriteModelFile("m", "1");
    auto parsed = ParseModelConfigFile(dir_ / "config.pbtxt");
    if (!parsed.ok()) return parsed.status();
    auto spec = BuildModelSpec(*parsed, dir_);
    return spec.ok() ? Status::Ok() : spec.status();
  }
  // INVALID_ARGUMENT at the first `needle` of the text, naming `field`, saying `expected`.
  void ExpectInvalidAt(const ConfigText& config, const std::string& field,
                       const std::string& needle, const std::string& expected) {
    const Status status = Build(config);
    ExpectError(status, StatusCode::kInvalidArgument,
                {(dir_ / "config.pbtxt").string() + ":" + LineColumnOf(text_, needle) +
                     ": field '" + field + "': ",
                 expected});
  }

  TempRepository repo_;
  std::filesystem::path dir_;
  std::string text_;
};

TEST_F(ConfigValidation, RejectsAnotherPlatform) {
  ConfigText c;
  c.header = "platform: \"onnxruntime_onnx\"\n";
  ExpectInvalidAt(c, "platform", "platform", "set platform: \"pytorch_libtorch\" or backend");
}

TEST_F(ConfigValidation, RejectsAnotherBackend) {
  ConfigText c;
  c.header = "backend: \"python\"\n";
  ExpectInvalidAt(c, "backend", "backend", "'python' is not supported");
}

TEST_F(ConfigValidation, RequiresPlatformOrBackend) {
  ConfigText c;
  c.header = "max_batch_size: 8\n";
  ExpectError(Build(c), StatusCode::kInvalidArgument,
              {(dir_ / "config.pbtxt").string() + ": neither platform nor backend is set"});
}

TEST_F(ConfigValidation, AcceptsPlatformAndBackendTogether) {
  ConfigText c;
  c.header = "platform: \"pytorch_libtorch\"\nbackend: \"pytorch\"\nname: \"m\"\n";
  EXPECT_TRUE(Build(c).ok());
}

TEST_F(ConfigValidation, NameMustMatchTheDirectory) {
  ConfigText c;
  c.header += "name: \"other\"\n";
  ExpectInvalidAt(c, "name", "name", "set name: \"m\" or leave name out");
}

TEST_F(ConfigValidation, MaxBatchSizeMustNotBeNegative) {
  ConfigText c;
  c.header = "platform: \"pytorch_libtorch\"\nmax_batch_size: -1\n";
  ExpectInvalidAt(c, "max_batch_size", "max_batch_size", "-1 is negative");
}

TEST_F(ConfigValidation, NeedsAnInput) {
  ConfigText c;
  c.inputs.clear();
  ExpectError(Build(c), StatusCode::kInvalidArgument,
              {"config.pbtxt: field 'input': at least one input is required"});
}

TEST_F(ConfigValidation, NeedsAnOutput) {
  ConfigText c;
  c.outputs.clear();
  ExpectError(Build(c), StatusCode::kInvalidArgument,
              {"config.pbtxt: field 'output': at least one output is required"});
}

TEST_F(ConfigValidation, TensorNamesMustBeUnique) {
  ConfigText c;
  c.outputs =
      "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 2 ] },\n"
      "         { name: \"y\" data_type: TYPE_FP16 dims: [ 3 ] } ]\n";
  ExpectInvalidAt(c, "output[1].name", "name: \"y\" data_type: TYPE_FP16", "must be unique");
}

TEST_F(ConfigValidation, TensorNameMustNotBeEmpty) {
  ConfigText c;
  c.inputs = "input [ { data_type: TYPE_FP32 dims: [ 4 ] } ]\n";
  // An absent field points at the tensor that lacks it.
  ExpectInvalidAt(c, "input[0].name", "input [", "is empty");
}

TEST_F(ConfigValidation, RejectsStringTensors) {
  ConfigText c;
  c.inputs = "input [ { name: \"x\" data_type: TYPE_STRING dims: [ 1 ] } ]\n";
  ExpectInvalidAt(c, "input[0].data_type", "data_type", "TYPE_STRING is not supported");
}

TEST_F(ConfigValidation, RejectsUnsignedWiderThanByte) {
  ConfigText c;
  c.outputs = "output [ { name: \"y\" data_type: TYPE_UINT32 dims: [ 2 ] } ]\n";
  ExpectInvalidAt(c, "output[0].data_type", "data_type: TYPE_UINT32",
                  "TYPE_UINT32 is not supported");
}

TEST_F(ConfigValidation, RequiresADataType) {
  ConfigText c;
  c.inputs = "input [ { name: \"x\" dims: [ 4 ] } ]\n";
  ExpectInvalidAt(c, "input[0].data_type", "input [", "is missing; set one of TYPE_FP32");
}

TEST_F(ConfigValidation, RequiresDims) {
  ConfigText c;
  c.inputs = "input [ { name: \"x\" data_type: TYPE_FP32 } ]\n";
  ExpectInvalidAt(c, "input[0].dims", "input [", "without the batch dimension");
}

TEST_F(ConfigValidation, RejectsZeroDimension) {
  ConfigText c;
  c.inputs = "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 4, 0 ] } ]\n";
  ExpectInvalidAt(c, "input[0].dims[1]", "dims", "is 0; each dimension must be > 0, or -1");
}

TEST_F(ConfigValidation, RejectsNegativeDimensionOtherThanMinusOne) {
  ConfigText c;
  c.outputs = "output [ { name: \"y\"\n data_type: TYPE_FP32\n dims: [ -2 ] } ]\n";
  ExpectInvalidAt(c, "output[0].dims[0]", "dims: [ -2", "is -2");
}

TEST_F(ConfigValidation, RejectsOptionalInputs) {
  ConfigText c;
  c.inputs = "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]\n";
  ExpectInvalidAt(c, "input[0].optional", "optional", "remove 'optional: true'");
}

TEST_F(ConfigValidation, DynamicBatchingNeedsABatchDimension) {
  ConfigText c;
  c.header = "platform: \"pytorch_libtorch\"\n";
  c.extra = "dynamic_batching { }\n";
  ExpectInvalidAt(c, "dynamic_batching", "dynamic_batching", "needs max_batch_size > 0");
}

TEST_F(ConfigValidation, PreferredBatchSizeMustBePositive) {
  ConfigText c;
  c.extra = "dynamic_batching { preferred_batch_size: [ 0 ] }\n";
  ExpectInvalidAt(c, "dynamic_batching.preferred_batch_size[0]", "preferred_batch_size",
                  "0 is out of range; preferred batch sizes lie in [1, 8]");
}

TEST_F(ConfigValidation, PreferredBatchSizeMustNotExceedMaxBatchSize) {
  ConfigText c;
  c.extra = "dynamic_batching {\n  preferred_batch_size: 4\n  preferred_batch_size: 9\n}\n";
  ExpectInvalidAt(c, "dynamic_batching.preferred_batch_size[1]", "preferred_batch_size: 9",
                  "9 is out of range");
}

TEST_F(ConfigValidation, DefaultPriorityLevelMustBeInRange) {
  ConfigText c;
  c.extra = "dynamic_batching { priority_levels: 3 default_priority_level: 4 }\n";
  ExpectInvalidAt(c, "dynamic_batching.default_priority_level", "default_priority_level",
                  "4 is out of range; [1, 3] is valid");
}

TEST_F(ConfigValidation, DefaultPriorityLevelIsNeededWithPriorities) {
  ConfigText c;
  c.extra = "dynamic_batching { priority_levels: 3 }\n";
  ExpectInvalidAt(c, "dynamic_batching.default_priority_level", "dynamic_batching",
                  "is missing; with priority_levels 3");
}

TEST_F(ConfigValidation, DefaultPriorityLevelNeedsPriorityLevels) {
  ConfigText c;
  c.extra = "dynamic_batching { default_priority_level: 1 }\n";
  ExpectInvalidAt(c, "dynamic_batching.default_priority_level", "default_priority_level",
                  "priority_levels is 0");
}

TEST_F(ConfigValidation, PriorityQueuePolicyKeysMustBeLevels) {
  ConfigText c;
  c.extra =
      "dynamic_batching {\n  priority_levels: 2\n  default_priority_level: 1\n"
      "  priority_queue_policy { key: 1 value { max_queue_size: 4 } }\n"
      "  priority_queue_policy { key: 5 value { max_queue_size: 4 } }\n}\n";
  ExpectInvalidAt(c, "dynamic_batching.priority_queue_policy[5]", "priority_queue_policy { key: 5",
                  "key 5 is out of range; [1, 2] is valid");
}

TEST_F(ConfigValidation, InstanceCountMustNotBeNegative) {
  ConfigText c;
  c.extra = "instance_group [ { count: -2 kind: KIND_CPU } ]\n";
  ExpectInvalidAt(c, "instance_group[0].count", "count", "-2 is negative");
}

TEST_F(ConfigValidation, RejectsKindModel) {
  ConfigText c;
  c.extra = "instance_group [ { count: 1 kind: KIND_MODEL } ]\n";
  ExpectInvalidAt(c, "instance_group[0].kind", "kind", "KIND_MODEL is not supported");
}

TEST_F(ConfigValidation, InstanceGroupKindsMustAgree) {
  ConfigText c;
  c.extra =
      "instance_group [ { count: 1 kind: KIND_GPU },\n"
      "                 { count: 1 kind: KIND_CPU } ]\n";
  ExpectInvalidAt(c, "instance_group[1].kind", "kind: KIND_CPU",
                  "KIND_CPU differs from instance_group[0]'s KIND_GPU");
}

TEST_F(ConfigValidation, CpuGroupMustNotNameGpus) {
  ConfigText c;
  c.extra = "instance_group [ { count: 1 kind: KIND_CPU gpus: [ 0 ] } ]\n";
  ExpectInvalidAt(c, "instance_group[0].gpus", "gpus", "remove gpus or use KIND_GPU");
}

TEST_F(ConfigValidation, GpuIndexMustNotBeNegative) {
  ConfigText c;
  c.extra = "instance_group [ { count: 1 kind: KIND_GPU gpus: [ -1 ] } ]\n";
  ExpectInvalidAt(c, "instance_group[0].gpus[0]", "gpus", "-1 is not a GPU index");
}

TEST_F(ConfigValidation, RejectsUnknownParameterListingKnownKeys) {
  ConfigText c;
  c.extra =
      "parameters { key: \"precision\" value { string_value: \"bf16\" } }\n"
      "parameters { key: \"precison\" value { string_value: \"bf16\" } }\n";
  ExpectInvalidAt(c, "parameters[precison]", "parameters { key: \"precison\"",
                  "unknown parameter; ltserve knows precision, gelu_epilogue, "
                  "algo_candidates, gemm_search, fuse_epilogues, small_batch_kernel, skinny_gemm_kernel, "
                  "staged_gemm_kernel, cutlass_gemm_kernel, layer_chain_kernel, gemm_layernorm_kernel, streaming_layernorm_kernel, "
                  "two_stream_halves, check_kernels_in_pass, gpu_device, "
                  "cublaslt_workspace_bytes, consolidate_cublaslt_memsets, attention_last_sequence_first, "
                  "algo_cache_file, cuda_graphs, programmatic_launch, "
                  "copies_in_graph, run_on_receiving_thread, worker_poll_microseconds, execution_path, "
                  "max_sequence_length, max_tokens_per_batch, INTRA_OP_THREAD_COUNT, "
                  "INTER_OP_THREAD_COUNT (see");
}

TEST_F(ConfigValidation, RejectsBadParameterValues) {
  const std::vector<std::pair<std::string, std::string>> bad{
      {"precision", "fp8"},
      {"precision", "BF16"},
      {"gelu_epilogue", "erf"},
      {"cublaslt_workspace_bytes", "0"},
      {"cublaslt_workspace_bytes", "-4"},
      {"cublaslt_workspace_bytes", "32MiB"},
      {"algo_cache_file", ""},
      {"cuda_graphs", "yes"},
      {"consolidate_cublaslt_memsets", "on"},
      {"attention_last_sequence_first", "reversed"},
      {"programmatic_launch", "on"},
      {"run_on_receiving_thread", "1"},
      {"worker_poll_microseconds", "-1"},
      {"worker_poll_microseconds", "1000001"},
      {"worker_poll_microseconds", "50us"},
      {"execution_path", "gpu"},
      {"max_sequence_length", "0"},
      {"max_tokens_per_batch", "1e4"},
      {"max_tokens_per_batch", "99999999999999999999"},
  };
  for (const auto& [key, value] : bad) {
    SCOPED_TRACE(key + "=" + value);
    ConfigText c;
    c.extra =
        "parameters {\n  key: \"" + key + "\"\n  value { string_value: \"" + value + "\" }\n}\n";
    ExpectInvalidAt(c, "parameters[" + key + "].value.string_value", "string_value",
                    "'" + value + "' is not valid; expected");
  }
}

TEST_F(ConfigValidation, ModelFileNameMustBePlain) {
  ConfigText c;
  c.extra = "default_model_filename: \"../model.pt\"\n";
  ExpectInvalidAt(c, "default_model_filename", "default_model_filename", "not a plain file name");
}

TEST_F(ConfigValidation, InMemoryConfigErrorsNameFileAndFieldWithoutLine) {
  inference::ModelConfig config;
  config.set_platform("pytorch_libtorch");
  config.set_max_batch_size(-3);
  const auto dir = repo_.root() / "m";  // no config.pbtxt on disk
  auto spec = BuildModelSpec(config, dir);
  ExpectError(spec.status(), StatusCode::kInvalidArgument,
              {(dir / "config.pbtxt").string() + ": field 'max_batch_size': -3 is negative"});
}

}  // namespace
}  // namespace ltserve::config
