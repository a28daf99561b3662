// DecodeInferRequest: every way a ModelInferRequest can disagree with the model's config gets
// INVALID_ARGUMENT with a message naming what was expected; valid requests come out in config
// order, pointing at the message's bytes or at converted typed contents.
#include "grpc/request_decoder.h"
#include "grpc/classification.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace ltserve {
namespace {

ModelSpec TwoInputSpec() {
  ModelSpec spec;
  spec.name = "m";
  spec.max_batch_size = 8;
  spec.inputs = {{"a", DataType::kFp32, {3}}, {"b", DataType::kInt64, {-1, 2}}};
  spec.outputs = {{"y", DataType::kFp32, {4}}, {"z", DataType::kFp16, {1}}};
  return spec;
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

inference::ModelInferRequest ValidRequest(std::int64_t batch, std::int64_t var_dim) {
  inference::ModelInferRequest request;
  request.set_model_name("m");
  // Deliberately in the reverse of config order.
  auto* b = request.add_inputs();
  b->set_name("b");
  b->set_datatype("INT64");
  for (auto d : {batch, var_dim, std::int64_t{2}}) b->add_shape(d);
  auto* a = request.add_inputs();
  a->set_name("a");
  a->set_datatype("FP32");
  for (auto d : {batch, std::int64_t{3}}) a->add_shape(d);
  std::vector<std::int64_t> bv(static_cast<std::size_t>(batch * var_dim * 2));
  std::vector<float> av(static_cast<std::size_t>(batch * 3));
  std::mt19937 rng(std::random_device{}());
  for (auto& v : bv) v = static_cast<std::int64_t>(rng());
  for (auto& v : av) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  request.add_raw_input_contents(Bytes(bv));
  request.add_raw_input_contents(Bytes(av));
  return request;
}

void ExpectInvalid(const inference::ModelInferRequest& request, const std::string& fragment) {
  auto decoded = DecodeInferRequest(request, TwoInputSpec());
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(decoded.status().message().find(fragment), std::string::npos)
      << decoded.status().message() << " lacks " << fragment;
}

TEST(RequestDecoder, ValidRawRequestComesOutInConfigOrderWithoutCopies) {
  const auto request = ValidRequest(5, 7);
  auto decoded = DecodeInferRequest(request, TwoInputSpec());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const InferenceRequest& r = *(*decoded)->request;
  EXPECT_EQ(r.batch_size, 5);
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[0].shape, (std::vector<std::int64_t>{5, 3}));
  EXPECT_EQ(r.inputs[1].shape, (std::vector<std::int64_t>{5, 7, 2}));
  // Raw contents are used in place.
  EXPECT_EQ(static_cast<const void*>(r.inputs[0].bytes.data()),
            static_cast<const void*>(request.raw_input_contents(1).data()));
  EXPECT_EQ(r.inputs[1].bytes.size(), request.raw_input_contents(0).size());
  EXPECT_EQ((*decoded)->requested_outputs, (std::vector<int>{0, 1}));
}

TEST(RequestDecoder, TypedContentsAreConvertedToRawBytes) {
  inference::ModelInferRequest request;
  request.set_model_name("m");
  auto* a = request.add_inputs();
  a->set_name("a");
  a->set_datatype("FP32");
  a->add_shape(2);
  a->add_shape(3);
  std::vector<float> av = {1.5f, -2.f, 3.25f, 0.f, 1e-3f, 7.f};
  for (float v : av) a->mutable_contents()->add_fp32_contents(v);
  auto* b = request.add_inputs();
  b->set_name("b");
  b->set_datatype("INT64");
  for (auto d : {2, 1, 2}) b->add_shape(d);
  std::vector<std::int64_t> bv = {-1, 1LL << 40, 3, 4};
  for (auto v : bv) b->mutable_contents()->add_int64_contents(v);
  auto decoded = DecodeInferRequest(request, TwoInputSpec());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const auto& inputs = (*decoded)->request->inputs;
  ASSERT_EQ(inputs[0].bytes.size(), av.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(inputs[0].bytes.data(), av.data(), inputs[0].bytes.size()), 0);
  ASSERT_EQ(inputs[1].bytes.size(), bv.size() * sizeof(std::int64_t));
  EXPECT_EQ(std::memcmp(inputs[1].bytes.data(), bv.data(), inputs[1].bytes.size()), 0);
}

TEST(RequestDecoder, RequestedOutputsFollowTheRequestOrder) {
  auto request = ValidRequest(1, 1);
  request.add_outputs()->set_name("z");
  request.add_outputs()->set_name("y");
  auto decoded = DecodeInferRequest(request, TwoInputSpec());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ((*decoded)->requested_outputs, (std::vector<int>{1, 0}));
}

TEST(RequestDecoder, PriorityAndTimeoutParameters) {
  auto request = ValidRequest(1, 1);
  (*request.mutable_parameters())["priority"].set_int64_param(2);
  (*request.mutable_parameters())["timeout"].set_int64_param(1500);
  auto decoded = DecodeInferRequest(request, TwoInputSpec());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ((*decoded)->request->priority, 2u);
  EXPECT_EQ((*decoded)->request->timeout_us, 1500u);
}

TEST(RequestDecoder, UnknownInputNamesTheExpectedOnes) {
  auto request = ValidRequest(2, 1);
  request.mutable_inputs(0)->set_name("c");
  ExpectInvalid(request, "unknown input 'c'");
  ExpectInvalid(request, "'a', 'b'");
}

TEST(RequestDecoder, DuplicateInput) {
  auto request = ValidRequest(2, 1);
  request.mutable_inputs(1)->set_name("b");
  ExpectInvalid(request, "appears twice");
}

TEST(RequestDecoder, WrongInputCount) {
  auto request = ValidRequest(2, 1);
  request.mutable_inputs()->RemoveLast();
  request.mutable_raw_input_contents()->RemoveLast();
  ExpectInvalid(request, "expects 2 input(s)");
}

TEST(RequestDecoder, WrongDatatype) {
  auto request = ValidRequest(2, 1);
  request.mutable_inputs(1)->set_datatype("FP64");
  ExpectInvalid(request, "model expects FP32");
}

TEST(RequestDecoder, WrongFixedDimension) {
  auto request = ValidRequest(2, 1);
  request.mutable_inputs(1)->set_shape(1, 4);
  ExpectInvalid(request, "[-1, 3]");
}

TEST(RequestDecoder, WrongRank) {
  auto request = ValidRequest(2, 1);
  request.mutable_inputs(1)->mutable_shape()->RemoveLast();
  ExpectInvalid(request, "model expects [-1, 3]");
}

TEST(RequestDecoder, NegativeDimension) {
  auto request = ValidRequest(2, 1);
  request.mutable_inputs(0)->set_shape(1, -1);
  ExpectInvalid(request, "shape [2, -1, 2]");
}

TEST(RequestDecoder, BatchLargerThanMax) {
  ExpectInvalid(ValidRequest(9, 1), "max_batch_size 8");
}

TEST(RequestDecoder, InputsDisagreeOnBatch) {
  auto request = ValidRequest(2, 1);
  request.mutable_inputs(1)->set_shape(0, 3);
  ExpectInvalid(request, "disagree on the batch size");
}

TEST(RequestDecoder, RawByteCountMismatch) {
  auto request = ValidRequest(2, 1);
  request.mutable_raw_input_contents(1)->pop_back();
  ExpectInvalid(request, "needs 24");
}

TEST(RequestDecoder, RawContentsCountMismatch) {
  auto request = ValidRequest(2, 1);
  request.mutable_raw_input_contents()->RemoveLast();
  ExpectInvalid(request, "one entry per such input");
}

TEST(RequestDecoder, RawAndTypedMixed) {
  auto request = ValidRequest(2, 1);
  request.mutable_inputs(1)->mutable_contents()->add_fp32_contents(1.f);
  ExpectInvalid(request, "one or the other");
}

TEST(RequestDecoder, TypedCountMismatch) {
  inference::ModelInferRequest request = ValidRequest(1, 1);
  request.clear_raw_input_contents();
  request.mutable_inputs(1)->mutable_contents()->add_fp32_contents(1.f);
  request.mutable_inputs(0)->mutable_contents()->add_int64_contents(1);
  request.mutable_inputs(0)->mutable_contents()->add_int64_contents(1);
  ExpectInvalid(request, "1 values in contents, shape implies 3");
}

TEST(RequestDecoder, HalfPrecisionHasNoTypedContents) {
  ModelSpec spec;
  spec.name = "h";
  spec.max_batch_size = 4;
  spec.inputs = {{"x", DataType::kFp16, {2}}};
  spec.outputs = {{"y", DataType::kFp16, {2}}};
  inference::ModelInferRequest request;
  auto* x = request.add_inputs();
  x->set_name("x");
  x->set_datatype("FP16");
  x->add_shape(1);
  x->add_shape(2);
  x->mutable_contents()->add_fp32_contents(1.f);
  x->mutable_contents()->add_fp32_contents(2.f);
  auto decoded = DecodeInferRequest(request, spec);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("raw_input_contents"), std::string::npos);
}

TEST(RequestDecoder, MissingData) {
  auto request = ValidRequest(1, 1);
  request.clear_raw_input_contents();
  ExpectInvalid(request, "has no data");
}

TEST(RequestDecoder, UnknownOutput) {
  auto request = ValidRequest(1, 1);
  request.add_outputs()->set_name("w");
  ExpectInvalid(request, "unknown output 'w'");
}

TEST(RequestDecoder, AnOutputRequestedTwiceIsRefused) {
  auto request = ValidRequest(1, 1);
  request.add_outputs()->set_name("y");
  request.add_outputs()->set_name("z");
  request.add_outputs()->set_name("y");
  ExpectInvalid(request, "output 'y' is requested twice");
}

TEST(RequestDecoder, BadParameterTypes) {
  auto request = ValidRequest(1, 1);
  (*request.mutable_parameters())["priority"].set_string_param("high");
  ExpectInvalid(request, "'priority' must be an int64_param or uint64_param");
  request.mutable_parameters()->erase("priority");
  (*request.mutable_parameters())["timeout"].set_int64_param(-1);
  ExpectInvalid(request, "'timeout'");
}

// tritonclient's infer(priority=...) sends uint64_param; int64_param is read as before.
TEST(RequestDecoder, PriorityAndTimeoutAsUint64Parameters) {
  auto request = ValidRequest(1, 1);
  (*request.mutable_parameters())["priority"].set_uint64_param(3);
  (*request.mutable_parameters())["timeout"].set_uint64_param(2500);
  auto decoded = DecodeInferRequest(request, TwoInputSpec());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ((*decoded)->request->priority, 3u);
  EXPECT_EQ((*decoded)->request->timeout_us, 2500u);
}

TEST(RequestDecoder, OutOfRangePriorityAndTimeoutNameTheParameter) {
  auto request = ValidRequest(1, 1);
  // Once truncated to 32 bits silently; now refused.
  (*request.mutable_parameters())["priority"].set_uint64_param(std::uint64_t{1} << 32);
  ExpectInvalid(request, "parameter 'priority' must be an int64_param or uint64_param in [0, 4294967295], got 4294967296");
  (*request.mutable_parameters())["priority"].set_int64_param(-2);
  ExpectInvalid(request, "parameter 'priority' must be an int64_param or uint64_param in [0, 4294967295], got -2");
  request.mutable_parameters()->erase("priority");
  (*request.mutable_parameters())["timeout"].set_uint64_param(~std::uint64_t{0});
  ExpectInvalid(request, "parameter 'timeout' must be an int64_param or uint64_param in [0, 9223372036854775807]");
  (*request.mutable_parameters())["timeout"].set_double_param(1.5);
  ExpectInvalid(request, "parameter 'timeout' must be an int64_param or uint64_param");
}

TEST(RequestDecoder, ClassificationParameterIsReadPerOutput) {
  auto request = ValidRequest(1, 1);
  request.add_outputs()->set_name("z");
  auto* y = request.add_outputs();
  y->set_name("y");
  (*y->mutable_parameters())["classification"].set_int64_param(3);
  auto decoded = DecodeInferRequest(request, TwoInputSpec());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ((*decoded)->requested_outputs, (std::vector<int>{1, 0}));
  EXPECT_EQ((*decoded)->class_counts, (std::vector<std::uint32_t>{0, 3}));
}

TEST(RequestDecoder, AllOutputsByDefaultAreNotClassified) {
  auto decoded = DecodeInferRequest(ValidRequest(1, 1), TwoInputSpec());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ((*decoded)->class_counts, (std::vector<std::uint32_t>{0, 0}));
}

TEST(RequestDecoder, ClassificationErrors) {
  auto request = ValidRequest(1, 1);
  auto* y = request.add_outputs();
  y->set_name("y");
  auto& k = (*y->mutable_parameters())["classification"];
  k.set_int64_param(5);
  ExpectInvalid(request, "output 'y' has 4 classes (dims [4]); classification asks for 5");
  k.set_int64_param(0);
  ExpectInvalid(request, "parameter 'classification' of output 'y' must be at least 1");
  k.set_int64_param(-1);
  ExpectInvalid(request, "parameter 'classification' must be an int64_param or uint64_param");
  k.set_string_param("3");
  ExpectInvalid(request, "parameter 'classification' must be an int64_param or uint64_param");

  ModelSpec spec = TwoInputSpec();
  spec.outputs[1].dtype = DataType::kBool;
  request = ValidRequest(1, 1);
  auto* z = request.add_outputs();
  z->set_name("z");
  (*z->mutable_parameters())["classification"].set_int64_param(1);
  auto decoded = DecodeInferRequest(request, spec);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decoded.status().message(),
            "output 'z' is BOOL; classification needs a numeric output");
}

// A variable class dimension is checked once the output's shape is known (Classify).
TEST(RequestDecoder, ClassificationOfAVariableDimensionPassesTheDecoder) {
  ModelSpec spec = TwoInputSpec();
  spec.outputs[0].dims = {-1};
  auto request = ValidRequest(1, 1);
  auto* y = request.add_outputs();
  y->set_name("y");
  (*y->mutable_parameters())["classification"].set_uint64_param(100);
  EXPECT_TRUE(DecodeInferRequest(request, spec).ok());
}

std::vector<std::string> BytesElements(const std::string& bytes) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at + 4 <= bytes.size()) {
    std::uint32_t length = 0;
    std::memcpy(&length, bytes.data() + at, 4);
    out.push_back(bytes.substr(at + 4, length));
    at += 4 + length;
  }
  EXPECT_EQ(at, bytes.size());
  return out;
}

TEST(Classification, TopKPerBatchEntryAsValueColonIndex) {
  const std::vector<float> values = {0.1f, 0.7f, 0.2f, 0.7f,   // tie: lower index first
                                     5.f, -1.f, 3.f, 4.f};
  auto top = Classify(std::as_bytes(std::span(values)), DataType::kFp32, {2, 4}, true, 2, "y", {});
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_EQ(top->shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(BytesElements(top->bytes),
            (std::vector<std::string>{"0.700000:1", "0.700000:3", "5.000000:0", "4.000000:3"}));
}

TEST(Classification, LabelsAreAppendedAndAModelWithoutBatchGetsShapeK) {
  const std::vector<std::int32_t> values = {3, 9, 1};
  auto top = Classify(std::as_bytes(std::span(values)), DataType::kInt32, {3}, false, 3, "y",
                      {"cat", "dog"});
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_EQ(top->shape, (std::vector<std::int64_t>{3}));
  // Index 2 has no line in the label file: no label, as Triton answers.
  EXPECT_EQ(BytesElements(top->bytes), (std::vector<std::string>{"9:1:dog", "3:0:cat", "1:2"}));
}

TEST(Classification, HalfPrecisionValues) {
  const std::vector<std::uint16_t> fp16 = {0x3c00, 0xc000, 0x3800};  // 1, -2, 0.5
  auto top = Classify(std::as_bytes(std::span(fp16)), DataType::kFp16, {1, 3}, true, 1, "y", {});
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(BytesElements(top->bytes), (std::vector<std::string>{"1.000000:0"}));
  const std::vector<std::uint16_t> bf16 = {0x3f80, 0x4040};  // 1, 3
  top = Classify(std::as_bytes(std::span(bf16)), DataType::kBf16, {1, 2}, true, 1, "y", {});
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(BytesElements(top->bytes), (std::vector<std::string>{"3.000000:1"}));
}

TEST(Classification, MoreClassesThanTheOutputHasIsInvalid) {
  const std::vector<float> values(6, 1.f);
  auto top = Classify(std::as_bytes(std::span(values)), DataType::kFp32, {2, 3}, true, 4, "y", {});
  ASSERT_FALSE(top.ok());
  EXPECT_EQ(top.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(top.status().message(),
            "output 'y' has 3 classes per batch entry; classification asks for 4");
}

TEST(RequestDecoder, ModelWithoutBatchDimensionTakesTheExactShape) {
  ModelSpec spec;
  spec.name = "nb";
  spec.max_batch_size = 0;
  spec.inputs = {{"x", DataType::kFp32, {2, 3}}};
  spec.outputs = {{"y", DataType::kFp32, {3}}};
  inference::ModelInferRequest request;
  auto* x = request.add_inputs();
  x->set_name("x");
  x->set_datatype("FP32");
  x->add_shape(2);
  x->add_shape(3);
  request.add_raw_input_contents(Bytes(std::vector<float>(6, 1.f)));
  auto decoded = DecodeInferRequest(request, spec);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ((*decoded)->request->batch_size, 1);
  x->add_shape(1);
  EXPECT_FALSE(DecodeInferRequest(request, spec).ok());
}

// Input "a" named in a region; only "b" stays in raw_input_contents.
inference::ModelInferRequest RequestWithAInRegion(const std::string& region) {
  inference::ModelInferRequest request = ValidRequest(1, 1);
  auto& params = *request.mutable_inputs(1)->mutable_parameters();
  params["shared_memory_region"].set_string_param(region);
  params["shared_memory_byte_size"].set_int64_param(12);
  request.mutable_raw_input_contents()->RemoveLast();
  return request;
}

TEST(RequestDecoder, SharedMemoryWithoutARegistryIsRefused) {
  ExpectInvalid(RequestWithAInRegion("r"), "shared memory is not available on this endpoint");
}

TEST(RequestDecoder, RawContentsCountOnlyInputsOutsideSharedMemory) {
  inference::ModelInferRequest request = RequestWithAInRegion("r");
  request.add_raw_input_contents(std::string(12, '\0'));  // one entry too many
  ExpectInvalid(request, "request has 1 inputs not in shared memory but 2 raw_input_contents");
}

TEST(RequestDecoder, UnknownRegionIsRefusedWithItsName) {
  SharedMemoryRegistry registry;
  auto decoded = DecodeInferRequest(RequestWithAInRegion("r"), TwoInputSpec(), &registry);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().message(),
            "input 'a' names shared memory region 'r', which is not registered");
}

TEST(RequestDecoder, RegionWithoutByteSizeIsRefused) {
  inference::ModelInferRequest request = RequestWithAInRegion("r");
  request.mutable_inputs(1)->mutable_parameters()->erase("shared_memory_byte_size");
  ExpectInvalid(request, "without parameter 'shared_memory_byte_size'");
}

// A CUDA region stand-in: "device memory" that is host memory, so the test can see what the
// decoder leaves in place and what it copies through the host.
class FakeCudaRegion final : public SharedMemoryRegion {
 public:
  FakeCudaRegion(const std::string& name, std::int64_t device_id, std::size_t bytes)
      : SharedMemoryRegion(name, SharedMemoryKind::kCuda, bytes, "", 0, device_id), memory(bytes) {
    std::mt19937 rng(std::random_device{}());
    for (std::byte& b : memory) b = static_cast<std::byte>(rng());
  }
  std::byte* host_data() const override { return nullptr; }
  void* device_data() const override { return memory.data(); }
  Status CopyToHost(std::size_t offset, std::span<std::byte> destination) const override {
    ++copies_to_host;
    std::memcpy(destination.data(), memory.data() + offset, destination.size());
    return Status::Ok();
  }
  Status CopyFromHost(std::size_t, std::span<const std::byte>) const override {
    return Internal("the decoder never writes a region");
  }
  mutable std::vector<std::byte> memory;
  mutable int copies_to_host = 0;
};

// Input "a" (12 bytes) at offset 4 of region "gpu" and output "y" (4 floats a row) at
// offset 16, on GPU 0.
struct CudaRequest {
  CudaRequest() : region(std::make_shared<FakeCudaRegion>("gpu", 0, 64)) {
    EXPECT_TRUE(registry.Add(region).ok());
    message = RequestWithAInRegion("gpu");
    (*message.mutable_inputs(1)->mutable_parameters())["shared_memory_offset"].set_uint64_param(4);
    auto* y = message.add_outputs();
    y->set_name("y");
    auto& params = *y->mutable_parameters();
    params["shared_memory_region"].set_string_param("gpu");
    params["shared_memory_offset"].set_uint64_param(16);
    params["shared_memory_byte_size"].set_uint64_param(16);
  }
  std::shared_ptr<FakeCudaRegion> region;
  SharedMemoryRegistry registry;
  inference::ModelInferRequest message;
};

TEST(RequestDecoder, CudaRegionOnTheExecutorsGpuIsLeftInPlace) {
  CudaRequest cuda;
  auto decoded = DecodeInferRequest(cuda.message, TwoInputSpec(), &cuda.registry, /*direct_device=*/0);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const InferenceRequest& request = *(*decoded)->request;
  EXPECT_EQ(request.inputs[0].device.data, cuda.region->memory.data() + 4);
  EXPECT_EQ(request.inputs[0].device.bytes, 12u);
  EXPECT_TRUE(request.inputs[0].bytes.empty());
  EXPECT_EQ(request.inputs[0].size(), 12u);
  EXPECT_EQ(request.inputs[1].device.data, nullptr);  // "b" came in the message
  ASSERT_EQ(request.device_outputs.size(), 2u);       // one per output, config order
  EXPECT_EQ(request.device_outputs[0].data, cuda.region->memory.data() + 16);
  EXPECT_EQ(request.device_outputs[0].bytes, 16u);
  EXPECT_EQ(request.device_outputs[1].data, nullptr);
  EXPECT_EQ((*decoded)->output_on_device, std::vector<bool>{true});
  EXPECT_EQ(cuda.region->copies_to_host, 0);
}

TEST(RequestDecoder, CudaRegionOnAnotherGpuGoesThroughHostMemory) {
  for (std::optional<std::int64_t> direct : {std::optional<std::int64_t>(1), std::optional<std::int64_t>()}) {
    CudaRequest cuda;
    auto decoded = DecodeInferRequest(cuda.message, TwoInputSpec(), &cuda.registry, direct);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    const InferenceRequest& request = *(*decoded)->request;
    EXPECT_EQ(request.inputs[0].device.data, nullptr);
    ASSERT_EQ(request.inputs[0].bytes.size(), 12u);
    EXPECT_EQ(std::memcmp(request.inputs[0].bytes.data(), cuda.region->memory.data() + 4, 12), 0);
    EXPECT_TRUE(request.device_outputs.empty());
    EXPECT_EQ((*decoded)->output_on_device, std::vector<bool>{false});
    EXPECT_EQ(cuda.region->copies_to_host, 1);
  }
}

TEST(RequestDecoder, ClassificationIntoACudaRegionIsAnsweredFromHostMemory) {
  CudaRequest cuda;
  (*cuda.message.mutable_outputs(0)->mutable_parameters())["classification"].set_int64_param(2);
  auto decoded = DecodeInferRequest(cuda.message, TwoInputSpec(), &cuda.registry, 0);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_TRUE((*decoded)->request->device_outputs.empty());
  EXPECT_EQ((*decoded)->output_on_device, std::vector<bool>{false});
  EXPECT_NE((*decoded)->request->inputs[0].device.data, nullptr);  // the input still stays
}

TEST(RequestDecoder, CudaRegionsStillCheckTheirSize) {
  CudaRequest cuda;
  (*cuda.message.mutable_inputs(1)->mutable_parameters())["shared_memory_byte_size"].set_uint64_param(8);
  auto decoded = DecodeInferRequest(cuda.message, TwoInputSpec(), &cuda.registry, 0);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("has shared_memory_byte_size 8"), std::string::npos)
      << decoded.status().message();
  (*cuda.message.mutable_inputs(1)->mutable_parameters())["shared_memory_byte_size"].set_uint64_param(12);
  (*cuda.message.mutable_inputs(1)->mutable_parameters())["shared_memory_offset"].set_uint64_param(60);
  decoded = DecodeInferRequest(cuda.message, TwoInputSpec(), &cuda.registry, 0);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ltserve
