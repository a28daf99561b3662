// Request building and response decoding, against hand-built protobuf messages.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "common/float16.h"
#include "infer_data.h"

namespace ltserve::client {
namespace {

std::vector<float> RandomFloats(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> values(n);
  for (auto& v : values) v = dist(rng);
  return values;
}

std::string Bytes(const void* data, std::size_t size) {
  return std::string(static_cast<const char*>(data), size);
}

TEST(InferRequest, AddInputWritesRawContentsNameTypeAndShape) {
  std::mt19937 rng(std::random_device{}());
  const auto values = RandomFloats(3 * 37, rng);
  InferRequest request("m", "2");
  ASSERT_TRUE(request.AddInput<float>("x", {3, 37}, values).ok());
  const std::vector<std::int32_t> ids = {7, -1, 1 << 30};
  ASSERT_TRUE(request.AddInput<std::int32_t>("ids", {3}, ids).ok());
  request.RequestOutput("y");
  request.SetId("req-1");
  request.SetServerTimeoutMicros(1500);
  request.SetPriority(2);

  const auto& proto = request.proto();
  EXPECT_EQ(proto.model_name(), "m");
  EXPECT_EQ(proto.model_version(), "2");
  ASSERT_EQ(proto.inputs_size(), 2);
  EXPECT_EQ(proto.inputs(0).name(), "x");
  EXPECT_EQ(proto.inputs(0).datatype(), "FP32");
  EXPECT_EQ(std::vector<std::int64_t>(proto.inputs(0).shape().begin(), proto.inputs(0).shape().end()),
            (std::vector<std::int64_t>{3, 37}));
  EXPECT_EQ(proto.inputs(1).datatype(), "INT32");
  ASSERT_EQ(proto.raw_input_contents_size(), 2);
  EXPECT_EQ(proto.raw_input_contents(0), Bytes(values.data(), values.size() * 4));
  EXPECT_EQ(proto.raw_input_contents(1), Bytes(ids.data(), ids.size() * 4));
  ASSERT_EQ(proto.outputs_size(), 1);
  EXPECT_EQ(proto.outputs(0).name(), "y");
  EXPECT_EQ(proto.id(), "req-1");
  EXPECT_EQ(proto.parameters().at("timeout").int64_param(), 1500);
  EXPECT_EQ(proto.parameters().at("priority").int64_param(), 2);
}

TEST(InferRequest, HalfPrecisionInputsRoundWithinOneUlp) {
  std::mt19937 rng(std::random_device{}());
  const auto values = RandomFloats(129, rng);
  InferRequest request("m");
  ASSERT_TRUE(request.AddFloatInput("h", DataType::kFp16, {129}, values).ok());
  ASSERT_TRUE(request.AddFloatInput("b", DataType::kBf16, {1, 129}, values).ok());
  ASSERT_TRUE(request.AddFloatInput("d", DataType::kFp64, {129}, values).ok());
  const auto& proto = request.proto();
  EXPECT_EQ(proto.inputs(0).datatype(), "FP16");
  EXPECT_EQ(proto.inputs(1).datatype(), "BF16");
  ASSERT_EQ(proto.raw_input_contents(0).size(), 129u * 2);
  ASSERT_EQ(proto.raw_input_contents(1).size(), 129u * 2);
  ASSERT_EQ(proto.raw_input_contents(2).size(), 129u * 8);
  // Round-to-nearest keeps the error within half a unit in the last place: 2^-11 relative for
  // fp16 (10 mantissa bits), 2^-8 for bf16 (7 bits); values here are normal in both formats.
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint16_t h, b;
    double d;
    std::memcpy(&h, proto.raw_input_contents(0).data() + 2 * i, 2);
    std::memcpy(&b, proto.raw_input_contents(1).data() + 2 * i, 2);
    std::memcpy(&d, proto.raw_input_contents(2).data() + 8 * i, 8);
    const double ref = values[i];
    EXPECT_LE(std::abs(Fp16ToFloat(h) - ref), std::abs(ref) * std::ldexp(1.0, -11) + 1e-7) << i;
    EXPECT_LE(std::abs(Bf16ToFloat(b) - ref), std::abs(ref) * std::ldexp(1.0, -8) + 1e-7) << i;
    EXPECT_EQ(d, ref);
  }
}

TEST(InferRequest, RejectsBadInputs) {
  InferRequest request("m");
  const std::vector<float> six(6, 1.0f);
  EXPECT_EQ(request.AddInput<float>("x", {2, 4}, six).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(request.AddInput<float>("x", {-2, -3}, six).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(request.AddRawInput("x", DataType::kInvalid, {1}, "abcd").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(request.AddFloatInput("x", DataType::kInt32, {6}, six).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(request.proto().inputs_size(), 0) << "a refused input must leave the request untouched";
  ASSERT_TRUE(request.AddInput<float>("x", {2, 3}, six).ok());
  EXPECT_EQ(request.AddInput<float>("x", {6}, six).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(request.proto().raw_input_contents_size(), 1);
  EXPECT_EQ(ElementCount(std::vector<std::int64_t>{1LL << 40, 1LL << 40}).status().code(),
            StatusCode::kInvalidArgument);
}

inference::ModelInferResponse RawResponse(const std::string& type, std::vector<std::int64_t> shape,
                                          std::string bytes) {
  inference::ModelInferResponse response;
  auto* output = response.add_outputs();
  output->set_name("y");
  output->set_datatype(type);
  for (auto d : shape) output->add_shape(d);
  response.add_raw_output_contents(std::move(bytes));
  return response;
}

TEST(InferResult, CopiesRawOutputIntoPoisonedBuffer) {
  std::mt19937 rng(std::random_device{}());
  const auto values = RandomFloats(5 * 13, rng);
  auto result = InferResult::FromResponse(RawResponse("FP32", {5, 13}, Bytes(values.data(), values.size() * 4)));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->OutputNames(), std::vector<std::string>{"y"});
  std::vector<float> out(values.size(), std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(result->CopyOutput<float>("y", out).ok());
  EXPECT_EQ(out, values);
  auto view = result->Output("y");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->shape, (std::vector<std::int64_t>{5, 13}));
  EXPECT_EQ(view->element_count, 65);
}

TEST(InferResult, CopyRefusesWrongTypeSizeOrName) {
  const std::vector<float> values(4, 1.5f);
  auto result = InferResult::FromResponse(RawResponse("FP32", {4}, Bytes(values.data(), 16)));
  ASSERT_TRUE(result.ok());
  std::vector<double> wrong_type(4);
  EXPECT_EQ(result->CopyOutput<double>("y", wrong_type).code(), StatusCode::kInvalidArgument);
  std::vector<float> wrong_size(5);
  EXPECT_EQ(result->CopyOutput<float>("y", wrong_size).code(), StatusCode::kInvalidArgument);
  std::vector<float> right(4);
  EXPECT_EQ(result->CopyOutput<float>("z", right).code(), StatusCode::kNotFound);
}

TEST(InferResult, RejectsInconsistentResponses) {
  EXPECT_EQ(InferResult::FromResponse(RawResponse("FP32", {3}, std::string(8, '\0'))).status().code(),
            StatusCode::kInternal);
  EXPECT_EQ(InferResult::FromResponse(RawResponse("BYTES", {1}, "abc")).status().code(),
            StatusCode::kUnimplemented);
  auto extra = RawResponse("FP32", {1}, std::string(4, '\0'));
  extra.add_raw_output_contents(std::string(4, '\0'));
  EXPECT_EQ(InferResult::FromResponse(extra).status().code(), StatusCode::kInternal);
  auto negative = RawResponse("FP32", {-1}, "");
  EXPECT_EQ(InferResult::FromResponse(negative).status().code(), StatusCode::kInvalidArgument);
}

TEST(InferResult, DecodesTypedContents) {
  std::mt19937 rng(std::random_device{}());
  const auto values = RandomFloats(7, rng);
  inference::ModelInferResponse response;
  auto* f = response.add_outputs();
  f->set_name("f");
  f->set_datatype("FP32");
  f->add_shape(7);
  for (float v : values) f->mutable_contents()->add_fp32_contents(v);
  auto* i = response.add_outputs();
  i->set_name("i8");
  i->set_datatype("INT8");
  i->add_shape(3);
  for (int v : {-128, 5, 127}) i->mutable_contents()->add_int_contents(v);
  auto result = InferResult::FromResponse(response);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  std::vector<float> out(7, std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(result->CopyOutput<float>("f", out).ok());
  EXPECT_EQ(out, values);
  std::vector<std::int8_t> small(3, 0);
  ASSERT_TRUE(result->CopyOutput<std::int8_t>("i8", small).ok());
  EXPECT_EQ(small, (std::vector<std::int8_t>{-128, 5, 127}));
  auto as_float = result->OutputAsFloat("i8");
  ASSERT_TRUE(as_float.ok());
  EXPECT_EQ(*as_float, (std::vector<float>{-128.0f, 5.0f, 127.0f}));

  inference::ModelInferResponse half;
  auto* h = half.add_outputs();
  h->set_name("h");
  h->set_datatype("FP16");
  h->add_shape(1);
  EXPECT_EQ(InferResult::FromResponse(half).status().code(), StatusCode::kInvalidArgument)
      << "FP16 has no typed field, so a typed FP16 output cannot be read";
}

TEST(InferResult, WidensHalfPrecisionOutputs) {
  std::mt19937 rng(std::random_device{}());
  const auto values = RandomFloats(33, rng);
  std::string h(66, '\0'), b(66, '\0');
  for (std::size_t k = 0; k < values.size(); ++k) {
    const std::uint16_t hb = FloatToFp16(values[k]), bb = FloatToBf16(values[k]);
    std::memcpy(h.data() + 2 * k, &hb, 2);
    std::memcpy(b.data() + 2 * k, &bb, 2);
  }
  for (const auto& [type, bytes, ulp] : {std::tuple{"FP16", h, -11}, std::tuple{"BF16", b, -8}}) {
    auto result = InferResult::FromResponse(RawResponse(type, {3, 11}, bytes));
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    auto widened = result->OutputAsFloat("y");
    ASSERT_TRUE(widened.ok());
    ASSERT_EQ(widened->size(), values.size());
    for (std::size_t k = 0; k < values.size(); ++k) {
      EXPECT_LE(std::abs((*widened)[k] - values[k]), std::abs(values[k]) * std::ldexp(1.0, ulp) + 1e-7)
          << type << " " << k;
    }
  }
}

}  // namespace
}  // namespace ltserve::client
