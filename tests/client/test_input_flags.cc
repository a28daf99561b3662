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

}  // namespace
}  // namespace ltserve::client
