#include "common/status.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/data_type.h"
#include "common/float16.h"

namespace ltserve {
namespace {

Result<int> ParsePositive(int v) {
  if (v <= 0) return InvalidArgument("expected a positive number, got " + std::to_string(v));
  return v;
}

Status UsesMacros(int v, int* out) {
  LTSERVE_ASSIGN_OR_RETURN(*out, ParsePositive(v));
  LTSERVE_RETURN_IF_ERROR(ParsePositive(*out - 1).status());
  return Status::Ok();
}

TEST(Status, MacrosPropagateTheFirstError) {
  int out = 0;
  EXPECT_TRUE(UsesMacros(5, &out).ok());
  EXPECT_EQ(out, 5);
  Status s = UsesMacros(-3, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "expected a positive number, got -3");
  s = UsesMacros(1, &out);
  EXPECT_EQ(s.message(), "expected a positive number, got 0");
}

TEST(Status, ContextKeepsTheCode) {
  Status s = NotFound("no file").WithContext("model 'x': ");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NOT_FOUND: model 'x': no file");
  EXPECT_TRUE(Status::Ok().WithContext("ignored").ok());
}

TEST(DataType, WireNamesRoundTrip) {
  for (DataType t : {DataType::kBool, DataType::kUint8, DataType::kInt32, DataType::kInt64,
                     DataType::kFp16, DataType::kBf16, DataType::kFp32, DataType::kFp64}) {
    EXPECT_EQ(DataTypeFromWireName(WireName(t)), t);
    EXPECT_GT(ElementSize(t), 0u);
  }
  EXPECT_EQ(DataTypeFromWireName("FLOAT"), DataType::kInvalid);
  EXPECT_EQ(ElementSize(DataType::kBf16), 2u);
}

TEST(Float16, ConversionsRoundToNearestEven) {
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f)), 1.0f);
  // 1 + 2^-8 lies halfway between two bf16 values; ties go to the even one (1.0).
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(0.333251953125f)), 0.333251953125f);
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(65504.f)), 65504.f);
  EXPECT_TRUE(std::isinf(Fp16ToFloat(FloatToFp16(1e6f))));
}

}  // namespace
}  // namespace ltserve
