// LoadTorchScriptModel: every module type lowers (scripted and traced) to the expected ops with
// the module's own weights; everything else falls back with a reason or fails cleanly.
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <type_traits>

#include "test_models.h"
#include "torch/torch_loader.h"

namespace ltserve {
namespace {

using testing::FindChainModel;
using testing::MakeSpec;

// A compact, test-owned rendering of the ops (independent of Plan::Describe's format).
std::vector<std::string> OpSequence(const plan::Plan& plan) {
  std::vector<std::string> ops;
  for (const plan::Op& op : plan.ops()) {
    std::ostringstream text;
    std::visit(
        [&](const auto& o) {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, plan::LinearOp>) {
            text << "linear " << o.in_features << "->" << o.out_features
                 << (o.bias.empty() ? "" : " bias");
            if (o.activation != plan::Activation::kNone) {
              text << " " << plan::ActivationName(o.activation);
            }
          } else if constexpr (std::is_same_v<T, plan::ActivationOp>) {
            text << plan::ActivationName(o.activation);
          } else if constexpr (std::is_same_v<T, plan::LayerNormOp>) {
            text << "layernorm " << plan.values()[o.output].width
                 << (o.gamma.empty() ? "" : " affine");
          } else {
            text << "other";
          }
        },
        op);
    ops.push_back(text.str());
  }
  return ops;
}

const std::map<std::string, std::vector<std::string>>& ExpectedOps() {
  static const std::map<std::string, std::vector<std::string>> expected = {
      {"linear", {"linear 37->1000 bias", "linear 1000->5"}},
      {"relu", {"linear 37->1000 bias relu", "linear 1000->37 bias"}},
      {"gelu", {"linear 37->1000 bias gelu", "linear 1000->37 bias"}},
      {"gelu_tanh", {"linear 37->1000 bias gelu_tanh", "linear 1000->37 bias"}},
      {"silu", {"linear 37->1000 bias", "silu", "linear 1000->37 bias"}},
      {"tanh", {"linear 37->1000 bias", "tanh", "linear 1000->37 bias"}},
      {"sigmoid", {"linear 37->1000 bias", "sigmoid", "linear 1000->37 bias"}},
      {"layernorm",
       {"linear 37->1000 bias", "layernorm 1000 affine", "linear 1000->9 bias", "layernorm 9"}},
      {"flatten", {"linear 111->11 bias relu", "linear 11->4 bias"}},
      {"noops", {"linear 37->20 bias relu", "linear 20->6 bias"}},
      {"leading_act", {"gelu_tanh", "relu", "linear 37->13 bias", "sigmoid"}},
      {"combo",
       {"layernorm 37 affine", "linear 37->64 bias gelu", "linear 64->33 bias", "silu", "tanh",
        "linear 33->8 bias gelu_tanh"}},
      {"modulelist", {"linear 37->21 bias relu", "linear 21->21 bias gelu", "linear 21->2 bias"}},
      {"addmm", {"linear 37->19 bias relu", "linear 19->3 bias"}},
      {"matmul_add", {"linear 37->19 bias gelu_tanh", "linear 19->3 bias"}},
  };
  return expected;
}

// The plan's weights, in op order, must be the module's parameters (in declaration order,
// which is the chain order in every test model), converted to fp32 exactly.
void ExpectWeightsAreModuleParameters(const plan::Plan& plan, const std::string& model) {
  torch::jit::Module module = torch::jit::load(testing::ModelFile(model).string());
  std::vector<at::Tensor> parameters;
  for (const auto& parameter : module.named_parameters()) {
    parameters.push_back(parameter.value.to(at::kFloat).contiguous());
  }
  std::size_t next = 0;
  auto expect_next = [&](const std::vector<float>& values, const char* what) {
    ASSERT_LT(next, parameters.size()) << "plan has more " << what << " tensors than the module";
    const at::Tensor& expected = parameters[next++];
    ASSERT_EQ(static_cast<std::int64_t>(values.size()), expected.numel()) << what;
    EXPECT_EQ(std::memcmp(values.data(), expected.const_data_ptr(), values.size() * sizeof(float)),
              0)
        << what << " differs from the module's parameter " << next - 1;
  };
  for (const plan::Op& op : plan.ops()) {
    if (const auto* linear = std::get_if<plan::LinearOp>(&op)) {
      expect_next(linear->weight, "linear weight");
      if (!linear->bias.empty()) expect_next(linear->bias, "linear bias");
    } else if (const auto* norm = std::get_if<plan::LayerNormOp>(&op)) {
      if (!norm->gamma.empty()) expect_next(norm->gamma, "layernorm weight");
      if (!norm->beta.empty()) expect_next(norm->beta, "layernorm bias");
    }
  }
  EXPECT_EQ(next, parameters.size()) << "module parameters the plan does not hold";
}

LoadedModel LoadOk(const ModelSpec& spec) {
  Result<LoadedModel> loaded = LoadTorchScriptModel(spec);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  if (!loaded.ok()) return LoadedModel{};
  EXPECT_NE(loaded->torchscript, nullptr);
  if (loaded->torchscript) {
    EXPECT_EQ(loaded->torchscript->path(), ExecutionPath::kTorchScript);
  }
  return std::move(loaded).value();
}

class ChainLoweringTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ChainLoweringTest, LowersToExpectedOpsWithModuleWeights) {
  const auto& [name, mode] = GetParam();
  const testing::ChainModel& model = FindChainModel(name);
  const std::string file_name = name + "_" + mode;
  LoadedModel loaded = LoadOk(MakeSpec(file_name, model.input_dims, model.output_dims));
  ASSERT_NE(loaded.plan, nullptr) << loaded.lowering_report;
  EXPECT_EQ(OpSequence(*loaded.plan), ExpectedOps().at(name));
  EXPECT_EQ(loaded.lowering_report, loaded.plan->Describe());
  EXPECT_TRUE(loaded.plan->Validate().ok());
  ExpectWeightsAreModuleParameters(*loaded.plan, file_name);
}

std::vector<std::tuple<std::string, std::string>> AllChainModels() {
  std::vector<std::tuple<std::string, std::string>> params;
  for (const testing::ChainModel& model : testing::ChainModels()) {
    for (const char* mode : {"script", "trace"}) params.emplace_back(model.name, mode);
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ChainLoweringTest, ::testing::ValuesIn(AllChainModels()),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

TEST(TorchLoaderTest, DemoModelsLowerWithFusedRelu) {
  ModelSpec demo = MakeSpec("demo/demo_mlp", {128}, {10});
  LoadedModel loaded = LoadOk(demo);
  ASSERT_NE(loaded.plan, nullptr) << loaded.lowering_report;
  EXPECT_EQ(OpSequence(*loaded.plan),
            (std::vector<std::string>{"linear 128->512 bias relu", "linear 512->512 bias relu",
                                      "linear 512->10 bias"}));
  ExpectWeightsAreModuleParameters(*loaded.plan, "demo/demo_mlp");

  loaded = LoadOk(MakeSpec("demo/tiny_mlp", {16}, {4}, DataType::kFp32, 256));
  ASSERT_NE(loaded.plan, nullptr) << loaded.lowering_report;
  EXPECT_EQ(OpSequence(*loaded.plan),
            (std::vector<std::string>{"linear 16->32 bias relu", "linear 32->4 bias"}));
}

TEST(TorchLoaderTest, ReducedPrecisionModulesLowerToFp32Weights) {
  for (auto [name, dtype] : {std::pair{"fp16_io", DataType::kFp16}, {"bf16_io", DataType::kBf16}}) {
    SCOPED_TRACE(name);
    LoadedModel loaded = LoadOk(MakeSpec(name, {37}, {37}, dtype));
    ASSERT_NE(loaded.plan, nullptr) << loaded.lowering_report;
    EXPECT_EQ(OpSequence(*loaded.plan), ExpectedOps().at("gelu"));
    ExpectWeightsAreModuleParameters(*loaded.plan, name);
  }
}

void ExpectFallback(const ModelSpec& spec, const std::string& reason_part) {
  LoadedModel loaded = LoadOk(spec);
  EXPECT_EQ(loaded.plan, nullptr);
  EXPECT_NE(loaded.lowering_report.find("not lowered"), std::string::npos)
      << loaded.lowering_report;
  EXPECT_NE(loaded.lowering_report.find(reason_part), std::string::npos) << loaded.lowering_report;
}

TEST(TorchLoaderTest, UnknownOpFallsBackNamingTheOp) {
  ExpectFallback(MakeSpec("cumsum", {37}, {5}), "aten::cumsum");
}

TEST(TorchLoaderTest, BranchFallsBackAsNotAChain) {
  ExpectFallback(MakeSpec("residual", {37}, {37}), "feeds 2 ops");
}

TEST(TorchLoaderTest, TupleOutputFallsBack) {
  ModelSpec spec = MakeSpec("two_outputs", {37}, {7});
  spec.outputs.push_back(TensorSpec{"OUTPUT__1", DataType::kFp32, {3}});
  ExpectFallback(spec, "2 outputs");
  // With one output configured the config allows a plan; the graph itself is no chain.
  ExpectFallback(MakeSpec("two_outputs", {37}, {7}), "straight chain");
}

TEST(TorchLoaderTest, TwoInputsFallBack) {
  ModelSpec spec = MakeSpec("two_inputs", {37}, {6});
  spec.inputs.push_back(TensorSpec{"INPUT__1", DataType::kFp32, {5}});
  ExpectFallback(spec, "2 inputs");
  ExpectFallback(MakeSpec("two_inputs", {37}, {6}), "forward takes 2 inputs");
}

TEST(TorchLoaderTest, LinearOverUnflattenedDimsFallsBack) {
  ExpectFallback(MakeSpec("relu_script", {1, 37}, {1, 37}), "Flatten first");
}

TEST(TorchLoaderTest, NonFloatIoFallsBack) {
  ExpectFallback(MakeSpec("relu_script", {37}, {37}, DataType::kInt32), "INT32");
}

TEST(TorchLoaderTest, VariableDimsFallBack) {
  ExpectFallback(MakeSpec("relu_script", {-1}, {37}), "variable dims");
}

TEST(TorchLoaderTest, InputWidthMismatchIsAnErrorNamingBoth) {
  Result<LoadedModel> loaded = LoadTorchScriptModel(MakeSpec("relu_script", {38}, {37}));
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(loaded.status().message().find("[38]"), std::string::npos) << loaded.status().message();
  EXPECT_NE(loaded.status().message().find("width is 37"), std::string::npos)
      << loaded.status().message();
}

TEST(TorchLoaderTest, OutputWidthMismatchIsAnErrorNamingBoth) {
  Result<LoadedModel> loaded = LoadTorchScriptModel(MakeSpec("flatten_trace", {3, 37}, {2, 3}));
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(loaded.status().message().find("OUTPUT__0"), std::string::npos);
  EXPECT_NE(loaded.status().message().find("[2, 3]"), std::string::npos)
      << loaded.status().message();
  EXPECT_NE(loaded.status().message().find("width is 4"), std::string::npos)
      << loaded.status().message();
}

TEST(TorchLoaderTest, MissingFileIsNotFoundNamingTheFile) {
  ModelSpec spec = MakeSpec("relu_script", {37}, {37});
  spec.model_file = testing::TestModelRepo() / "no_such_model" / "1" / "model.pt";
  Result<LoadedModel> loaded = LoadTorchScriptModel(spec);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound);
  EXPECT_NE(loaded.status().message().find(spec.model_file.string()), std::string::npos);
}

class CorruptFileTest : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove(path_); }
  std::filesystem::path path_ = std::filesystem::temp_directory_path() /
                                ("ltserve_corrupt_" + std::to_string(testing::FreshSeed()) + ".pt");
};

void ExpectCorruptFileError(const std::filesystem::path& file) {
  ModelSpec spec = MakeSpec("relu_script", {37}, {37});
  spec.model_file = file;
  Result<LoadedModel> loaded = LoadTorchScriptModel(spec);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(loaded.status().message().find(file.string()), std::string::npos)
      << loaded.status().message();
}

TEST_F(CorruptFileTest, RandomBytesAreAnErrorNamingTheFile) {
  std::mt19937 rng(testing::FreshSeed());
  std::ofstream out(path_, std::ios::binary);
  for (int i = 0; i < 4096; ++i) out.put(static_cast<char>(rng()));
  out.close();
  ExpectCorruptFileError(path_);
}

TEST_F(CorruptFileTest, TruncatedModelIsAnErrorNamingTheFile) {
  std::ifstream in(testing::ModelFile("relu_script"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000u);
  std::ofstream(path_, std::ios::binary).write(bytes.data(), bytes.size() / 2);
  ExpectCorruptFileError(path_);
}

// libtorch's unpickler allocates a string's declared length before reading it; the loader's
// pre-check (torch/pickle_lengths.h) must refuse the length first. The message is the check's,
// not libtorch's, so a pass here means no 2 GB allocation was made.
TEST_F(CorruptFileTest, PickleStringLongerThanItsRecordIsRefusedBeforeLibtorchReadsIt) {
  const std::filesystem::path source = testing::ModelFile("relu_script");
  std::size_t data_pkl_offset = 0;
  {
    caffe2::serialize::PyTorchStreamReader archive(source.string());
    data_pkl_offset = archive.getRecordOffset("data.pkl");
    ASSERT_GE(archive.getRecordSize("data.pkl"), 7u);
  }
  std::ifstream in(source, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // PROTO 2, then BINUNICODE of 2^31 - 1 bytes over the record's first opcodes. TorchScript
  // stores records uncompressed and its reader skips the CRC, so the record reads as patched.
  const std::string patch("\x80\x02X\xff\xff\xff\x7f", 7);
  bytes.replace(data_pkl_offset, patch.size(), patch);
  std::ofstream(path_, std::ios::binary).write(bytes.data(), bytes.size());

  ModelSpec spec = MakeSpec("relu_script", {37}, {37});
  spec.model_file = path_;
  Result<LoadedModel> loaded = LoadTorchScriptModel(spec);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  const std::string& message = loaded.status().message();
  EXPECT_NE(message.find(path_.string()), std::string::npos) << message;
  EXPECT_NE(message.find("data.pkl"), std::string::npos) << message;
  EXPECT_NE(message.find("declares 2147483647 bytes"), std::string::npos) << message;
}

// A tensor whose record holds fewer bytes than its sizes need (here an empty one: a storage
// that claims 16 bytes but has no data pointer) loads in libtorch, and the first copy of it read outside the record (a SEGV
// found by fuzz_torch_loader). The loader refuses it, naming the tensor, before anything reads it.
TEST(TorchLoaderTest, TensorPastItsStorageIsRefusedNamingIt) {
  ModelSpec spec = MakeSpec("relu_script", {37}, {3});
  spec.model_file =
      std::filesystem::path(LTSERVE_TORCH_LOADER_CORPUS) / "regress-segv-tensor-past-storage.pt";
  Result<LoadedModel> loaded = LoadTorchScriptModel(spec);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  const std::string& message = loaded.status().message();
  EXPECT_NE(message.find(spec.model_file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("tensor '1.weight' has a storage of 16 bytes with no data behind it"),
            std::string::npos)
      << message;
}

TEST(TorchLoaderTest, ExecutionPathTorchScriptSkipsLowering) {
  ModelSpec spec = MakeSpec("relu_script", {37}, {37});
  spec.options.execution_path = PathChoice::kTorchScript;
  ExpectFallback(spec, "torchscript");
}

TEST(TorchLoaderTest, ExecutionPathPlanLowersOrFails) {
  ModelSpec lowerable = MakeSpec("relu_trace", {37}, {37});
  lowerable.options.execution_path = PathChoice::kPlan;
  EXPECT_NE(LoadOk(lowerable).plan, nullptr);

  ModelSpec unlowerable = MakeSpec("cumsum", {37}, {5});
  unlowerable.options.execution_path = PathChoice::kPlan;
  Result<LoadedModel> loaded = LoadTorchScriptModel(unlowerable);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(loaded.status().message().find("aten::cumsum"), std::string::npos);
}

}  // namespace
}  // namespace ltserve
