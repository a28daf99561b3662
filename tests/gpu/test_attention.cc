// The attention kernels (server/gpu/attention.h) launched directly: batches of 500 short
// sequences and a few long ones, so that each block's grid-stride loop walks several work
// items and the sequences cross the 64-query items and 64- and 32-key tiles, against a
// double-precision reference of softmax(q·kᵀ/√d)·v per sequence and head, into poisoned outputs
// with a guard band; a rerun with the work items in the other order bit-equal; what the
// launcher refuses.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gpu/attention.h"
#include "gpu/attention_batch.h"
#include "reference.h"
#include "sixteen_bit.h"
#include "test_support.h"

namespace ltserve {
namespace {

using gpu::ElemType;
using testing::DeviceHalves;
using testing::FromBits;
using testing::kGuard;
using testing::kPoison;

// ‖out − ref‖ / ‖ref‖ bounds: P is rounded to the 16-bit type before P·V (as FlashAttention
// does), the output once more; measured errors are ~2–4e-3 (bf16) and ~2e-4 (fp16).
constexpr double kTolBf16 = 1e-2;
constexpr double kTolFp16 = 2e-3;

struct Case {
  std::int64_t heads, head_dim;
  ElemType type;
};

// Lengths: 500 short sequences (1–40 tokens, one item each: more items than the grid has
// blocks a head, so blocks loop), then sequences across the 64-query items and the tiles.
std::vector<std::int32_t> Lengths() {
  std::mt19937 rng(testing::Rng()());
  std::uniform_int_distribution<std::int32_t> short_length(1, 40);
  std::vector<std::int32_t> lengths;
  for (int i = 0; i < 500; ++i) lengths.push_back(short_length(rng));
  for (const std::int32_t l : {63, 64, 65, 127, 129, 200, 300}) lengths.push_back(l);
  std::shuffle(lengths.begin(), lengths.end(), rng);
  return lengths;
}

class AttentionLaunchTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionLaunchTest, MatchesTheReferenceOnManyItemsAndRerunsBitEqual) {
  SKIP_WITHOUT_GPU();
  const Case& c = GetParam();
  const std::string precision = c.type == ElemType::kBf16 ? "bf16" : "fp16";
  const std::vector<std::int32_t> lengths = Lengths();
  std::int64_t tokens = 0;
  for (const std::int32_t l : lengths) tokens += l;
  const std::int64_t width = c.heads * c.head_dim;

  // Inputs of scale 3 give scores of standard deviation ~3, so the running max moves between
  // tiles; rounded to the storage type first, as the kernel reads them.
  std::vector<float> qkv = testing::Random(static_cast<std::size_t>(tokens * 3 * width), 3.0f);
  for (float& v : qkv) v = testing::RoundTo(v, precision);
  testing::Builder b;
  const auto in = b.Value(3 * width);
  b.plan->SetInput(in, plan::InputKind::kTokens);
  b.plan->SetOutput(b.Attention(in, c.heads));
  ASSERT_TRUE(b.plan->Validate().ok());
  const std::vector<double> reference = testing::ReferenceForward(
      *b.plan, qkv, tokens, [&](float v) { return testing::RoundTo(v, precision); }, lengths);

  DeviceHalves input(qkv.size());
  input.Upload(testing::RoundToBits(qkv, c.type));
  // The work items as the executor describes a batch (attention_batch.h): the first sequence
  // first, then the last first (attention_last_sequence_first).
  std::vector<std::uint16_t> outputs[2];
  std::int32_t items[2] = {};
  for (int last_first = 0; last_first < 2; ++last_first) {
    auto batch = gpu::AttentionBatch::Create(tokens, 0, last_first == 1);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    ASSERT_TRUE(batch.value().Upload(lengths, nullptr).ok());
    const std::int32_t* work = batch.value().device();
    std::int32_t head[4] = {};  // the item count, then the first item: begin, length, query
    ASSERT_EQ(cudaMemcpy(head, work, sizeof(head), cudaMemcpyDeviceToHost), cudaSuccess);
    items[last_first] = head[0];
    const std::int32_t first_length = last_first == 1 ? lengths.back() : lengths.front();
    EXPECT_EQ(head[1], last_first == 1 ? tokens - first_length : 0);
    EXPECT_EQ(head[2], first_length);
    EXPECT_EQ(head[3], 0);
    DeviceHalves out(static_cast<std::size_t>(tokens * width) + kGuard);
    out.Poison();
    ASSERT_EQ(gpu::LaunchAttention(input.data(), out.data(), work, tokens, tokens, c.heads,
                                   c.head_dim, c.type, /*programmatic=*/false, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    outputs[last_first] = out.Download();
  }
  EXPECT_EQ(items[0], items[1]);
  std::vector<float> values(reference.size());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = FromBits(outputs[0][i], c.type);
  const double error = testing::RelativeError(values, reference);
  std::printf("%s %ldx%ld, %zu sequences, %ld tokens, %d items a head: relative error %.3g\n",
              precision.c_str(), static_cast<long>(c.heads), static_cast<long>(c.head_dim),
              lengths.size(), static_cast<long>(tokens), items[0], error);
  EXPECT_LE(error, c.type == ElemType::kBf16 ? kTolBf16 : kTolFp16);
  for (std::size_t i = reference.size(); i < outputs[0].size(); ++i) {
    ASSERT_EQ(outputs[0][i], kPoison) << "wrote past the output, at element " << i;
  }
  // No block depends on another's timing or on the order of the items: the same bits again,
  // guard band included.
  EXPECT_TRUE(outputs[0] == outputs[1]) << "the run with the last sequence first differs";
}

INSTANTIATE_TEST_SUITE_P(
    Gpu, AttentionLaunchTest,
    // The tensor-core kernel: BERT-base's 12 × 64, the wide heads' 32-key tiles (80 keeps 64),
    // narrow heads; the swizzled layout (16, 32, 64, 128) and the padded one (48, 80, 96);
    // fp32 and a head_dim off 16 take the CUDA-core kernel.
    ::testing::Values(Case{12, 64, ElemType::kBf16}, Case{3, 64, ElemType::kFp16},
                      Case{2, 128, ElemType::kFp16}, Case{3, 96, ElemType::kBf16},
                      Case{2, 80, ElemType::kFp16}, Case{4, 32, ElemType::kBf16},
                      Case{1, 16, ElemType::kBf16}, Case{3, 48, ElemType::kBf16},
                      Case{2, 72, ElemType::kBf16}),
    [](const auto& info) {
      return std::to_string(info.param.heads) + "x" + std::to_string(info.param.head_dim) +
             (info.param.type == ElemType::kBf16 ? "_bf16" : "_fp16");
    });

// A batch that fills a small work buffer exactly (one sequence of 1, 2 or 3 tokens, capacity
// the same): one key per query at one token, so the output is V itself; the grid must stay
// within the buffer, which compute-sanitizer memcheck checks (scripts/gpu.sh,
// SANITIZER_FILTER='*Attention*'). Against the double reference at 2 and 3 tokens.
TEST(AttentionLaunch, BatchesAtASmallBuffersCapacity) {
  SKIP_WITHOUT_GPU();
  constexpr std::int64_t kHeads = 2;
  constexpr std::int64_t kHeadDim = 64;
  constexpr std::int64_t kWidth = kHeads * kHeadDim;
  for (const std::int32_t tokens : {1, 2, 3}) {
    std::vector<float> qkv = testing::Random(static_cast<std::size_t>(tokens * 3 * kWidth), 3.0f);
    for (float& v : qkv) v = testing::RoundTo(v, "bf16");
    testing::Builder b;
    const auto in = b.Value(3 * kWidth);
    b.plan->SetInput(in, plan::InputKind::kTokens);
    b.plan->SetOutput(b.Attention(in, kHeads));
    ASSERT_TRUE(b.plan->Validate().ok());
    const std::vector<std::int32_t> lengths{tokens};
    const std::vector<double> reference = testing::ReferenceForward(
        *b.plan, qkv, tokens, [](float v) { return testing::RoundTo(v, "bf16"); }, lengths);

    DeviceHalves input(qkv.size());
    input.Upload(testing::RoundToBits(qkv, ElemType::kBf16));
    auto batch = gpu::AttentionBatch::Create(tokens);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    ASSERT_TRUE(batch.value().Upload(lengths, nullptr).ok());
    DeviceHalves out(static_cast<std::size_t>(tokens * kWidth) + kGuard);
    out.Poison();
    ASSERT_EQ(gpu::LaunchAttention(input.data(), out.data(), batch.value().device(), tokens,
                                   tokens, kHeads, kHeadDim, ElemType::kBf16, false, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<std::uint16_t> got = out.Download();
    std::vector<float> values(reference.size());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = FromBits(got[i], ElemType::kBf16);
    EXPECT_LE(testing::RelativeError(values, reference), kTolBf16) << tokens << " tokens";
    if (tokens == 1) {
      // One key: softmax weight 1, so each head's output is its V slice, bit for bit.
      for (std::int64_t i = 0; i < kWidth; ++i) {
        EXPECT_EQ(values[i], qkv[2 * kWidth + i]) << "element " << i;
      }
    }
    for (std::size_t i = reference.size(); i < got.size(); ++i) {
      ASSERT_EQ(got[i], kPoison) << "wrote past the output, at element " << i;
    }
  }
}

TEST(AttentionLaunch, RefusesWhatItCannotRun) {
  SKIP_WITHOUT_GPU();
  // A bucket past the work buffer's capacity; a head wider than the kernels hold.
  EXPECT_EQ(gpu::LaunchAttention(nullptr, nullptr, nullptr, 64, 65, 12, 64, ElemType::kBf16,
                                 false, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(gpu::LaunchAttention(nullptr, nullptr, nullptr, 64, 64, 1, 160, ElemType::kBf16,
                                 false, nullptr),
            cudaErrorInvalidValue);
  // An empty bucket launches nothing.
  EXPECT_EQ(gpu::LaunchAttention(nullptr, nullptr, nullptr, 64, 0, 12, 64, ElemType::kBf16,
                                 false, nullptr),
            cudaSuccess);
}

}  // namespace
}  // namespace ltserve
