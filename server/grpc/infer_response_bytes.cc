#include "grpc/infer_response_bytes.h"

#include <grpcpp/support/slice.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ltserve {
namespace {

// Length-delimited fields' tag bytes, (field << 3) | 2: ModelInferResponse.raw_output_contents
// (6) and ModelStreamInferResponse.infer_response (2).
constexpr std::uint8_t kRawOutputContentsTag = (6 << 3) | 2;
constexpr std::uint8_t kInferResponseTag = (2 << 3) | 2;

void AppendVarint(std::uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void DeleteString(void* text) { delete static_cast<std::string*>(text); }

// `prefix` goes before the message's bytes.
void MoveToBytes(std::string prefix, inference::ModelInferResponse* response,
                 grpc::ByteBuffer* out) {
  std::vector<std::string*> contents;
  contents.reserve(static_cast<std::size_t>(response->raw_output_contents_size()));
  for (std::string& bytes : *response->mutable_raw_output_contents()) {
    contents.push_back(new std::string(std::move(bytes)));
  }
  response->clear_raw_output_contents();
  std::string head = std::move(prefix);
  response->AppendToString(&head);
  // Each entry's tag and length go after the head (or after the previous entry's bytes); small
  // entries are copied into the same run rather than given a slice each.
  constexpr std::size_t kSliceFrom = 4096;
  std::vector<grpc::Slice> slices;
  for (std::string* bytes : contents) {
    head.push_back(static_cast<char>(kRawOutputContentsTag));
    AppendVarint(bytes->size(), &head);
    if (bytes->size() < kSliceFrom) {
      head.append(*bytes);
      delete bytes;
      continue;
    }
    slices.emplace_back(head);
    head.clear();
    slices.emplace_back(bytes->data(), bytes->size(), &DeleteString, bytes);
  }
  if (!head.empty() || slices.empty()) slices.emplace_back(head);
  grpc::ByteBuffer bytes(slices.data(), slices.size());
  out->Swap(&bytes);
}

}  // namespace

void MoveInferResponseToBytes(inference::ModelInferResponse* response, grpc::ByteBuffer* out) {
  MoveToBytes({}, response, out);
}

void MoveStreamInferResponseToBytes(inference::ModelInferResponse* response,
                                    grpc::ByteBuffer* out) {
  // The nested message's length is its size with the tensors: the entries are re-encoded as
  // protobuf encodes them, only placed last.
  std::string prefix(1, static_cast<char>(kInferResponseTag));
  AppendVarint(response->ByteSizeLong(), &prefix);
  MoveToBytes(std::move(prefix), response, out);
}

}  // namespace ltserve
