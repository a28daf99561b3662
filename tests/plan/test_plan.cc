// Plan::Validate is what every executor relies on: each rule it enforces, one test each, and
// the counts the benchmarks' floors are computed from.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plan/plan.h"

namespace ltserve::plan {
namespace {

LinearOp Linear(ValueId in, ValueId out, std::int64_t in_features, std::int64_t out_features) {
  LinearOp op;
  op.input = in;
  op.output = out;
  op.in_features = in_features;
  op.out_features = out_features;
  op.weight.assign(static_cast<std::size_t>(in_features * out_features), 0.5f);
  op.bias.assign(static_cast<std::size_t>(out_features), 0.25f);
  return op;
}

// x[7] -> linear -> h[5] -> relu -> y[5]
Plan TwoOpPlan() {
  Plan plan;
  const ValueId x = plan.AddValue("x", 7);
  const ValueId h = plan.AddValue("h", 5);
  const ValueId y = plan.AddValue("y", 5);
  plan.Append(Linear(x, h, 7, 5));
  plan.Append(ActivationOp{h, y, Activation::kRelu});
  plan.SetInput(x, InputKind::kRows);
  plan.SetOutput(y);
  return plan;
}

void ExpectInternal(const Plan& plan, const std::string& fragment) {
  const Status status = plan.Validate();
  ASSERT_FALSE(status.ok()) << "expected: " << fragment;
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

TEST(Plan, AWellFormedPlanValidatesAndReportsItsShape) {
  const Plan plan = TwoOpPlan();
  EXPECT_TRUE(plan.Validate().ok()) << plan.Validate().ToString();
  EXPECT_EQ(plan.input_width(), 7);
  EXPECT_EQ(plan.output_width(), 5);
  EXPECT_EQ(plan.Describe().rfind("rows in 7, out 5:", 0), 0u) << plan.Describe();
  EXPECT_DOUBLE_EQ(plan.FlopsPerRow(), 2.0 * 7 * 5);
  EXPECT_EQ(plan.WeightBytes(2), (7u * 5u + 5u) * 2u);
}

TEST(Plan, NoInputOrNoOpsIsRefused) {
  Plan empty;
  ExpectInternal(empty, "no input or output");
  Plan no_ops;
  const ValueId x = no_ops.AddValue("x", 3);
  no_ops.SetInput(x, InputKind::kRows);
  no_ops.SetOutput(x);
  ExpectInternal(no_ops, "no operations");
}

TEST(Plan, AnOpReferringToAMissingValueIsRefused) {
  Plan plan = TwoOpPlan();
  plan.Append(ActivationOp{42, 2, Activation::kTanh});
  ExpectInternal(plan, "refers to value 42");
}

TEST(Plan, ALinearWhoseWidthsOrWeightsDisagreeIsRefused) {
  Plan wrong_width = TwoOpPlan();
  wrong_width.Append(Linear(2, 1, 4, 5));  // y has width 5, not 4
  ExpectInternal(wrong_width, "linear input 'y' has width 5, expected 4");
  Plan short_weight = TwoOpPlan();
  LinearOp op = Linear(2, 1, 5, 5);
  op.weight.pop_back();
  short_weight.Append(op);
  ExpectInternal(short_weight, "weight has 24 elements, expected 25");
  Plan short_bias = TwoOpPlan();
  op = Linear(2, 1, 5, 5);
  op.bias.pop_back();
  short_bias.Append(op);
  ExpectInternal(short_bias, "bias size mismatch");
}

TEST(Plan, ALayerNormWithAffineOfTheWrongWidthIsRefused) {
  Plan plan = TwoOpPlan();
  LayerNormOp norm;
  norm.input = 2;
  norm.output = 1;
  norm.gamma.assign(4, 1.0f);
  plan.Append(norm);
  ExpectInternal(plan, "layernorm affine size mismatch");
}

TEST(Plan, AttentionNeedsATokenInputAndQkvThreeTimesItsWidth) {
  Plan rows;
  const ValueId qkv = rows.AddValue("qkv", 3 * 2 * 4);
  const ValueId out = rows.AddValue("attn", 2 * 4);
  rows.Append(AttentionOp{qkv, out, 2, 4});
  rows.SetInput(qkv, InputKind::kRows);
  rows.SetOutput(out);
  ExpectInternal(rows, "attention needs a token input");
  Plan tokens = rows;
  tokens.SetInput(qkv, InputKind::kTokens);
  EXPECT_TRUE(tokens.Validate().ok()) << tokens.Validate().ToString();
  Plan narrow = tokens;
  narrow.Append(AttentionOp{out, qkv, 2, 4});  // qkv of width 8 for d = 8
  ExpectInternal(narrow, "attention qkv 'attn' has width 8, expected 24");
}


// ids -> embedding e[8] -> qkv -> attention -> pool -> linear y[3]: a Hugging Face encoder's plan.
struct IdsPlan {
  Plan plan;
  ValueId embedded, qkv, attended, pooled, head;
};

IdsPlan TokenIdPlan() {
  IdsPlan p;
  p.embedded = p.plan.AddValue("e", 8);
  p.qkv = p.plan.AddValue("qkv", 24);
  p.attended = p.plan.AddValue("a", 8);
  p.pooled = p.plan.AddValue("pooled", 8);
  p.head = p.plan.AddValue("y", 3);
  EmbeddingOp embedding;
  embedding.output = p.embedded;
  embedding.vocab_size = 10;
  embedding.max_positions = 6;
  embedding.type_vocab_size = 2;
  embedding.word.assign(80, 0.1f);
  embedding.position.assign(48, 0.2f);
  embedding.token_type.assign(16, 0.3f);
  embedding.gamma.assign(8, 1.0f);
  embedding.beta.assign(8, 0.0f);
  p.plan.Append(embedding);
  p.plan.Append(Linear(p.embedded, p.qkv, 8, 24));
  p.plan.Append(AttentionOp{p.qkv, p.attended, 2, 4});
  p.plan.Append(PoolOp{p.attended, p.pooled, Pooling::kMean, 0.0f});
  p.plan.Append(Linear(p.pooled, p.head, 8, 3));
  p.plan.SetInput(p.embedded, InputKind::kTokenIds);
  p.plan.SetOutput(p.head);
  return p;
}

TEST(PlanValidate, ATokenIdPlanWithPoolingAndAHeadIsValid) {
  IdsPlan p = TokenIdPlan();
  EXPECT_TRUE(p.plan.Validate().ok()) << p.plan.Validate().ToString();
  EXPECT_TRUE(p.plan.output_per_sequence());
  EXPECT_EQ(p.plan.pool_index(), 3u);
  ASSERT_NE(p.plan.embedding(), nullptr);
  EXPECT_EQ(p.plan.embedding()->vocab_size, 10);
  EXPECT_NE(p.plan.Describe().find("mean pooling"), std::string::npos);
}

TEST(PlanValidate, AnEmbeddingIsOpZeroOfATokenIdPlanOnly) {
  IdsPlan p = TokenIdPlan();
  p.plan.SetInput(p.embedded, InputKind::kTokens);
  ExpectInternal(p.plan, "embedding");
}

TEST(PlanValidate, EmbeddingTablesMustMatchTheirSizes) {
  IdsPlan p = TokenIdPlan();
  Plan broken;
  for (const Value& value : p.plan.values()) broken.AddValue(value.name, value.width);
  for (const Op& op : p.plan.ops()) {
    Op copy = op;
    if (auto* embedding = std::get_if<EmbeddingOp>(&copy)) embedding->position.pop_back();
    broken.Append(copy);
  }
  broken.SetInput(p.embedded, InputKind::kTokenIds);
  broken.SetOutput(p.head);
  ExpectInternal(broken, "embedding table sizes");
}

TEST(PlanValidate, AttentionAfterThePoolingIsRefused) {
  IdsPlan p = TokenIdPlan();
  const ValueId qkv2 = p.plan.AddValue("qkv2", 24);
  const ValueId out = p.plan.AddValue("out", 8);
  p.plan.Append(Linear(p.pooled, qkv2, 8, 24));
  p.plan.Append(AttentionOp{qkv2, out, 2, 4});
  p.plan.SetOutput(out);
  ExpectInternal(p.plan, "attention needs a token input");
}

TEST(PlanValidate, AResidualAcrossThePoolingIsRefused) {
  IdsPlan p = TokenIdPlan();
  const ValueId sum = p.plan.AddValue("sum", 8);
  p.plan.Append(AddOp{p.pooled, p.attended, sum});  // a sequence row plus a token row
  p.plan.SetOutput(sum);
  ExpectInternal(p.plan, "across the pooling");
}

TEST(PlanValidate, ASecondPoolingIsRefused) {
  IdsPlan p = TokenIdPlan();
  const ValueId again = p.plan.AddValue("again", 3);
  p.plan.Append(PoolOp{p.head, again, Pooling::kMax, 0.0f});
  p.plan.SetOutput(again);
  ExpectInternal(p.plan, "once per plan");
}

TEST(PlanValidate, AnOutputReadBeforeThePoolingIsRefused) {
  IdsPlan p = TokenIdPlan();
  p.plan.SetOutput(p.attended);  // a token value of a plan whose rows end per sequence
  ExpectInternal(p.plan, "last row change");
}

TEST(PlanWeightBytes, EmbeddingTablesAreNotCountedAsBytesEveryForwardReads) {
  IdsPlan p = TokenIdPlan();
  // Two Linears (8x24+24, 8x3+3) and the embedding's norm (8 + 8); not its 144 table values.
  EXPECT_EQ(p.plan.WeightBytes(4), (8 * 24 + 24 + 8 * 3 + 3 + 16) * 4u);
}

}  // namespace
}  // namespace ltserve::plan
