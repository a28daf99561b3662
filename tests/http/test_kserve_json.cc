// KServe v2 HTTP/REST encoding: every tensor datatype as JSON and as binary data, Triton's binary
// tensor layout both ways, and each malformed request refused with a message.
#include "http/kserve_json.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "model_config.pb.h"

namespace ltserve {
namespace {

using nlohmann::json;

template <typename T>
std::string Raw(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::string Bytes(const std::vector<std::string>& strings) {
  std::string out;
  for (const std::string& s : strings) {
    const auto length = static_cast<std::uint32_t>(s.size());
    out.append(reinterpret_cast<const char*>(&length), sizeof(length));
    out += s;
  }
  return out;
}

std::string OneInput(const std::string& datatype, const std::string& shape, const std::string& data) {
  return R"({"inputs":[{"name":"x","datatype":")" + datatype + R"(","shape":)" + shape +
         R"(,"data":)" + data + "}]}";
}

Result<HttpInferRequest> Parse(const std::string& body,
                               std::optional<std::size_t> header_length = std::nullopt) {
  return ParseInferRequest(body, header_length, "m", "");
}

void ExpectRefused(const std::string& body, const std::string& part,
                   std::optional<std::size_t> header_length = std::nullopt) {
  auto parsed = Parse(body, header_length);
  ASSERT_FALSE(parsed.ok()) << body;
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find(part), std::string::npos)
      << "'" << parsed.status().message() << "' lacks '" << part << "'";
}

struct JsonCase {
  const char* datatype;
  const char* data;
  std::string raw;
};

TEST(KServeJsonTest, ConvertsJsonDataOfEveryDatatypeToLittleEndianBytes) {
  const std::vector<JsonCase> cases = {
      {"BOOL", "[true,false,true]", std::string("\1\0\1", 3)},
      {"UINT8", "[0,7,255]", Raw<std::uint8_t>({0, 7, 255})},
      {"UINT16", "[0,7,65535]", Raw<std::uint16_t>({0, 7, 65535})},
      {"UINT32", "[0,7,4294967295]", Raw<std::uint32_t>({0, 7, 4294967295u})},
      {"UINT64", "[0,7,18446744073709551615]", Raw<std::uint64_t>({0, 7, UINT64_MAX})},
      {"INT8", "[-128,0,127]", Raw<std::int8_t>({-128, 0, 127})},
      {"INT16", "[-32768,0,32767]", Raw<std::int16_t>({-32768, 0, 32767})},
      {"INT32", "[-2147483648,0,2147483647]", Raw<std::int32_t>({INT32_MIN, 0, INT32_MAX})},
      {"INT64", "[-9223372036854775808,0,9223372036854775807]",
       Raw<std::int64_t>({INT64_MIN, 0, INT64_MAX})},
      {"FP32", "[0.5,-2,3]", Raw<float>({0.5f, -2.0f, 3.0f})},
      {"FP64", "[0.1,-2,1e300]", Raw<double>({0.1, -2.0, 1e300})},
      {"BYTES", R"(["a","","h\u00e9"])", Bytes({"a", "", "h\xc3\xa9"})},
  };
  for (const JsonCase& c : cases) {
    auto parsed = Parse(OneInput(c.datatype, "[3]", c.data));
    ASSERT_TRUE(parsed.ok()) << c.datatype << ": " << parsed.status().ToString();
    const inference::ModelInferRequest& message = *parsed->message;
    ASSERT_EQ(message.inputs_size(), 1);
    EXPECT_EQ(message.inputs(0).datatype(), c.datatype);
    ASSERT_EQ(message.raw_input_contents_size(), 1);
    EXPECT_EQ(message.raw_input_contents(0), c.raw) << c.datatype;
  }
}

TEST(KServeJsonTest, AcceptsDataNestedByDimension) {
  auto parsed = Parse(OneInput("INT32", "[2,2]", "[[1,2],[3,4]]"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->message->raw_input_contents(0), Raw<std::int32_t>({1, 2, 3, 4}));
  EXPECT_EQ(parsed->message->inputs(0).shape_size(), 2);
  EXPECT_EQ(parsed->message->model_name(), "m");
}

TEST(KServeJsonTest, RefusesJsonValuesOutsideTheirDatatype) {
  ExpectRefused(OneInput("INT8", "[1]", "[128]"), "element 0 of 'data' is an unsigned integer, expected an integer in [-128, 127]");
  ExpectRefused(OneInput("UINT8", "[1]", "[-1]"), "is a negative integer, expected a non-negative integer of at most 255");
  ExpectRefused(OneInput("UINT16", "[1]", "[65536]"), "at most 65535");
  ExpectRefused(OneInput("INT32", "[2]", "[1, 2.5]"), "element 1 of 'data' is a fraction, expected an integer in");
  ExpectRefused(OneInput("FP32", "[1]", R"(["1"])"), "expected a number");
  ExpectRefused(OneInput("BOOL", "[1]", "[1]"), "expected true or false");
  ExpectRefused(OneInput("BYTES", "[1]", "[1]"), "expected a string");
}

TEST(KServeJsonTest, RefusesHalfPrecisionAsJsonWithTritonsMessage) {
  ExpectRefused(OneInput("FP16", "[1]", "[1.0]"),
                "receiving FP16 data via JSON is not supported. Please use the binary data "
                "format for input x");
  ExpectRefused(OneInput("BF16", "[1]", "[1.0]"), "receiving BF16 data via JSON is not supported");
}

TEST(KServeJsonTest, RefusesDataThatDoesNotFillTheShape) {
  ExpectRefused(OneInput("FP32", "[2,3]", "[1,2,3,4,5]"), "has 5 elements in 'data', shape [2,3] needs 6");
  ExpectRefused(OneInput("FP32", "[-1]", "[1]"), "'shape' must hold non-negative integers");
  ExpectRefused(OneInput("FP32", "[9223372036854775807,4]", "[1]"), "too many elements");
}

TEST(KServeJsonTest, RefusesMalformedRequests) {
  ExpectRefused(R"({"inputs":[{"name":"x")", "failed to parse the request JSON");
  ExpectRefused("[1,2]", "must be an object");
  ExpectRefused(R"({"outputs":[]})", "needs 'inputs'");
  ExpectRefused(R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})", "input 0 has no 'name'");
  ExpectRefused(R"({"inputs":[{"name":7,"datatype":"FP32","shape":[1],"data":[1]}]})",
                "'name' must be a string");
  ExpectRefused(R"({"inputs":[{"name":"x","datatype":"FP32","data":[1]}]})", "needs 'shape'");
  ExpectRefused(OneInput("FLOAT", "[1]", "[1]"), "unknown datatype 'FLOAT'");
  ExpectRefused(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]})",
                "exactly one of 'data' and 'binary_data_size'");
  ExpectRefused(R"({"id":5,"inputs":[]})", "'id' must be a string");
  ExpectRefused(R"({"parameters":{"priority":[1]},"inputs":[]})", "parameter 'priority' must be a bool, number or string");
  ExpectRefused(R"({"parameters":{"binary_data_output":1},"inputs":[]})", "'binary_data_output' must be true or false");
  ExpectRefused(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],"parameters":{"shared_memory_region":"r"}}]})",
                "sets both shared_memory_region and 'data'");
  ExpectRefused(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":{"shared_memory_region":"r","binary_data_size":4}}]})",
                "sets both shared_memory_region and binary_data_size");
  ExpectRefused("", "no JSON header: the body is empty");
}

TEST(KServeJsonTest, InputInSharedMemoryCarriesItsParametersAndNoContents) {
  const std::string body =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"parameters":)"
      R"({"shared_memory_region":"r","shared_memory_byte_size":8,"shared_memory_offset":16}},)"
      R"({"name":"y","datatype":"FP32","shape":[1],"data":[1]}]})";
  auto parsed = ParseInferRequest(body, std::nullopt, "m", "", body.size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const auto& shm = parsed->message->inputs(0).parameters();
  EXPECT_EQ(shm.at("shared_memory_region").string_param(), "r");
  EXPECT_EQ(shm.at("shared_memory_byte_size").uint64_param(), 8u);
  EXPECT_EQ(shm.at("shared_memory_offset").uint64_param(), 16u);
  EXPECT_EQ(parsed->message->raw_input_contents_size(), 1);  // only y's
}

TEST(KServeJsonTest, RefusesAJsonHeaderOverItsLimitBeforeParsingIt) {
  const std::string body = OneInput("FP32", "[2]", "[1,2]");
  EXPECT_TRUE(ParseInferRequest(body, std::nullopt, "m", "", body.size()).ok());
  auto parsed = ParseInferRequest(body + "garbage", std::nullopt, "m", "", body.size());
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("send large tensors as binary data"), std::string::npos)
      << parsed.status().message();
  // Binary data after the header does not count against it.
  const std::string header =
      R"({"inputs":[{"name":"a","datatype":"UINT8","shape":[64],"parameters":{"binary_data_size":64}}]})";
  EXPECT_TRUE(ParseInferRequest(header + std::string(64, 'x'), header.size(), "m", "", header.size()).ok());
}

TEST(KServeJsonTest, RefusesJsonNestedTooDeep) {
  const std::string deep = std::string(200, '[') + "1" + std::string(200, ']');
  ExpectRefused(OneInput("FP32", "[1]", deep), "nested deeper than 64");
}

TEST(KServeJsonTest, TakesBinaryInputsInOrderAfterTheJsonHeader) {
  const std::string header =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},)"
      R"({"name":"b","datatype":"INT64","shape":[1],"data":[5]},)"
      R"({"name":"c","datatype":"UINT8","shape":[3],"parameters":{"binary_data_size":3}}]})";
  const std::string body = header + Raw<float>({1.5f, -1.0f}) + "\x01\x02\x03";
  auto parsed = Parse(body, header.size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const inference::ModelInferRequest& message = *parsed->message;
  ASSERT_EQ(message.raw_input_contents_size(), 3);
  EXPECT_EQ(message.raw_input_contents(0), Raw<float>({1.5f, -1.0f}));
  EXPECT_EQ(message.raw_input_contents(1), Raw<std::int64_t>({5}));
  EXPECT_EQ(message.raw_input_contents(2), "\x01\x02\x03");
}

TEST(KServeJsonTest, RefusesBinaryDataThatDoesNotMatchTheHeader) {
  const std::string header =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]})";
  ExpectRefused(header + "1234", "binary_data_size 8, but only 4 bytes", header.size());
  ExpectRefused(header + "123456789", "1 bytes of binary data follow", header.size());
  ExpectRefused(header + "12345678", "more than the", header.size() + 9);
  ExpectRefused(header + "12345678", "failed to parse the request JSON", header.size() - 1);
  // Without the header length, the binary data is read as JSON.
  ExpectRefused(header + "12345678", "failed to parse the request JSON");
  ExpectRefused(R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":-8}}]})",
                "'binary_data_size' must be a non-negative integer");
}

TEST(KServeJsonTest, CarriesRequestAndOutputParametersAndBinaryChoices) {
  auto parsed = Parse(
      R"({"id":"r1","parameters":{"priority":2,"timeout":-1,"binary_data_output":true,"tag":"t"},)"
      R"("inputs":[],"outputs":[{"name":"o1","parameters":{"classification":3}},)"
      R"({"name":"o2","parameters":{"binary_data":false}}]})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const inference::ModelInferRequest& message = *parsed->message;
  EXPECT_EQ(message.id(), "r1");
  EXPECT_EQ(message.parameters().at("priority").uint64_param(), 2u);
  EXPECT_EQ(message.parameters().at("timeout").int64_param(), -1);
  EXPECT_EQ(message.parameters().at("tag").string_param(), "t");
  EXPECT_EQ(message.parameters().count("binary_data_output"), 0u);
  EXPECT_TRUE(parsed->binary_by_default);
  ASSERT_EQ(message.outputs_size(), 2);
  EXPECT_EQ(message.outputs(0).parameters().at("classification").uint64_param(), 3u);
  EXPECT_EQ(parsed->binary_outputs.count("o1"), 0u);
  EXPECT_FALSE(parsed->binary_outputs.at("o2"));
}

inference::ModelConfig OneInputConfig(inference::DataType type, std::vector<std::int64_t> dims,
                                      int max_batch_size) {
  inference::ModelConfig config;
  config.set_name("m");
  config.set_max_batch_size(max_batch_size);
  auto* input = config.add_input();
  input->set_name("x");
  input->set_data_type(type);
  for (std::int64_t d : dims) input->add_dims(d);
  return config;
}

TEST(KServeJsonTest, ARawBinaryRequestIsTheOneInputWithItsShapeFromItsSize) {
  const std::string body = Raw<float>({1, 2, 3, 4, 5, 6, 7, 8});
  auto parsed = ParseRawBinaryRequest(body, OneInputConfig(inference::TYPE_FP32, {-1, 4}, 8), "m", "");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const auto& input = parsed->message->inputs(0);
  EXPECT_EQ(input.name(), "x");
  EXPECT_EQ(input.datatype(), "FP32");
  EXPECT_EQ(std::vector<std::int64_t>(input.shape().begin(), input.shape().end()),
            (std::vector<std::int64_t>{1, 2, 4}));
  EXPECT_EQ(parsed->message->raw_input_contents(0), body);
  EXPECT_TRUE(parsed->binary_by_default);

  auto unbatched = ParseRawBinaryRequest(body, OneInputConfig(inference::TYPE_INT32, {8}, 0), "m", "");
  ASSERT_TRUE(unbatched.ok()) << unbatched.status().ToString();
  EXPECT_EQ(unbatched->message->inputs(0).datatype(), "INT32");
  EXPECT_EQ(unbatched->message->inputs(0).shape_size(), 1);

  auto text = ParseRawBinaryRequest(Bytes({"hi"}), OneInputConfig(inference::TYPE_STRING, {1}, 4), "m", "");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text->message->inputs(0).datatype(), "BYTES");
  EXPECT_EQ(text->message->inputs(0).shape_size(), 2);
}

TEST(KServeJsonTest, RefusesARawBinaryRequestItCannotShape) {
  inference::ModelConfig two = OneInputConfig(inference::TYPE_FP32, {4}, 8);
  *two.add_input() = two.input(0);
  const std::string body = Raw<float>({1, 2, 3, 4});
  for (const auto& [config, part] : std::vector<std::pair<inference::ModelConfig, std::string>>{
           {two, "exactly one input; 'm' has 2"},
           {OneInputConfig(inference::TYPE_FP32, {-1, -1}, 8), "at most one variable dimension"},
           {OneInputConfig(inference::TYPE_FP64, {-1, 3}, 8), "not a whole number of elements"},
           {OneInputConfig(inference::TYPE_STRING, {2}, 8), "BYTES needs the input's shape to be [1]"}}) {
    auto parsed = ParseRawBinaryRequest(body, config, "m", "");
    ASSERT_FALSE(parsed.ok()) << part;
    EXPECT_NE(parsed.status().message().find(part), std::string::npos) << parsed.status().message();
  }
}

inference::ModelInferResponse Response(const std::string& datatype, std::vector<std::int64_t> shape,
                                       const std::string& raw) {
  inference::ModelInferResponse response;
  response.set_model_name("m");
  response.set_model_version("1");
  auto* output = response.add_outputs();
  output->set_name("o");
  output->set_datatype(datatype);
  for (std::int64_t d : shape) output->add_shape(d);
  response.add_raw_output_contents(raw);
  return response;
}

TEST(KServeJsonTest, WritesEveryDatatypeAsJsonData) {
  const std::vector<std::pair<JsonCase, std::string>> cases = {
      {{"BOOL", "", std::string("\1\0", 2)}, "[true,false]"},
      {{"UINT8", "", Raw<std::uint8_t>({0, 255})}, "[0,255]"},
      {{"UINT16", "", Raw<std::uint16_t>({0, 65535})}, "[0,65535]"},
      {{"UINT32", "", Raw<std::uint32_t>({0, 4294967295u})}, "[0,4294967295]"},
      {{"UINT64", "", Raw<std::uint64_t>({0, UINT64_MAX})}, "[0,18446744073709551615]"},
      {{"INT8", "", Raw<std::int8_t>({-128, 127})}, "[-128,127]"},
      {{"INT16", "", Raw<std::int16_t>({-32768, 32767})}, "[-32768,32767]"},
      {{"INT32", "", Raw<std::int32_t>({INT32_MIN, 1})}, "[-2147483648,1]"},
      {{"INT64", "", Raw<std::int64_t>({INT64_MIN, 1})}, "[-9223372036854775808,1]"},
      {{"FP32", "", Raw<float>({0.5f, -2.0f})}, "[0.5,-2.0]"},
      {{"FP64", "", Raw<double>({0.1, 1e300})}, "[0.1,1e+300]"},
      {{"BYTES", "", Bytes({"0.9:3", "x"})}, R"(["0.9:3","x"])"},
  };
  HttpInferRequest as_json;
  for (const auto& [c, expected] : cases) {
    auto written = WriteInferResponse(Response(c.datatype, {2}, c.raw), as_json);
    ASSERT_TRUE(written.ok()) << c.datatype << ": " << written.status().ToString();
    EXPECT_FALSE(written->header_length.has_value());
    const json body = json::parse(written->body);
    EXPECT_EQ(body["outputs"][0]["data"].dump(), expected) << c.datatype;
    EXPECT_EQ(body["outputs"][0]["datatype"], c.datatype);
    EXPECT_EQ(body["outputs"][0]["shape"].dump(), "[2]");
  }
}

TEST(KServeJsonTest, WritesBinaryOutputsAfterTheJsonInOrder) {
  inference::ModelInferResponse response = Response("FP32", {1, 2}, Raw<float>({1.0f, 2.0f}));
  response.set_id("r7");
  auto* second = response.add_outputs();
  second->set_name("p");
  second->set_datatype("FP16");
  second->add_shape(1);
  response.add_raw_output_contents(std::string("\x00\x3c", 2));
  auto* third = response.add_outputs();
  third->set_name("q");
  third->set_datatype("INT32");
  third->add_shape(1);
  response.add_raw_output_contents(Raw<std::int32_t>({9}));
  HttpInferRequest request;
  request.binary_by_default = true;
  request.binary_outputs["q"] = false;  // its own choice wins over the default
  auto written = WriteInferResponse(response, request);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  ASSERT_TRUE(written->header_length.has_value());
  const std::string header = written->body.substr(0, *written->header_length);
  const json body = json::parse(header);
  EXPECT_EQ(body["id"], "r7");
  EXPECT_EQ(body["model_name"], "m");
  EXPECT_EQ(body["model_version"], "1");
  EXPECT_EQ(body["outputs"][0]["parameters"]["binary_data_size"], 8);
  EXPECT_FALSE(body["outputs"][0].contains("data"));
  EXPECT_EQ(body["outputs"][1]["parameters"]["binary_data_size"], 2);
  EXPECT_EQ(body["outputs"][2]["data"].dump(), "[9]");
  EXPECT_EQ(written->body.substr(header.size()),
            Raw<float>({1.0f, 2.0f}) + std::string("\x00\x3c", 2));
}

TEST(KServeJsonTest, LeavesOutAnEmptyIdAndRefusesHalfPrecisionAsJsonOutput) {
  HttpInferRequest as_json;
  auto fp32 = WriteInferResponse(Response("FP32", {1}, Raw<float>({1.0f})), as_json);
  ASSERT_TRUE(fp32.ok());
  EXPECT_FALSE(json::parse(fp32->body).contains("id"));
  for (const char* datatype : {"FP16", "BF16"}) {
    auto written = WriteInferResponse(Response(datatype, {1}, std::string(2, '\0')), as_json);
    ASSERT_FALSE(written.ok()) << datatype;
    EXPECT_EQ(written.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(written.status().message(),
              std::string("sending ") + datatype +
                  " data via JSON is not supported. Please use the binary data format for output");
  }
}

TEST(KServeJsonTest, AnOutputWhoseBytesDoNotMatchItsShapeIsInternal) {
  HttpInferRequest as_json;
  for (const auto& response : {Response("FP32", {3}, Raw<float>({1.0f})),
                               Response("BYTES", {2}, Bytes({"only one"})),
                               Response("BYTES", {1}, std::string("\xff\0\0\0", 4))}) {
    auto written = WriteInferResponse(response, as_json);
    ASSERT_FALSE(written.ok());
    EXPECT_EQ(written.status().code(), StatusCode::kInternal);
  }
}

TEST(KServeJsonTest, WritesMessagesWithProtoNamesNumbersAndEnumNames) {
  inference::ModelConfig config;
  config.set_name("m");
  config.set_max_batch_size(8);
  auto* input = config.add_input();
  input->set_name("x");
  input->set_data_type(inference::TYPE_FP32);
  input->add_dims(-1);
  input->add_dims(4);
  (*config.mutable_parameters())["k"].set_string_value("v");
  const auto out = MessageToJson(config);
  EXPECT_EQ(out["name"], "m");
  EXPECT_EQ(out["max_batch_size"], 8);
  EXPECT_EQ(out["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(out["input"][0]["dims"].dump(), "[-1,4]");
  EXPECT_EQ(out["parameters"]["k"]["string_value"], "v");
  EXPECT_EQ(out["output"].dump(), "[]");
  EXPECT_FALSE(out.contains("dynamic_batching")) << "an unset message is left out";

  inference::ModelStatisticsResponse stats;
  stats.add_model_stats()->set_inference_count(UINT64_MAX);
  EXPECT_EQ(MessageToJson(stats)["model_stats"][0]["inference_count"].dump(),
            "18446744073709551615");
}

TEST(KServeJsonTest, ReadsAndWritesTritonsLogSettings) {
  auto parsed = ParseLogSettings(R"({"log_info":false,"log_verbose_level":2,"log_format":"ISO8601"})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_FALSE(parsed->settings().at("log_info").bool_param());
  EXPECT_EQ(parsed->settings().at("log_verbose_level").uint32_param(), 2u);
  EXPECT_EQ(parsed->settings().at("log_format").string_param(), "ISO8601");
  EXPECT_FALSE(ParseLogSettings(R"({"log_verbose_level":-1})").ok());
  EXPECT_FALSE(ParseLogSettings("{").ok());
  EXPECT_TRUE(ParseLogSettings("").ok());

  inference::LogSettingsResponse response;
  (*response.mutable_settings())["log_info"].set_bool_param(true);
  (*response.mutable_settings())["log_verbose_level"].set_uint32_param(1);
  EXPECT_EQ(LogSettingsToJson(response).dump(), R"({"log_info":true,"log_verbose_level":1})");
}

TEST(KServeJsonTest, ModelLoadBodyBecomesTypedRepositoryParameters) {
  auto parsed = ParseModelLoadRequest(
      R"({"parameters":{"config":"{\"max_batch_size\":2}","flag":true,"count":-3}})", "tiny_mlp");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->model_name(), "tiny_mlp");
  EXPECT_EQ(parsed->parameters().at("config").string_param(), R"({"max_batch_size":2})");
  EXPECT_TRUE(parsed->parameters().at("flag").bool_param());
  EXPECT_EQ(parsed->parameters().at("count").int64_param(), -3);
}

TEST(KServeJsonTest, EmptyControlBodiesNameOnlyTheModel) {
  auto load = ParseModelLoadRequest("", "m");
  ASSERT_TRUE(load.ok());
  EXPECT_EQ(load->model_name(), "m");
  EXPECT_TRUE(load->parameters().empty());
  auto unload = ParseModelUnloadRequest("{}", "m");
  ASSERT_TRUE(unload.ok());
  EXPECT_TRUE(unload->parameters().empty());
}

TEST(KServeJsonTest, ControlBodiesOfTheWrongShapeAreInvalidArgumentSayingWhy) {
  const std::pair<const char*, const char*> cases[] = {
      {"[1]", "the model unload JSON must be an object"},
      {R"({"parameters":[]})", "'parameters' in the model unload JSON must be an object"},
      {R"({"parameters":{"unload_dependents":1.5}})", "parameter 'unload_dependents' must be"},
      {"{", "model unload JSON"},
  };
  for (const auto& [body, expected] : cases) {
    auto parsed = ParseModelUnloadRequest(body, "m");
    ASSERT_FALSE(parsed.ok()) << body;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << body;
    EXPECT_NE(parsed.status().message().find(expected), std::string::npos)
        << body << ": " << parsed.status().message();
  }
}

}  // namespace
}  // namespace ltserve
