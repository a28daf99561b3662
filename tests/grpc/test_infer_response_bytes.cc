// MoveInferResponseToBytes: the bytes it gives gRPC parse back into the very response, for
// outputs below and above the size that gets a slice of its own, empty ones (an output written
// to shared memory) and none at all; the response is left without its tensors.
#include <gtest/gtest.h>
#include <google/protobuf/util/message_differencer.h>

#include <random>
#include <string>
#include <vector>

#include "grpc/infer_response_bytes.h"

namespace ltserve {
namespace {

std::string RandomBytes(std::size_t size, std::mt19937& rng) {
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
  return bytes;
}

inference::ModelInferResponse Response(const std::vector<std::size_t>& sizes, std::mt19937& rng) {
  inference::ModelInferResponse response;
  response.set_model_name("encoder");
  response.set_model_version("3");
  response.set_id("request-17");
  (*response.mutable_parameters())["triton_final_response"].set_bool_param(true);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    auto* output = response.add_outputs();
    output->set_name("OUTPUT__" + std::to_string(i));
    output->set_datatype("FP32");
    output->add_shape(static_cast<std::int64_t>(sizes[i] / 4));
    if (sizes[i] == 0) {
      (*output->mutable_parameters())["shared_memory_region"].set_string_param("out");
    }
    response.add_raw_output_contents(RandomBytes(sizes[i], rng));
  }
  return response;
}

// The buffer's slices, joined: what gRPC writes.
std::string Wire(const grpc::ByteBuffer& bytes) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(bytes.Dump(&slices).ok());
  std::string wire;
  for (const grpc::Slice& slice : slices) {
    wire.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return wire;
}

inference::ModelInferResponse Parse(const grpc::ByteBuffer& bytes) {
  inference::ModelInferResponse parsed;
  EXPECT_TRUE(parsed.ParseFromString(Wire(bytes)));
  return parsed;
}

TEST(InferResponseBytes, ParseBackIntoTheSameResponse) {
  std::mt19937 rng(20261201);
  const std::vector<std::vector<std::size_t>> cases = {
      {}, {16}, {0}, {4095, 4096, 4097}, {3 * 768 * 4 * 128 + 4, 0, 12}, {1 << 20, 1 << 20}};
  for (const auto& sizes : cases) {
    const inference::ModelInferResponse original = Response(sizes, rng);
    inference::ModelInferResponse moved = original;
    grpc::ByteBuffer bytes;
    MoveInferResponseToBytes(&moved, &bytes);
    EXPECT_EQ(moved.raw_output_contents_size(), 0);
    std::string difference;
    google::protobuf::util::MessageDifferencer differencer;
    differencer.ReportDifferencesToString(&difference);
    EXPECT_TRUE(differencer.Compare(Parse(bytes), original))
        << sizes.size() << " outputs: " << difference;
    EXPECT_EQ(bytes.Length(), original.ByteSizeLong());
  }
}

TEST(InferResponseBytes, AStreamResponseCarriesTheSameResponse) {
  std::mt19937 rng(11);
  for (const auto& sizes : std::vector<std::vector<std::size_t>>{{}, {40}, {70000, 0, 5000}}) {
    const inference::ModelInferResponse original = Response(sizes, rng);
    inference::ModelInferResponse moved = original;
    grpc::ByteBuffer bytes;
    MoveStreamInferResponseToBytes(&moved, &bytes);
    inference::ModelStreamInferResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(Wire(bytes)));
    EXPECT_TRUE(parsed.error_message().empty());
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed.infer_response(), original))
        << sizes.size() << " outputs";
  }
}

TEST(InferResponseBytes, ReplacesWhatTheBufferHeld) {
  std::mt19937 rng(7);
  grpc::ByteBuffer bytes;
  inference::ModelInferResponse first = Response({8192}, rng);
  MoveInferResponseToBytes(&first, &bytes);
  const inference::ModelInferResponse second = Response({20}, rng);
  inference::ModelInferResponse moved = second;
  MoveInferResponseToBytes(&moved, &bytes);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(Parse(bytes), second));
}

}  // namespace
}  // namespace ltserve
