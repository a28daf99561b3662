// Transformer encoders lower to token plans (scripted and traced) with the module's own weights
// and settings; configs an encoder plan cannot serve fall back or fail with a reason.
#include <gtest/gtest.h>
#include <torch/script.h>

#include <cstring>
#include <set>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "test_models.h"
#include "torch/torch_loader.h"

namespace ltserve {
namespace {

using testing::EncoderModel;

LoadedModel LoadOk(const ModelSpec& spec) {
  Result<LoadedModel> loaded = LoadTorchScriptModel(spec);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  if (!loaded.ok()) return LoadedModel{};
  return std::move(loaded).value();
}

// Every weight vector of the plan is, byte for byte, one of the module's parameters, and every
// parameter is used.
void ExpectWeightsAreModuleParameters(const plan::Plan& plan, const std::string& file) {
  torch::jit::Module module = torch::jit::load(file);
  std::vector<at::Tensor> parameters;
  for (const auto& parameter : module.named_parameters()) {
    parameters.push_back(parameter.value.to(at::kFloat).contiguous());
  }
  std::set<std::size_t> used;
  auto expect_parameter = [&](const std::vector<float>& values, const char* what) {
    if (values.empty()) return;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      if (parameters[i].numel() == static_cast<std::int64_t>(values.size()) &&
          std::memcmp(values.data(), parameters[i].const_data_ptr(),
                      values.size() * sizeof(float)) == 0) {
        used.insert(i);
        return;
      }
    }
    ADD_FAILURE() << what << " of " << values.size() << " values is no module parameter";
  };
  for (const plan::Op& op : plan.ops()) {
    if (const auto* linear = std::get_if<plan::LinearOp>(&op)) {
      expect_parameter(linear->weight, "a linear weight");
      expect_parameter(linear->bias, "a linear bias");
    } else if (const auto* norm = std::get_if<plan::LayerNormOp>(&op)) {
      expect_parameter(norm->gamma, "a layernorm weight");
      expect_parameter(norm->beta, "a layernorm bias");
    }
  }
  EXPECT_EQ(used.size(), parameters.size()) << "module parameters the plan does not hold";
}

// The op that writes `value`, or null for the plan input.
const plan::Op* Producer(const plan::Plan& plan, plan::ValueId value) {
  for (const plan::Op& op : plan.ops()) {
    const plan::ValueId output = std::visit([](const auto& o) { return o.output; }, op);
    if (output == value) return &op;
  }
  return nullptr;
}

class EncoderLoweringTest : public ::testing::TestWithParam<std::tuple<EncoderModel, std::string>> {
};

TEST_P(EncoderLoweringTest, LowersToTokenPlanWithModuleSettingsAndWeights) {
  const auto& [encoder, mode] = GetParam();
  const ModelSpec spec = testing::MakeEncoderSpec(encoder, mode);
  LoadedModel loaded = LoadOk(spec);
  ASSERT_NE(loaded.plan, nullptr) << loaded.lowering_report;
  const plan::Plan& plan = *loaded.plan;
  EXPECT_EQ(plan.input_kind(), plan::InputKind::kTokens);
  EXPECT_EQ(plan.input_width(), encoder.d_in);
  EXPECT_EQ(plan.output_width(), encoder.d_out);
  std::int64_t attentions = 0;
  for (const plan::Op& op : plan.ops()) {
    const auto* attention = std::get_if<plan::AttentionOp>(&op);
    if (attention == nullptr) continue;
    ++attentions;
    EXPECT_EQ(attention->num_heads, encoder.heads);
    EXPECT_EQ(attention->num_heads * attention->head_dim, plan.values()[attention->output].width);
    // The out-projection adds the layer input back; the in-projection reads that same input
    // (post-norm) or its norm1 (norm_first).
    const auto* qkv = std::get_if<plan::LinearOp>(Producer(plan, attention->qkv));
    ASSERT_NE(qkv, nullptr);
    const plan::LinearOp* out_proj = nullptr;
    for (const plan::Op& other : plan.ops()) {
      const auto* linear = std::get_if<plan::LinearOp>(&other);
      if (linear != nullptr && linear->input == attention->output) out_proj = linear;
    }
    ASSERT_NE(out_proj, nullptr);
    ASSERT_NE(out_proj->residual, plan::kNoValue);
    EXPECT_EQ(qkv->input == out_proj->residual, !encoder.norm_first);
    if (encoder.norm_first) {
      const plan::Op* norm1 = Producer(plan, qkv->input);
      ASSERT_NE(norm1, nullptr);
      EXPECT_EQ(std::get<plan::LayerNormOp>(*norm1).input, out_proj->residual);
    }
  }
  EXPECT_EQ(attentions, encoder.layers);
  ExpectWeightsAreModuleParameters(plan, spec.model_file.string());
}

INSTANTIATE_TEST_SUITE_P(AllEncoders, EncoderLoweringTest,
                         ::testing::ValuesIn(testing::EncoderModelModes()), [](const auto& info) {
                           return std::get<0>(info.param).name + "_" + std::get<1>(info.param);
                         });

void ExpectFallback(const ModelSpec& spec, const std::string& reason_part) {
  LoadedModel loaded = LoadOk(spec);
  EXPECT_EQ(loaded.plan, nullptr);
  EXPECT_NE(loaded.torchscript, nullptr);
  EXPECT_NE(loaded.lowering_report.find(reason_part), std::string::npos) << loaded.lowering_report;
}

// An exported key-padding wrapper: INPUT__0 [-1, d_in], MASK__1 BOOL [-1] -> [-1, d_out].
ModelSpec MaskedSpec(const std::string& model = "enc_masked", std::int64_t d_in = 64,
                     std::int64_t d_out = 64) {
  ModelSpec spec = testing::MakeSpec(model, {-1, d_in}, {-1, d_out}, DataType::kFp32,
                                     testing::kEncoderMaxBatch);
  spec.model_file = testing::EncoderModelFile(model);
  spec.inputs.push_back(TensorSpec{"MASK__1", DataType::kBool, {-1}});
  return spec;
}

std::size_t CountAttention(const plan::Plan& plan) {
  std::size_t count = 0;
  for (const plan::Op& op : plan.ops()) count += std::holds_alternative<plan::AttentionOp>(op);
  return count;
}

TEST(KeyPaddingWrapperTest, ScriptedWrapperLowersWithItsMaskInputRecorded) {
  const ModelSpec spec = MaskedSpec();
  LoadedModel loaded = LoadOk(spec);
  ASSERT_NE(loaded.plan, nullptr) << loaded.lowering_report;
  ASSERT_TRUE(loaded.token_layout.has_value());
  EXPECT_EQ(loaded.token_layout->mask_input, std::optional<std::size_t>(1));
  EXPECT_EQ(loaded.plan->input_kind(), plan::InputKind::kTokens);
  EXPECT_EQ(CountAttention(*loaded.plan), 1u);
  EXPECT_NE(loaded.lowering_report.find("key-padding mask: input 'MASK__1'"), std::string::npos)
      << loaded.lowering_report;
  ExpectWeightsAreModuleParameters(*loaded.plan, spec.model_file.string());
}

// Scripted, or traced: a trace records the encoder's mask handling as graph ops (bool mask ->
// additive -inf mask -> each layer's fused call), which the loader checks before lowering the
// same plan as scripting gives.
class WrapperWithBlocksTest : public ::testing::TestWithParam<std::string> {};

TEST_P(WrapperWithBlocksTest, LowersTheBlocksAndTheEncoderWithItsMaskInputRecorded) {
  const ModelSpec spec = MaskedSpec("enc_masked_wrapped_" + GetParam(), 37, 5);
  LoadedModel loaded = LoadOk(spec);
  ASSERT_NE(loaded.plan, nullptr) << loaded.lowering_report;
  ASSERT_TRUE(loaded.token_layout.has_value());
  EXPECT_EQ(loaded.token_layout->mask_input, std::optional<std::size_t>(1));
  EXPECT_EQ(loaded.plan->input_width(), 37);
  EXPECT_EQ(loaded.plan->output_width(), 5);
  EXPECT_EQ(CountAttention(*loaded.plan), 2u);
  ExpectWeightsAreModuleParameters(*loaded.plan, spec.model_file.string());
}

INSTANTIATE_TEST_SUITE_P(KeyPaddingWrapper, WrapperWithBlocksTest,
                         ::testing::Values("script", "trace"),
                         [](const auto& info) { return info.param; });

TEST(KeyPaddingWrapperTest, TracedWrapperAroundABareLayerFallsBackSayingWhy) {
  LoadedModel loaded = LoadOk(MaskedSpec("enc_masked_layer_trace"));
  EXPECT_EQ(loaded.plan, nullptr);
  EXPECT_NE(loaded.torchscript, nullptr);
  EXPECT_FALSE(loaded.token_layout.has_value());
  EXPECT_NE(loaded.lowering_report.find("'MASK__1' looks like a key-padding mask, but"),
            std::string::npos)
      << loaded.lowering_report;
  EXPECT_NE(loaded.lowering_report.find("traced TransformerEncoderLayer called with a mask"),
            std::string::npos)
      << loaded.lowering_report;
}

TEST(KeyPaddingWrapperTest, UnlowerableWrapperWithExecutionPathPlanIsAnError) {
  ModelSpec spec = MaskedSpec("enc_masked_layer_trace");
  spec.options.execution_path = PathChoice::kPlan;
  Result<LoadedModel> loaded = LoadTorchScriptModel(spec);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(loaded.status().message().find("key-padding mask"), std::string::npos);
}

// A trace through the nested-tensor fast path would answer other masks wrongly through
// TorchScript: the load fails, on every execution path, and says how to export instead.
TEST(KeyPaddingWrapperTest, TraceThroughNestedTensorsIsALoadErrorSayingHowToExport) {
  for (PathChoice path : {PathChoice::kAuto, PathChoice::kTorchScript}) {
    ModelSpec spec = MaskedSpec("enc_masked_nested_trace", 37, 5);
    spec.options.execution_path = path;
    Result<LoadedModel> loaded = LoadTorchScriptModel(spec);
    ASSERT_FALSE(loaded.ok()) << static_cast<int>(path);
    EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument) << static_cast<int>(path);
    const std::string& message = loaded.status().message();
    EXPECT_NE(message.find("aten::_nested_tensor_from_mask"), std::string::npos) << message;
    EXPECT_NE(message.find("enable_nested_tensor=False"), std::string::npos) << message;
  }
}

void ExpectMaskConfigError(const ModelSpec& spec, const std::string& declared) {
  Result<LoadedModel> loaded = LoadTorchScriptModel(spec);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  const std::string& message = loaded.status().message();
  EXPECT_NE(message.find("the second TYPE_BOOL with dims [ -1 ]"), std::string::npos) << message;
  EXPECT_NE(message.find(declared), std::string::npos) << message;
}

TEST(KeyPaddingWrapperTest, MaskDeclaredAsAnotherTypeIsALoadError) {
  ModelSpec spec = MaskedSpec();
  spec.inputs[1].dtype = DataType::kFp32;
  ExpectMaskConfigError(spec, "'MASK__1' FP32 with dims [-1]");
}

TEST(KeyPaddingWrapperTest, MaskDeclaredWithATokenDimIsALoadError) {
  ModelSpec spec = MaskedSpec();
  spec.inputs[1].dims = {-1, 1};
  ExpectMaskConfigError(spec, "'MASK__1' BOOL with dims [-1, 1]");
}

TEST(KeyPaddingWrapperTest, MaskMissingFromTheConfigIsALoadError) {
  ModelSpec spec = MaskedSpec();
  spec.inputs.pop_back();
  ExpectMaskConfigError(spec, "declares 1 input(s)");
}

TEST(KeyPaddingWrapperTest, ExecutionPathTorchScriptSkipsTheMaskChecks) {
  ModelSpec spec = MaskedSpec();
  spec.inputs[1].dtype = DataType::kFp32;
  spec.options.execution_path = PathChoice::kTorchScript;
  LoadedModel loaded = LoadOk(spec);
  EXPECT_EQ(loaded.plan, nullptr);
  EXPECT_FALSE(loaded.token_layout.has_value());
}

TEST(EncoderConfigTest, EncoderWithoutSequenceDimFallsBack) {
  ModelSpec spec = testing::MakeEncoderSpec(testing::FindEncoderModel("enc_post_relu"), "script");
  spec.inputs[0].dims = {64};
  spec.outputs[0].dims = {64};
  ExpectFallback(spec, "[batch, seq, d]");
}

TEST(EncoderConfigTest, EncoderWithoutBatchDimFallsBack) {
  ModelSpec spec = testing::MakeEncoderSpec(testing::FindEncoderModel("enc_post_relu"), "trace");
  spec.max_batch_size = 0;
  ExpectFallback(spec, "max_batch_size > 0");
}

TEST(EncoderConfigTest, BlockThatIsNotPerTokenFallsBack) {
  ModelSpec spec = testing::MakeSpec("enc_flattened", {-1, 64}, {-1, 64}, DataType::kFp32,
                                     testing::kEncoderMaxBatch);
  spec.model_file = testing::EncoderModelFile("enc_flattened");
  ExpectFallback(spec, "Flatten merges tokens");
}

TEST(EncoderConfigTest, ChainWithVariableSequenceDimFallsBack) {
  ExpectFallback(testing::MakeSpec("relu_script", {-1, testing::kOddIn}, {-1, testing::kOddIn}),
                 "only transformer encoders");
}

TEST(EncoderConfigTest, PerTokenWidthMismatchIsAnErrorNamingBoth) {
  for (const bool input_side : {true, false}) {
    ModelSpec spec = testing::MakeEncoderSpec(testing::FindEncoderModel("seq_wrapped"), "script");
    (input_side ? spec.inputs[0] : spec.outputs[0]).dims = {-1, 6};
    Result<LoadedModel> loaded = LoadTorchScriptModel(spec);
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
    const std::string& message = loaded.status().message();
    EXPECT_NE(message.find("per token"), std::string::npos) << message;
    EXPECT_NE(message.find(input_side ? "width is 37" : "width is 5"), std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace ltserve
