// ltserve-bench's mixed-length load: the --sequence-lengths range, the drawn lengths and the
// request pool built from them (bench_test.cc covers counting and reporting their tokens).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "sequence_lengths.h"

namespace ltserve::client {
namespace {

// An encoder's request shape [batch, seq, d] with an odd width, and a second fixed-size input.
inference::ModelMetadataResponse Encoder(std::initializer_list<std::int64_t> input0 = {-1, -1, 7}) {
  inference::ModelMetadataResponse m;
  m.set_name("enc");
  auto* tokens = m.add_inputs();
  tokens->set_name("INPUT__0");
  tokens->set_datatype("FP32");
  for (auto d : input0) tokens->add_shape(d);
  auto* extra = m.add_inputs();
  extra->set_name("EXTRA");
  extra->set_datatype("INT32");
  for (auto d : {-1, -1}) extra->add_shape(d);
  return m;
}

// A Hugging Face encoder's request: ids and a mask, both [batch, seq] INT64.
inference::ModelMetadataResponse TokenIdModel() {
  inference::ModelMetadataResponse m;
  m.set_name("bert");
  for (const char* name : {"input_ids", "attention_mask"}) {
    auto* input = m.add_inputs();
    input->set_name(name);
    input->set_datatype("INT64");
    for (auto d : {-1, -1}) input->add_shape(d);
  }
  return m;
}

TEST(BuildLengthPool, ATokenIdModelsMaskTakesTheLengthAndTheRangesBoundTheContents) {
  std::mt19937_64 rng(11);
  const std::map<std::string, ValueRange> ranges{{"input_ids", {1000, 30521}},
                                                 {"attention_mask", {1, 1}}};
  auto pool = BuildLengthPool(TokenIdModel(), 8, 2, {}, {}, {16, 512}, 20, rng, ranges);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  for (const PooledRequest& pooled : *pool) {
    const inference::ModelInferRequest& proto = pooled.request->proto();
    ASSERT_EQ(proto.inputs_size(), 2);
    const std::int64_t length = proto.inputs(0).shape(1);
    EXPECT_EQ(pooled.tokens, 2 * length);
    EXPECT_EQ(proto.inputs(1).shape(1), length) << "the mask shares the ids' sequence";
    std::vector<std::int64_t> ids(static_cast<std::size_t>(2 * length));
    std::vector<std::int64_t> mask(ids.size());
    std::memcpy(ids.data(), proto.raw_input_contents(0).data(), ids.size() * 8);
    std::memcpy(mask.data(), proto.raw_input_contents(1).data(), mask.size() * 8);
    for (std::int64_t id : ids) EXPECT_TRUE(id >= 1000 && id <= 30521) << id;
    for (std::int64_t m : mask) EXPECT_EQ(m, 1);
  }
}

TEST(ParseLengthRange, AcceptsMinColonMax) {
  auto range = ParseLengthRange("16:512");
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  EXPECT_EQ(range->min, 16);
  EXPECT_EQ(range->max, 512);
  auto single = ParseLengthRange("37:37");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->min, 37);
  EXPECT_EQ(single->max, 37);
}

TEST(ParseLengthRange, RefusesMalformedOrEmptyRanges) {
  for (const char* bad : {"16", "16:", ":512", "0:5", "-1:5", "10:5", "a:b", "1:2:3", " 1:5", "1:5x",
                          "1:99999999999999999999"}) {
    const auto range = ParseLengthRange(bad);
    ASSERT_FALSE(range.ok()) << bad;
    EXPECT_EQ(range.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(range.status().message().find("MIN:MAX"), std::string::npos) << range.status().ToString();
  }
}

TEST(DrawLengths, UniformOverTheWholeRange) {
  std::mt19937_64 rng(std::random_device{}());
  const LengthRange range{3, 9};
  const auto lengths = DrawLengths(range, 7000, rng);
  ASSERT_EQ(lengths.size(), 7000u);
  std::vector<int> counts(10, 0);
  for (const auto length : lengths) {
    ASSERT_GE(length, range.min);
    ASSERT_LE(length, range.max);
    ++counts[static_cast<std::size_t>(length)];
  }
  // 1000 expected per value; a binomial's standard deviation here is ~30, so 850..1150 fails
  // a correct draw with negligible probability.
  for (std::int64_t v = range.min; v <= range.max; ++v) {
    EXPECT_GT(counts[v], 850) << v;
    EXPECT_LT(counts[v], 1150) << v;
  }
}

TEST(DrawLengths, SameSeedSameLengths) {
  std::mt19937_64 a(1234), b(1234), c(1235);
  const auto first = DrawLengths({16, 512}, 50, a);
  EXPECT_EQ(first, DrawLengths({16, 512}, 50, b));
  EXPECT_NE(first, DrawLengths({16, 512}, 50, c));
}

TEST(SequenceDim, FindsTheOneVariableDimensionAfterTheBatch) {
  auto batched = SequenceDim(Encoder(), 8);
  ASSERT_TRUE(batched.ok()) << batched.status().ToString();
  EXPECT_EQ(*batched, 0u);
  auto unbatched = SequenceDim(Encoder({5, -1, 7}), 0);
  ASSERT_TRUE(unbatched.ok()) << unbatched.status().ToString();
  EXPECT_EQ(*unbatched, 1u);
}

TEST(SequenceDim, RefusesNoneOrSeveralVariableDimensions) {
  for (const auto& m : {Encoder({-1, 5, 7}), Encoder({-1, -1, -1})}) {
    const auto dim = SequenceDim(m, 8);
    ASSERT_FALSE(dim.ok());
    EXPECT_EQ(dim.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(dim.status().message().find("exactly one variable dimension"), std::string::npos)
        << dim.status().ToString();
  }
  inference::ModelMetadataResponse empty;
  EXPECT_EQ(SequenceDim(empty, 8).status().code(), StatusCode::kInvalidArgument);
}

TEST(ResolveWithLength, SetsInputZerosSequenceAndResolvesTheRest) {
  auto specs = ResolveWithLength(Encoder(), 8, 3, {{"EXTRA", {4}}}, 0, 11);
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[0].shape, (std::vector<std::int64_t>{3, 11, 7}));
  EXPECT_EQ((*specs)[1].shape, (std::vector<std::int64_t>{3, 4}));
}

TEST(ResolveWithLength, RefusesAShapeFlagForInputZero) {
  const auto specs = ResolveWithLength(Encoder(), 8, 1, {{"INPUT__0", {5, 7}}, {"EXTRA", {4}}}, 0, 11);
  ASSERT_FALSE(specs.ok());
  EXPECT_EQ(specs.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(specs.status().message().find("conflicts with --sequence-lengths"), std::string::npos)
      << specs.status().ToString();
}

TEST(BuildLengthPool, EachRequestCarriesItsDrawnLengthAndTokens) {
  constexpr int kBatch = 3;
  constexpr std::size_t kCount = 17;
  const LengthRange range{5, 13};
  const auto seed = std::random_device{}();
  std::mt19937_64 rng(seed), replay(seed);
  auto pool = BuildLengthPool(Encoder(), 8, kBatch, {{"EXTRA", {4}}}, {}, range, kCount, rng);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  ASSERT_EQ(pool->size(), kCount);
  // The lengths are the first draws of the seed's stream.
  const auto lengths = DrawLengths(range, kCount, replay);
  for (std::size_t i = 0; i < kCount; ++i) {
    const auto& proto = (*pool)[i].request->proto();
    ASSERT_EQ(proto.inputs_size(), 2);
    EXPECT_EQ(proto.model_name(), "enc");
    const auto& tokens = proto.inputs(0);
    EXPECT_EQ(tokens.name(), "INPUT__0");
    ASSERT_EQ(tokens.shape_size(), 3);
    EXPECT_EQ(tokens.shape(0), kBatch);
    EXPECT_EQ(tokens.shape(1), lengths[i]) << i;
    EXPECT_EQ(tokens.shape(2), 7);
    EXPECT_EQ(proto.raw_input_contents(0).size(), static_cast<std::size_t>(kBatch * lengths[i] * 7 * 4));
    EXPECT_EQ(proto.raw_input_contents(1).size(), static_cast<std::size_t>(kBatch * 4 * 4));
    EXPECT_EQ((*pool)[i].tokens, kBatch * lengths[i]) << i;
  }
}

TEST(BuildLengthPool, RefusesAFileForInputZero) {
  std::mt19937_64 rng(1);
  const auto pool = BuildLengthPool(Encoder(), 8, 1, {{"EXTRA", {4}}}, {{"INPUT__0", "x.bin"}}, {5, 9}, 4, rng);
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(pool.status().message().find("cannot come from a file"), std::string::npos)
      << pool.status().ToString();
}

TEST(BuildLengthPool, RefusesAnEmptyPool) {
  std::mt19937_64 rng(1);
  EXPECT_EQ(BuildLengthPool(Encoder(), 8, 1, {{"EXTRA", {4}}}, {}, {5, 9}, 0, rng).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ltserve::client
