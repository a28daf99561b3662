// Parsing config.pbtxt and building a ModelSpec from a valid Triton-style repository.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "config/model_config.h"
#include "config_test_util.h"

namespace ltserve::config {
namespace {

using testing::ExpectError;
using testing::LineColumnOf;
using testing::TempRepository;

bool HasWarningWith(const std::vector<std::string>& warnings, const std::string& text) {
  for (const auto& w : warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

// `text` with every placeholder replaced by its number.
std::string Fill(std::string text, const std::map<std::string, int>& values) {
  for (const auto& [placeholder, value] : values) {
    for (auto at = text.find(placeholder); at != std::string::npos; at = text.find(placeholder)) {
      text.replace(at, placeholder.size(), std::to_string(value));
    }
  }
  return text;
}

TEST(ModelConfig, TritonStyleConfigBuildsTheExpectedSpec) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const int in_width = std::uniform_int_distribution<int>(1, 4097)(rng);
  const int out_width = std::uniform_int_distribution<int>(1, 4097)(rng);
  const int gpu_count = std::uniform_int_distribution<int>(1, 8)(rng);
  const int max_batch = std::uniform_int_distribution<int>(2, 1024)(rng);

  TempRepository repo;
  const std::string text = Fill(
      "name: \"mlp\"\n"
      "platform: \"pytorch_libtorch\"\n"
      "max_batch_size: MAX_BATCH\n"
      "input [\n"
      "  { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [ IN_WIDTH ] },\n"
      "  { name: \"mask\" data_type: TYPE_BOOL dims: [ -1 ] }\n"
      "]\n"
      "output [ { name: \"OUTPUT__0\" data_type: TYPE_BF16 dims: [ OUT_WIDTH, -1 ] } ]\n"
      "instance_group [ { count: GPU_COUNT kind: KIND_GPU },\n"
      "                 { kind: KIND_GPU } ]\n"
      "dynamic_batching {\n"
      "  preferred_batch_size: [ 1, MAX_BATCH ]\n"
      "  max_queue_delay_microseconds: 250\n"
      "  priority_levels: 2\n"
      "  default_priority_level: 2\n"
      "  priority_queue_policy { key: 1 value { max_queue_size: 16 } }\n"
      "}\n"
      "parameters { key: \"precision\" value { string_value: \"fp16\" } }\n"
      "parameters: { key: \"gelu_epilogue\" value: { string_value: \"exact\" } }\n"
      "parameters { key: \"cublaslt_workspace_bytes\" value { string_value: \"33554432\" } }\n"
      "parameters { key: \"algo_cache_file\" value { string_value: \"cache/algos.bin\" } }\n"
      "parameters { key: \"cuda_graphs\" value { string_value: \"false\" } }\n"
      "parameters { key: \"execution_path\" value { string_value: \"plan\" } }\n"
      "parameters { key: \"max_sequence_length\" value { string_value: \"512\" } }\n"
      "parameters { key: \"max_tokens_per_batch\" value { string_value: \"8192\" } }\n",
      {{"MAX_BATCH", max_batch},
       {"IN_WIDTH", in_width},
       {"OUT_WIDTH", out_width},
       {"GPU_COUNT", gpu_count}});
  const auto dir = repo.WriteConfig("mlp", text);
  repo.WriteModelFile("mlp", "1");
  const auto served = repo.WriteModelFile("mlp", "3");
  std::filesystem::create_directories(dir / "7");  // a version without the model file

  auto config = ParseModelConfigFile(dir / "config.pbtxt");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->dynamic_batching().max_queue_delay_microseconds(), 250u);
  EXPECT_EQ(config->dynamic_batching().priority_queue_policy().at(1).max_queue_size(), 16u);

  auto spec = BuildModelSpec(*config, dir);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "mlp");
  EXPECT_EQ(spec->version, 3);
  EXPECT_EQ(spec->model_file, served);
  EXPECT_EQ(spec->max_batch_size, max_batch);
  ASSERT_EQ(spec->inputs.size(), 2u);
  EXPECT_EQ(spec->inputs[0].name, "INPUT__0");
  EXPECT_EQ(spec->inputs[0].dtype, DataType::kFp32);
  EXPECT_EQ(spec->inputs[0].dims, std::vector<std::int64_t>{in_width});
  EXPECT_EQ(spec->inputs[1].name, "mask");
  EXPECT_EQ(spec->inputs[1].dtype, DataType::kBool);
  EXPECT_EQ(spec->inputs[1].dims, std::vector<std::int64_t>{-1});
  ASSERT_EQ(spec->outputs.size(), 1u);
  EXPECT_EQ(spec->outputs[0].dtype, DataType::kBf16);
  EXPECT_EQ(spec->outputs[0].dims, (std::vector<std::int64_t>{out_width, -1}));
  EXPECT_EQ(spec->device, DeviceKind::kGpu);
  EXPECT_EQ(spec->instance_count, gpu_count + 1);  // count 0 counts as 1, as in Triton
  ModelOptions expected_options;
  expected_options.precision = Precision::kFp16;
  expected_options.gelu = GeluMode::kExact;
  expected_options.workspace_bytes = 33554432;
  expected_options.algo_cache_file = (dir / "cache" / "algos.bin").string();
  expected_options.cuda_graphs = false;
  expected_options.execution_path = PathChoice::kPlan;
  expected_options.max_sequence_length = 512;
  expected_options.max_tokens_per_batch = 8192;
  EXPECT_EQ(spec->options, expected_options);
}

TEST(ModelConfig, MinimalConfigDefaultsToOneAutoInstanceWithoutBatching) {
  TempRepository repo;
  const auto dir = repo.WriteConfig("plain",
                                    "backend: \"pytorch\"\n"
                                    "input { name: \"x\" data_type: TYPE_INT64 dims: [ 1, 7 ] }\n"
                                    "output { name: \"y\" data_type: TYPE_FP64 dims: [ 1, 3 ] }\n");
  const auto file = repo.WriteModelFile("plain", "12");
  auto config = ParseModelConfigFile(dir / "config.pbtxt");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto spec = BuildModelSpec(*config, dir.string() + "/");  // a trailing slash names the same dir
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "plain");
  EXPECT_EQ(spec->version, 12);
  EXPECT_EQ(std::filesystem::canonical(spec->model_file), std::filesystem::canonical(file));
  EXPECT_EQ(spec->max_batch_size, 0);
  EXPECT_EQ(spec->device, DeviceKind::kAuto);
  EXPECT_EQ(spec->instance_count, 1);
  EXPECT_EQ(spec->options, ModelOptions{});
  EXPECT_EQ(spec->inputs[0].dtype, DataType::kInt64);
  EXPECT_EQ(spec->outputs[0].dtype, DataType::kFp64);
}

TEST(ModelConfig, TritonPytorchBackendParametersLoadWithWarnings) {
  TempRepository repo;
  // As Triton's PyTorch backend documentation writes them.
  repo.WriteConfig(
      "resnet",
      "name: \"resnet\"\n"
      "backend: \"pytorch\"\n"
      "max_batch_size: 8\n"
      "input [ { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]\n"
      "output [ { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: [ 1000 ] } ]\n"
      "instance_group [ { count: 2 kind: KIND_GPU gpus: [ 0 ] } ]\n"
      "parameters: { key: \"INFERENCE_MODE\" value: { string_value: \"true\" } }\n"
      "parameters: { key: \"DISABLE_OPTIMIZED_EXECUTION\" value: { string_value: \"true\" } }\n"
      "parameters: { key: \"ENABLE_NVFUSER\" value: { string_value: \"false\" } }\n"
      "parameters: { key: \"ENABLE_JIT_PROFILING\" value: { string_value: \"false\" } }\n"
      "parameters: { key: \"NUM_THREADS\" value: { string_value: \"4\" } }\n"
      "parameters: { key: \"precision\" value: { string_value: \"tf32\" } }\n");
  repo.WriteModelFile("resnet", "1");
  auto entries = ScanRepository(repo.root());
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 1u);
  const RepositoryEntry& entry = (*entries)[0];
  ASSERT_TRUE(entry.spec.ok()) << entry.spec.status().ToString();
  for (const char* key : {"INFERENCE_MODE", "DISABLE_OPTIMIZED_EXECUTION", "ENABLE_NVFUSER",
                          "ENABLE_JIT_PROFILING", "NUM_THREADS"}) {
    EXPECT_TRUE(HasWarningWith(entry.warnings, std::string("'") + key + "'")) << key;
  }
  EXPECT_TRUE(HasWarningWith(entry.warnings, "gpus is ignored"));
  EXPECT_EQ(entry.warnings.size(), 6u);
  // Ignored settings do not reach the executors; ltserve's own do.
  ModelOptions tf32;
  tf32.precision = Precision::kTf32;
  tf32.gelu = GeluMode::kExact;  // "auto" in fp32 storage
  EXPECT_EQ(entry.spec.value().options, tf32);
  EXPECT_EQ(entry.spec.value().instance_count, 2);
}

TEST(ModelConfig, MissingConfigIsNotFoundAndNamesTheFile) {
  TempRepository repo;
  const auto path = repo.root() / "absent" / "config.pbtxt";
  auto config = ParseModelConfigFile(path);
  ExpectError(config.status(), StatusCode::kNotFound, {path.string(), "config.pbtxt"});
}

TEST(ModelConfig, DirectoryInPlaceOfConfigIsRejected) {
  TempRepository repo;
  std::filesystem::create_directories(repo.root() / "m" / "config.pbtxt");
  auto config = ParseModelConfigFile(repo.root() / "m" / "config.pbtxt");
  ExpectError(config.status(), StatusCode::kInvalidArgument,
              {"config.pbtxt", "not a regular file"});
}

// Writes `text` as a model's config.pbtxt, parses it, and expects INVALID_ARGUMENT located at
// the first `needle` in the text, with every one of `parts` in the message.
void ExpectParseErrorAt(const std::string& text, const std::string& needle,
                        std::vector<std::string> parts) {
  TempRepository repo;
  const auto file = repo.WriteConfig("m", text) / "config.pbtxt";
  auto config = ParseModelConfigFile(file);
  parts.push_back(file.string() + ":" + LineColumnOf(text, needle) + ": ");
  ExpectError(config.status(), StatusCode::kInvalidArgument, parts);
}

TEST(ModelConfig, MalformedTextNamesFileLineAndColumn) {
  ExpectParseErrorAt("platform: \"pytorch_libtorch\"\nmax_batch_size: eight\n", "eight",
                     {"field 'max_batch_size'", "Expected integer"});
}

// A config for a model with versions 1, 2 and 3, plus `policy`; its spec or the error.
Result<ModelSpec> SpecWithVersionPolicy(TempRepository& repo, const std::string& policy) {
  const auto dir = repo.WriteConfig("versioned",
                                    "platform: \"pytorch_libtorch\"\n"
                                    "input { name: \"x\" data_type: TYPE_FP32 dims: [ 4 ] }\n"
                                    "output { name: \"y\" data_type: TYPE_FP32 dims: [ 4 ] }\n" +
                                        policy);
  for (const char* version : {"1", "2", "3"}) repo.WriteModelFile("versioned", version);
  auto config = ParseModelConfigFile(dir / "config.pbtxt");
  if (!config.ok()) return config.status();
  return BuildModelSpec(*config, dir);
}

std::vector<std::int64_t> Versions(const ModelSpec& spec) {
  std::vector<std::int64_t> out;
  for (const VersionFile& v : spec.versions) out.push_back(v.version);
  return out;
}

TEST(ModelConfig, VersionPolicyDefaultsToTheLatestVersion) {
  TempRepository repo;
  auto spec = SpecWithVersionPolicy(repo, "");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(Versions(*spec), std::vector<std::int64_t>{3});
  EXPECT_EQ(spec->version, 3);
}

TEST(ModelConfig, VersionPolicyLatestAllAndSpecificPickTheirVersionsHighestFirst) {
  TempRepository repo;
  auto latest = SpecWithVersionPolicy(repo, "version_policy { latest { num_versions: 2 } }");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(Versions(*latest), (std::vector<std::int64_t>{3, 2}));
  auto all = SpecWithVersionPolicy(repo, "version_policy { all {} }");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(Versions(*all), (std::vector<std::int64_t>{3, 2, 1}));
  auto specific = SpecWithVersionPolicy(repo, "version_policy { specific { versions: [ 1, 3, 9 ] } }");
  ASSERT_TRUE(specific.ok()) << specific.status().ToString();
  EXPECT_EQ(Versions(*specific), (std::vector<std::int64_t>{3, 1}));  // 9 has no directory
  EXPECT_EQ(specific->version, 3);
}

TEST(ModelConfig, VersionPolicyErrorsNameTheField) {
  TempRepository repo;
  auto zero = SpecWithVersionPolicy(repo, "version_policy { latest { num_versions: 0 } }");
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.status().message().find("version_policy.latest.num_versions"), std::string::npos)
      << zero.status().message();
  auto empty = SpecWithVersionPolicy(repo, "version_policy { specific { } }");
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  auto absent = SpecWithVersionPolicy(repo, "version_policy { specific { versions: [ 8 ] } }");
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound);
  EXPECT_NE(absent.status().message().find("versions found: 3, 2, 1"), std::string::npos)
      << absent.status().message();
}

TEST(ModelConfig, UnsupportedTopLevelFieldSaysRemoveIt) {
  ExpectParseErrorAt("platform: \"pytorch_libtorch\"\noptimization { cuda { graphs: true } }\n",
                     "optimization",
                     {"field 'optimization' is not supported by ltserve",
                      "supported in ModelConfig: name, platform, version_policy, max_batch_size", "remove it"});
}

TEST(ModelConfig, UnsupportedNestedFieldListsThatMessagesFields) {
  ExpectParseErrorAt(
      "platform: \"pytorch_libtorch\"\n"
      "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 4 ]\n"
      "          reshape: { shape: [ 2, 2 ] } } ]\n",
      "reshape",
      {"field 'reshape'", "supported in ModelInput: name, data_type, dims, optional", "remove it"});
}

TEST(ModelConfig, UnknownEnumValueIsLocated) {
  ExpectParseErrorAt(
      "platform: \"pytorch_libtorch\"\n"
      "input [ { name: \"x\" data_type: TYPE_FP8 dims: [ 4 ] } ]\n",
      "TYPE_FP8", {"\"TYPE_FP8\"", "\"data_type\""});
}

TEST(ModelConfig, RepeatedSingularFieldIsLocated) {
  ExpectParseErrorAt("platform: \"pytorch_libtorch\"\nmax_batch_size: 4\nmax_batch_size: 8\n",
                     "max_batch_size: 8", {"\"max_batch_size\" is specified multiple times"});
}

TEST(ModelConfig, UnclosedBlockSaysEndOfFile) {
  const std::string text = "platform: \"pytorch_libtorch\"\ninput [ { name: \"x\"\n";
  TempRepository repo;
  const auto file = repo.WriteConfig("m", text) / "config.pbtxt";
  // Protobuf reports the end of the text: the line after the last newline.
  ExpectError(ParseModelConfigFile(file).status(), StatusCode::kInvalidArgument,
              {file.string() + ":3:1: ", "end of file (is a closing '}' or ']' missing?)"});
}

TEST(ModelConfig, DataTypesMapBothWays) {
  for (int i = 0; i <= static_cast<int>(DataType::kBf16); ++i) {
    const auto type = static_cast<DataType>(i);
    const inference::DataType config_type = ToConfigDataType(type);
    EXPECT_EQ(FromConfigDataType(config_type), type) << WireName(type);
    // The protocol's names are the config's without the prefix: FP32 <-> TYPE_FP32.
    if (type != DataType::kInvalid) {
      EXPECT_EQ(inference::DataType_Name(config_type), "TYPE_" + std::string(WireName(type)));
    }
  }
  EXPECT_EQ(FromConfigDataType(inference::TYPE_STRING), DataType::kInvalid);
  EXPECT_EQ(ToConfigDataType(DataType::kInvalid), inference::TYPE_INVALID);
}

}  // namespace
}  // namespace ltserve::config
