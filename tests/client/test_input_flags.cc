// The --shape and --input-file flag values of ltserve-cli and ltserve-bench.
#include <gtest/gtest.h>

#include "input_flags.h"

namespace ltserve::client {
namespace {

TEST(ParseShapeFlags, NamesAndDimensions) {
  auto shapes = ParseShapeFlags({"TOKENS:37,64", "ns:in:put:5", "SCALAR:"});
  ASSERT_TRUE(shapes.ok()) << shapes.status().ToString();
  EXPECT_EQ(shapes->at("TOKENS"), (std::vector<std::int64_t>{37, 64}));
  EXPECT_EQ(shapes->at("ns:in:put"), (std::vector<std::int64_t>{5})) << "the last colon separates";
  EXPECT_TRUE(shapes->at("SCALAR").empty());
  for (const std::string bad : {"TOKENS", ":3", "T:3,x", "T:-1", "T:3,,4", "T:99999999999999999999"}) {
    EXPECT_EQ(ParseShapeFlags({bad}).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ParseInputFileFlags, BarePathNeedsASingleInput) {
  const std::vector<InputSpec> one = {{"X", DataType::kFp32, {1}}};
  const std::vector<InputSpec> two = {{"A", DataType::kFp32, {1}}, {"B", DataType::kFp32, {1}}};
  auto files = ParseInputFileFlags({"x.bin"}, one);
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->at("X"), "x.bin");
  auto named = ParseInputFileFlags({"A=a=1.bin", "B=b.bin"}, two);
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->at("A"), "a=1.bin");
  EXPECT_EQ(named->at("B"), "b.bin");
  EXPECT_EQ(ParseInputFileFlags({"x.bin"}, two).status().code(), StatusCode::kInvalidArgument);
}

TEST(ParseValueRangeFlags, NamesAndInclusiveBounds) {
  auto ranges = ParseValueRangeFlags({"input_ids=1000:30521", "attention_mask=1:1", "t=-3:-1"});
  ASSERT_TRUE(ranges.ok()) << ranges.status().ToString();
  EXPECT_EQ(ranges->at("input_ids").min, 1000);
  EXPECT_EQ(ranges->at("input_ids").max, 30521);
  EXPECT_EQ(ranges->at("attention_mask").min, 1);
  EXPECT_EQ(ranges->at("t").min, -3);
}

TEST(ParseValueRangeFlags, RefusesMalformedOrEmptyRanges) {
  for (const char* bad : {"ids", "ids=", "ids=5", "=1:2", "ids=2:1", "ids=a:b", "ids=1:2x", "ids=:3"}) {
    const auto ranges = ParseValueRangeFlags({bad});
    EXPECT_EQ(ranges.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace ltserve::client
