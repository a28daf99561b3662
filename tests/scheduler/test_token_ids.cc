// Token-id models (a Hugging Face encoder): what the batcher stages for the executor (int32 ids,
// positions by the model's rule, token types, only the real tokens of an attention mask of any
// dtype) and what it refuses at Enqueue (ids or types outside their tables, mask values other
// than 0 and 1, a first token that is padding when the model pools it).
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include "scheduler/batch_data.h"
#include "scheduler/scheduler_checks.h"

namespace ltserve {
namespace {

constexpr std::int64_t kVocab = 50;
constexpr std::int64_t kTypes = 2;
constexpr std::int64_t kPaddingId = 1;

// Records what the batcher staged into its three int32 inputs.
class StagingInstance : public ExecutorInstance {
 public:
  Result<std::span<std::byte>> InputBuffer(std::size_t index, std::size_t bytes) override {
    if (index >= buffers_.size()) return InvalidArgument("no input " + std::to_string(index));
    buffers_[index].assign(bytes, std::byte{0xAB});  // poisoned: every byte must be written
    return std::span<std::byte>(buffers_[index]);
  }
  Status Execute(const BatchShape&, ExecuteTimings*) override { return Status::Ok(); }
  std::span<const std::byte> Output(std::size_t) const override { return {}; }
  std::vector<std::int64_t> OutputShape(std::size_t) const override { return {}; }

  std::vector<std::int32_t> Staged(std::size_t index) const {
    std::vector<std::int32_t> values(buffers_[index].size() / sizeof(std::int32_t));
    std::memcpy(values.data(), buffers_[index].data(), buffers_[index].size());
    return values;
  }

 private:
  std::array<std::vector<std::byte>, kTokenIdInputs> buffers_;
};

// Inputs: 0 ids (INT64), 1 attention mask, 2 token types (INT64).
SchedulerOptions Options(plan::PositionRule positions = plan::PositionRule::kColumn,
                         bool first_token_real = false) {
  TokenLayout layout;
  layout.token_inputs = {0, 2};
  layout.sequence_input = 0;
  layout.mask_input = 1;
  layout.mask_kind = MaskKind::kAttention;
  layout.max_sequence_length = 16;
  layout.max_batch_tokens = 64;
  layout.output_token_bytes = {4 * sizeof(float)};
  layout.pooled = true;
  TokenIds ids;
  ids.ids_input = 0;
  ids.type_input = 2;
  ids.vocab_size = kVocab;
  ids.type_vocab_size = kTypes;
  ids.positions = positions;
  ids.padding_id = kPaddingId;
  ids.first_token_real = first_token_real;
  layout.ids = ids;
  SchedulerOptions options;
  options.max_batch_size = 4;
  options.output_types = {DataType::kFp32};
  options.tokens = layout;
  return options;
}

template <typename T>
std::vector<std::byte> Bytes(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// A request whose tensors it owns.
struct OwnedRequest {
  std::vector<std::vector<std::byte>> data;
  InferenceRequest request;
};

template <typename Mask>
std::unique_ptr<OwnedRequest> Request(std::int64_t batch, std::int64_t seq,
                                      const std::vector<std::int64_t>& ids,
                                      const std::vector<Mask>& mask,
                                      const std::vector<std::int64_t>& types) {
  auto owned = std::make_unique<OwnedRequest>();
  owned->data = {Bytes(ids), Bytes(mask), Bytes(types)};
  for (const std::vector<std::byte>& tensor : owned->data) {
    owned->request.inputs.push_back(RequestInput{tensor, {batch, seq}, {}});
  }
  owned->request.batch_size = batch;
  owned->request.on_complete = [](const Status&, std::span<const OutputSlice>) {};
  return owned;
}

struct Staged {
  std::vector<std::int32_t> ids, positions, types, lengths;
};

Staged Stage(const SchedulerOptions& options, std::vector<InferenceRequest*> requests) {
  for (InferenceRequest* request : requests) {
    const Status valid = ValidateRequest(request, options);
    EXPECT_TRUE(valid.ok()) << valid.ToString();
  }
  StagingInstance instance;
  std::vector<const InferenceRequest*> batch(requests.begin(), requests.end());
  std::vector<std::int32_t> lengths;
  Result<BatchShape> shape = StageInputs(instance, batch, BatchLayout::kPackedSequences, &lengths,
                                         &*options.tokens);
  EXPECT_TRUE(shape.ok()) << shape.status().ToString();
  return Staged{instance.Staged(kIdsInput), instance.Staged(kPositionInput),
                instance.Staged(kTypeInput), lengths};
}

Status Validate(const SchedulerOptions& options, InferenceRequest& request) {
  return ValidateRequest(&request, options);
}

TEST(TokenIds, RealTokensAreStagedAsInt32WithColumnPositionsAndTheirTypes) {
  auto r = Request<std::int64_t>(2, 4, {5, 6, 7, 0, 8, 9, 10, 11}, {1, 1, 1, 0, 1, 0, 1, 1},
                                 {0, 0, 1, 0, 1, 1, 0, 0});
  const Staged staged = Stage(Options(), {&r->request});
  EXPECT_EQ(staged.lengths, (std::vector<std::int32_t>{3, 3}));
  EXPECT_EQ(staged.ids, (std::vector<std::int32_t>{5, 6, 7, 8, 10, 11}));
  // BERT's positions are columns: padding in the middle keeps the later tokens' columns.
  EXPECT_EQ(staged.positions, (std::vector<std::int32_t>{0, 1, 2, 0, 2, 3}));
  EXPECT_EQ(staged.types, (std::vector<std::int32_t>{0, 0, 1, 1, 0, 0}));
}

TEST(TokenIds, RobertaPositionsCountTheNonPaddingIdsAfterThePaddingIndex) {
  // create_position_ids_from_input_ids: padding_id + cumsum(id != padding_id).
  auto r = Request<std::int64_t>(1, 6, {5, kPaddingId, 6, 7, kPaddingId, 8},
                                 {1, 0, 1, 1, 0, 1}, {0, 0, 0, 0, 0, 0});
  const Staged staged = Stage(Options(plan::PositionRule::kAfterPadding), {&r->request});
  EXPECT_EQ(staged.ids, (std::vector<std::int32_t>{5, 6, 7, 8}));
  EXPECT_EQ(staged.positions, (std::vector<std::int32_t>{2, 3, 4, 5}));
}

TEST(TokenIds, MasksOfEveryDtypeSelectTheSameTokens) {
  auto wide = Request<std::int64_t>(1, 5, {2, 3, 4, 5, 6}, {1, 0, 1, 1, 0}, {0, 0, 0, 0, 0});
  auto narrow = Request<std::int32_t>(1, 5, {2, 3, 4, 5, 6}, {1, 0, 1, 1, 0}, {0, 0, 0, 0, 0});
  auto boolean = Request<std::uint8_t>(1, 5, {2, 3, 4, 5, 6}, {1, 0, 1, 1, 0}, {0, 0, 0, 0, 0});
  const Staged expected = Stage(Options(), {&wide->request});
  EXPECT_EQ(expected.ids, (std::vector<std::int32_t>{2, 4, 5}));
  for (OwnedRequest* other : {narrow.get(), boolean.get()}) {
    const Staged staged = Stage(Options(), {&other->request});
    EXPECT_EQ(staged.ids, expected.ids);
    EXPECT_EQ(staged.positions, expected.positions);
  }
}

TEST(TokenIds, RequestsOfDifferentLengthsPackBackToBack) {
  auto a = Request<std::int64_t>(1, 3, {2, 3, 4}, {1, 1, 1}, {0, 0, 0});
  auto b = Request<std::int64_t>(2, 2, {5, 6, 7, 8}, {1, 1, 1, 0}, {1, 1, 1, 1});
  const Staged staged = Stage(Options(), {&a->request, &b->request});
  EXPECT_EQ(staged.lengths, (std::vector<std::int32_t>{3, 2, 1}));
  EXPECT_EQ(staged.ids, (std::vector<std::int32_t>{2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(staged.positions, (std::vector<std::int32_t>{0, 1, 2, 0, 1, 0}));
  EXPECT_EQ(staged.types, (std::vector<std::int32_t>{0, 0, 0, 1, 1, 1}));
}

TEST(TokenIds, AnIdOutsideTheVocabularyIsInvalidArgumentNamingItAndTheRange) {
  for (std::int64_t bad : {kVocab, std::int64_t{-1}, std::int64_t{1} << 40}) {
    auto r = Request<std::int64_t>(1, 3, {2, bad, 4}, {1, 1, 1}, {0, 0, 0});
    const Status status = Validate(Options(), r->request);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find(std::to_string(bad)), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("[0, 50)"), std::string::npos) << status.message();
  }
}

TEST(TokenIds, AnIdUnderThePaddingIsCheckedToo) {
  // The executor never reads a padded id, but a client sending one outside the table has a bug.
  auto r = Request<std::int64_t>(1, 3, {2, kVocab + 3, 4}, {1, 0, 1}, {0, 0, 0});
  EXPECT_EQ(Validate(Options(), r->request).code(), StatusCode::kInvalidArgument);
}

TEST(TokenIds, ATokenTypeOutsideTheTableIsInvalidArgument) {
  auto r = Request<std::int64_t>(1, 3, {2, 3, 4}, {1, 1, 1}, {0, kTypes, 0});
  const Status status = Validate(Options(), r->request);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("token type"), std::string::npos) << status.message();
}

TEST(TokenIds, MaskValuesOtherThanZeroAndOneAreInvalidArgument) {
  auto r = Request<std::int32_t>(1, 3, {2, 3, 4}, {1, 2, 1}, {0, 0, 0});
  const Status status = Validate(Options(), r->request);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("0 or 1"), std::string::npos) << status.message();
}

TEST(TokenIds, FirstTokenPoolingRefusesARowThatStartsWithPadding) {
  auto r = Request<std::int64_t>(2, 3, {2, 3, 4, 5, 6, 7}, {1, 1, 1, 0, 1, 1}, {0, 0, 0, 0, 0, 0});
  const Status status = Validate(Options(plan::PositionRule::kColumn, true), r->request);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("row 1"), std::string::npos) << status.message();
  auto fine = Request<std::int64_t>(1, 3, {2, 3, 4}, {1, 1, 0}, {0, 0, 0});
  EXPECT_TRUE(Validate(Options(plan::PositionRule::kColumn, true), fine->request).ok());
}

TEST(TokenIds, AMaskOfAnotherShapeIsInvalidArgument) {
  auto r = Request<std::int64_t>(1, 3, {2, 3, 4}, {1, 1, 1}, {0, 0, 0});
  r->request.inputs[1].shape = {1, 2};
  EXPECT_EQ(Validate(Options(), r->request).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ltserve
