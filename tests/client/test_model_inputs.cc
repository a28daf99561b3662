// Shapes from model metadata, random and file contents, whole requests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "fake_server.h"
#include "model_inputs.h"

namespace ltserve::client {
namespace {

inference::ModelMetadataResponse Metadata() {
  inference::ModelMetadataResponse m;
  m.set_name("enc");
  auto* tokens = m.add_inputs();
  tokens->set_name("TOKENS");
  tokens->set_datatype("BF16");
  for (auto d : {-1, -1, 64}) tokens->add_shape(d);  // batch, variable sequence, width
  auto* mask = m.add_inputs();
  mask->set_name("MASK");
  mask->set_datatype("INT64");
  for (auto d : {-1, 7}) mask->add_shape(d);
  return m;
}

TEST(ResolveInputs, FillsBatchAndOverriddenDimensions) {
  auto specs = ResolveInputs(Metadata(), 16, 5, {{"TOKENS", {9, 64}}});
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[0].name, "TOKENS");
  EXPECT_EQ((*specs)[0].type, DataType::kBf16);
  EXPECT_EQ((*specs)[0].shape, (std::vector<std::int64_t>{5, 9, 64}));
  EXPECT_EQ((*specs)[1].shape, (std::vector<std::int64_t>{5, 7}));
}

TEST(ResolveInputs, ExplainsWhatIsMissingOrWrong) {
  const auto m = Metadata();
  auto variable = ResolveInputs(m, 16, 1);
  EXPECT_EQ(variable.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(variable.status().message().find("--shape TOKENS"), std::string::npos) << variable.status().message();
  EXPECT_EQ(ResolveInputs(m, 16, 17, {{"TOKENS", {1, 64}}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveInputs(m, 16, 0, {{"TOKENS", {1, 64}}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveInputs(m, 16, 1, {{"TOKENS", {64}}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveInputs(m, 16, 1, {{"NOPE", {1}}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveInputs(m, 0, 2, {{"TOKENS", {1, 1, 64}}}).status().code(), StatusCode::kInvalidArgument)
      << "a model without batching takes batch 1 only";
}

TEST(RandomContents, SizesAndRanges) {
  std::mt19937_64 rng(std::random_device{}());
  for (DataType type : {DataType::kFp32, DataType::kFp16, DataType::kBf16, DataType::kInt64, DataType::kBool,
                        DataType::kUint8, DataType::kFp64}) {
    const InputSpec spec{"x", type, {3, 13}};
    auto bytes = RandomContents(spec, rng);
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(bytes->size(), 39 * ElementSize(type)) << WireName(type);
  }
  auto floats = RandomContents({"x", DataType::kFp32, {1000}}, rng);
  ASSERT_TRUE(floats.ok());
  std::vector<float> values(1000);
  std::memcpy(values.data(), floats->data(), 4000);
  for (float v : values) ASSERT_TRUE(v >= -1.0f && v < 1.0f) << v;
  EXPECT_NE(values[0], values[1]);
}

TEST(RandomContents, AValueRangeBoundsIntegersBothEndsIncluded) {
  std::mt19937_64 rng(3);
  InputSpec ids{"input_ids", DataType::kInt64, {4, 256}, ValueRange{1000, 1003}};
  auto bytes = RandomContents(ids, rng);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  std::vector<std::int64_t> values(4 * 256);
  std::memcpy(values.data(), bytes->data(), bytes->size());
  EXPECT_EQ(*std::min_element(values.begin(), values.end()), 1000);
  EXPECT_EQ(*std::max_element(values.begin(), values.end()), 1003);
  InputSpec mask{"attention_mask", DataType::kBool, {2, 9}, ValueRange{1, 1}};
  auto ones = RandomContents(mask, rng);
  ASSERT_TRUE(ones.ok());
  EXPECT_EQ(*ones, std::string(18, '\1'));
}

TEST(ApplyValueRanges, RefusesUnknownFloatOrUnrepresentableInputs) {
  std::vector<InputSpec> specs{{"ids", DataType::kInt32, {1, 4}}, {"x", DataType::kFp32, {1, 4}},
                               {"small", DataType::kUint8, {1, 4}}};
  EXPECT_TRUE(ApplyValueRanges({{"ids", {0, 29}}}, &specs).ok());
  ASSERT_TRUE(specs[0].range.has_value());
  EXPECT_EQ(specs[0].range->max, 29);
  EXPECT_EQ(ApplyValueRanges({{"nope", {0, 1}}}, &specs).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyValueRanges({{"x", {0, 1}}}, &specs).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyValueRanges({{"small", {0, 256}}}, &specs).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyValueRanges({{"ids", {5, 4}}}, &specs).code(), StatusCode::kInvalidArgument);
}

TEST(FileContents, WholeTensorOrOneSampleRepeated) {
  const auto path = std::filesystem::temp_directory_path() / ("ltserve_input_" + std::to_string(::getpid()));
  std::mt19937 rng(std::random_device{}());
  std::vector<float> sample(6);
  for (auto& v : sample) v = static_cast<float>(rng());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(sample.data()), 24);

  auto one = FileContents({"x", DataType::kFp32, {1, 6}}, path.string());
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(*one, std::string(reinterpret_cast<const char*>(sample.data()), 24));
  auto repeated = FileContents({"x", DataType::kFp32, {3, 6}}, path.string());
  ASSERT_TRUE(repeated.ok());
  EXPECT_EQ(*repeated, *one + *one + *one);
  EXPECT_EQ(FileContents({"x", DataType::kFp32, {3, 5}}, path.string()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(FileContents({"x", DataType::kFp32, {1}}, "/nonexistent/input.bin").status().code(),
            StatusCode::kNotFound);
  std::filesystem::remove(path);
}

TEST(BuildRequest, RandomInputsAndUnknownFileNames) {
  std::mt19937_64 rng(std::random_device{}());
  const std::vector<InputSpec> specs = {{"A", DataType::kFp32, {2, 3}}, {"B", DataType::kInt32, {2}}};
  auto request = BuildRequest("m", specs, {}, rng);
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  ASSERT_EQ(request->proto().inputs_size(), 2);
  EXPECT_EQ(request->proto().raw_input_contents(0).size(), 24u);
  EXPECT_EQ(request->proto().raw_input_contents(1).size(), 8u);
  EXPECT_EQ(BuildRequest("m", specs, {{"C", "/tmp/x"}}, rng).status().code(), StatusCode::kInvalidArgument);
}

TEST(FetchMaxBatchSize, ReadsModelConfig) {
  auto server = testing::FakeInferenceServer::Start();
  ASSERT_NE(server, nullptr);
  ClientOptions options;
  options.channel.target = server->address();
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok());
  auto metadata = (*client)->ModelMetadata("double");
  ASSERT_TRUE(metadata.ok());
  auto max_batch = FetchMaxBatchSize(**client, "double", *metadata);
  ASSERT_TRUE(max_batch.ok()) << max_batch.status().ToString();
  EXPECT_EQ(*max_batch, 8);
  EXPECT_EQ(FetchMaxBatchSize(**client, "absent", *metadata).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace ltserve::client
