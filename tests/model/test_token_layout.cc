// The token layout decided once for a token model: which inputs carry tokens, which is the
// mask, the sequence limit and token budget with their fallbacks, and each output's token bytes.
#include <gtest/gtest.h>

#include "model/token_layout.h"

namespace ltserve {
namespace {

constexpr int kMaxBatch = 6;

// An encoder's config: tokens [batch, -1, 64] in, [batch, -1, 10] fp16 out.
ModelSpec EncoderSpec() {
  ModelSpec spec;
  spec.name = "encoder";
  spec.max_batch_size = kMaxBatch;
  spec.inputs = {TensorSpec{"INPUT__0", DataType::kFp32, {-1, 64}}};
  spec.outputs = {TensorSpec{"OUTPUT__0", DataType::kFp16, {-1, 10}}};
  return spec;
}

TEST(TokenLayout, EveryInputCarriesTokensWithoutAMask) {
  Result<TokenLayout> layout = MakeTokenLayout(EncoderSpec(), std::nullopt);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->token_inputs, std::vector<std::size_t>{0});
  EXPECT_EQ(layout->sequence_input, 0u);
  EXPECT_FALSE(layout->mask_input.has_value());
  EXPECT_EQ(layout->output_token_bytes, std::vector<std::size_t>{10 * 2});
}

TEST(TokenLayout, TokensPerBatchAndSequenceLimitComeFromTheConfig) {
  ModelSpec spec = EncoderSpec();
  EXPECT_EQ(MakeTokenLayout(spec, std::nullopt)->max_sequence_length, kDefaultMaxSequenceLength);
  EXPECT_EQ(MakeTokenLayout(spec, std::nullopt)->max_batch_tokens,
            kMaxBatch * kDefaultMaxSequenceLength);
  spec.options.max_sequence_length = 100;
  EXPECT_EQ(MakeTokenLayout(spec, std::nullopt)->max_batch_tokens, kMaxBatch * 100);
  spec.options.max_tokens_per_batch = 300;
  EXPECT_EQ(MakeTokenLayout(spec, std::nullopt)->max_batch_tokens, 300);
  EXPECT_EQ(MakeTokenLayout(spec, std::nullopt)->max_sequence_length, 100);
  spec.options.max_sequence_length.reset();
  spec.options.max_tokens_per_batch.reset();
  spec.inputs[0].dims[0] = 9;  // a fixed sequence length
  EXPECT_EQ(MakeTokenLayout(spec, std::nullopt)->max_sequence_length, 9);
  EXPECT_EQ(MakeTokenLayout(spec, std::nullopt)->max_batch_tokens, kMaxBatch * 9);
}

TEST(TokenLayout, AMaskInputIsNoTokenInputAndTheSequenceComesFromTheFirstTokenInput) {
  ModelSpec spec = EncoderSpec();
  spec.inputs.insert(spec.inputs.begin(), TensorSpec{"MASK", DataType::kBool, {-1}});
  spec.inputs.push_back(TensorSpec{"EXTRA", DataType::kFp32, {12, 8}});
  Result<TokenLayout> layout = MakeTokenLayout(spec, 0);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->mask_input, std::optional<std::size_t>(0));
  EXPECT_EQ(layout->token_inputs, (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(layout->sequence_input, 1u);
  // The sequence limit comes from the sequence input's dims (variable here), not the mask's.
  EXPECT_EQ(layout->max_sequence_length, kDefaultMaxSequenceLength);
  const std::vector<TensorSpec> executor_inputs = ExecutorInputs(spec, *layout);
  ASSERT_EQ(executor_inputs.size(), 2u);
  EXPECT_EQ(executor_inputs[0].name, "INPUT__0");
  EXPECT_EQ(executor_inputs[1].name, "EXTRA");
  EXPECT_EQ(ExecutorInputs(spec, std::nullopt).size(), 3u);
}

TEST(TokenLayout, ConfigsThatCannotDescribeATokenModelAreInvalidArgument) {
  ModelSpec no_batch = EncoderSpec();
  no_batch.max_batch_size = 0;
  EXPECT_EQ(MakeTokenLayout(no_batch, std::nullopt).status().code(), StatusCode::kInvalidArgument);
  ModelSpec only_mask = EncoderSpec();
  EXPECT_EQ(MakeTokenLayout(only_mask, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeTokenLayout(only_mask, 5).status().code(), StatusCode::kInvalidArgument);
  ModelSpec no_width = EncoderSpec();
  no_width.outputs[0].dims = {-1, -1};
  Result<TokenLayout> layout = MakeTokenLayout(no_width, std::nullopt);
  ASSERT_FALSE(layout.ok());
  EXPECT_NE(layout.status().message().find("OUTPUT__0"), std::string::npos);
}


// A Hugging Face encoder's config: ids, attention mask, token types; one pooled vector out.
ModelSpec TokenIdSpec() {
  ModelSpec spec;
  spec.name = "bert";
  spec.max_batch_size = kMaxBatch;
  spec.inputs = {TensorSpec{"input_ids", DataType::kInt64, {-1}},
                 TensorSpec{"attention_mask", DataType::kInt64, {-1}},
                 TensorSpec{"token_type_ids", DataType::kInt64, {-1}}};
  spec.outputs = {TensorSpec{"embedding", DataType::kFp32, {384}}};
  return spec;
}

TokenModelFacts TokenIdFacts() {
  TokenModelFacts facts;
  facts.mask_input = 1;
  facts.mask_kind = MaskKind::kAttention;
  TokenIds ids;
  ids.ids_input = 0;
  ids.type_input = 2;
  ids.vocab_size = 30522;
  facts.ids = ids;
  facts.pooled = true;
  facts.max_positions = 512;
  return facts;
}

TEST(TokenLayout, ATokenIdModelsTokensAreItsIdsAndTypesAndItsLimitThePositionTable) {
  Result<TokenLayout> layout = MakeTokenLayout(TokenIdSpec(), TokenIdFacts());
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->token_inputs, (std::vector<std::size_t>{0, 2}));
  EXPECT_EQ(layout->sequence_input, 0u);
  EXPECT_EQ(layout->mask_input, 1u);
  EXPECT_EQ(layout->mask_kind, MaskKind::kAttention);
  EXPECT_TRUE(layout->pooled);
  EXPECT_EQ(layout->max_sequence_length, 512);
  EXPECT_EQ(layout->max_batch_tokens, kMaxBatch * 512);
  EXPECT_EQ(layout->output_token_bytes, std::vector<std::size_t>{384 * 4});
}

TEST(TokenLayout, AMaxSequenceLengthBeyondThePositionTableIsRefusedNamingBoth) {
  ModelSpec spec = TokenIdSpec();
  spec.options.max_sequence_length = 600;
  Result<TokenLayout> layout = MakeTokenLayout(spec, TokenIdFacts());
  ASSERT_FALSE(layout.ok());
  EXPECT_EQ(layout.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(layout.status().message().find("600"), std::string::npos);
  EXPECT_NE(layout.status().message().find("512"), std::string::npos);
  spec.options.max_sequence_length = 128;
  EXPECT_EQ(MakeTokenLayout(spec, TokenIdFacts())->max_sequence_length, 128);
}

TEST(TokenLayout, APooledOutputHasOneDimAndATokenOutputTwo) {
  ModelSpec spec = TokenIdSpec();
  spec.outputs[0].dims = {-1, 384};
  EXPECT_EQ(MakeTokenLayout(spec, TokenIdFacts()).status().code(), StatusCode::kInvalidArgument);
  TokenModelFacts tokens = TokenIdFacts();
  tokens.pooled = false;
  EXPECT_TRUE(MakeTokenLayout(spec, tokens).ok());
}

}  // namespace
}  // namespace ltserve
