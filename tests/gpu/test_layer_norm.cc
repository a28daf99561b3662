// The LayerNorm kernels (server/gpu/kernels.h) launched directly, both schedules of the vector
// kernel: against a double-precision reference of LayerNorm(x + residual)·gamma + beta in
// fp32, fp16 and bf16, at widths that fill the lanes' chunks and widths that leave lanes idle,
// at row counts below one warp a row and above what the streaming grid holds at once (so its
// warps walk several rows through their two-slot rings), into poisoned outputs with a guard
// band; the two schedules bit-equal to each other, in place and out of place; what the
// streaming launcher refuses.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "sixteen_bit.h"
#include "test_support.h"

namespace ltserve {
namespace {

using gpu::ElemType;
using gpu::LayerNormSchedule;
using testing::kGuard;
using testing::Random;

struct Problem {
  std::int64_t rows, width;
  bool residual, affine;
  float eps;
};

// Widths: BERT-base's 768 (3 chunks a lane in 16-bit storage), 1024 (4, the widest), 776
// (97 chunks: one lane of the fourth busy), 40 and 8 (a lane or a few, most idle); for fp32
// (4 elements a chunk) 512, 388 and 260. Rows: 1, odd counts inside one wave, and 9,001,
// more than the streaming grid's warps on an H200 (132 SMs × at most 7 blocks × 4 warps).
const Problem k16BitProblems[] = {
    {1, 768, true, true, 1e-12f},   {5, 1024, true, true, 1e-5f},  {127, 40, false, true, 1e-5f},
    {300, 776, true, false, 1e-5f}, {33, 8, false, false, 1e-5f}, {9001, 768, true, true, 1e-12f},
};
const Problem kFp32Problems[] = {
    {1, 512, true, true, 1e-12f},  {77, 388, false, true, 1e-5f},
    {300, 260, true, false, 1e-5f}, {9001, 512, true, true, 1e-5f},
};

std::size_t Size(ElemType type) { return type == ElemType::kFp32 ? 4 : 2; }

std::string TypeName(ElemType type) {
  if (type == ElemType::kFp32) return "fp32";
  return type == ElemType::kFp16 ? "fp16" : "bf16";
}

// `values` in the storage of `type`, as bytes.
std::vector<std::uint8_t> Encode(const std::vector<float>& values, ElemType type) {
  std::vector<std::uint8_t> bytes(values.size() * Size(type));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (type == ElemType::kFp32) {
      std::memcpy(&bytes[4 * i], &values[i], 4);
    } else {
      const std::uint16_t bits = testing::ToBits(values[i], type);
      std::memcpy(&bytes[2 * i], &bits, 2);
    }
  }
  return bytes;
}

float Decode(const std::vector<std::uint8_t>& bytes, std::size_t i, ElemType type) {
  if (type == ElemType::kFp32) {
    float v;
    std::memcpy(&v, &bytes[4 * i], 4);
    return v;
  }
  std::uint16_t bits;
  std::memcpy(&bits, &bytes[2 * i], 2);
  return testing::FromBits(bits, type);
}

// Device memory, owned; poisoned with 0xff bytes (NaN in all three types).
class DeviceBytes {
 public:
  explicit DeviceBytes(std::size_t bytes) : bytes_(bytes) {
    EXPECT_EQ(cudaMalloc(&data_, bytes), cudaSuccess);
  }
  ~DeviceBytes() { cudaFree(data_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void* data() const { return data_; }
  void Upload(const std::vector<std::uint8_t>& host) {
    ASSERT_LE(host.size(), bytes_);
    ASSERT_EQ(cudaMemcpy(data_, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  void Poison() { EXPECT_EQ(cudaMemset(data_, 0xff, bytes_), cudaSuccess); }
  std::vector<std::uint8_t> Download() const {
    std::vector<std::uint8_t> host(bytes_);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

// One problem's inputs in the storage type (gamma and beta fp32, as the plan keeps them) and
// the reference computed from those stored values in double precision.
struct Case {
  Problem p;
  ElemType type;
  std::vector<std::uint8_t> x, residual;
  std::vector<float> gamma, beta;
  std::vector<double> reference;

  Case(const Problem& problem, ElemType t) : p(problem), type(t) {
    const std::size_t count = static_cast<std::size_t>(p.rows * p.width);
    x = Encode(Random(count, 2.0f), type);
    if (p.residual) {
      // A large common offset: the case a one-pass variance gets wrong.
      std::vector<float> r = Random(count, 1.0f);
      for (float& v : r) v += 8.0f;
      residual = Encode(r, type);
    }
    if (p.affine) {
      gamma = Random(p.width, 1.0f);
      beta = Random(p.width, 0.5f);
    }
    reference.resize(count);
    for (std::int64_t m = 0; m < p.rows; ++m) {
      double* row = &reference[m * p.width];
      double sum = 0;
      for (std::int64_t c = 0; c < p.width; ++c) {
        const std::size_t i = m * p.width + c;
        row[c] = Decode(x, i, type) + (p.residual ? Decode(residual, i, type) : 0.0);
        sum += row[c];
      }
      const double mean = sum / static_cast<double>(p.width);
      double squares = 0;
      for (std::int64_t c = 0; c < p.width; ++c) squares += (row[c] - mean) * (row[c] - mean);
      const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(p.width) + p.eps);
      for (std::int64_t c = 0; c < p.width; ++c) {
        row[c] = (row[c] - mean) * rstd;
        if (p.affine) row[c] = row[c] * gamma[c] + beta[c];
      }
    }
  }

  std::string Name() const {
    return TypeName(type) + " " + std::to_string(p.rows) + "x" +
           std::to_string(p.width) + (p.residual ? " +residual" : "") + (p.affine ? " affine" : "");
  }
};

// The device side of a Case: inputs uploaded once, an output with a guard band of kGuard
// elements past the last row.
struct DeviceCase {
  DeviceBytes x, residual, out;
  DeviceBytes affine;  // gamma then beta
  explicit DeviceCase(const Case& c)
      : x(c.x.size()), residual(std::max<std::size_t>(c.residual.size(), 1)),
        out((static_cast<std::size_t>(c.p.rows * c.p.width) + kGuard) * Size(c.type)),
        affine(std::max<std::size_t>(2 * c.gamma.size() * sizeof(float), 1)) {
    x.Upload(c.x);
    if (c.p.residual) residual.Upload(c.residual);
    if (c.p.affine) {
      std::vector<std::uint8_t> bytes(2 * c.gamma.size() * sizeof(float));
      std::memcpy(bytes.data(), c.gamma.data(), c.gamma.size() * sizeof(float));
      std::memcpy(bytes.data() + c.gamma.size() * sizeof(float), c.beta.data(),
                  c.beta.size() * sizeof(float));
      affine.Upload(bytes);
    }
  }
  const float* gamma(const Case& c) const {
    return c.p.affine ? static_cast<const float*>(affine.data()) : nullptr;
  }
  const float* beta(const Case& c) const { return c.p.affine ? gamma(c) + c.p.width : nullptr; }

  // Poisons the output, runs `schedule` from x (+ residual) into it and returns it, guard band
  // included.
  std::vector<std::uint8_t> Run(const Case& c, LayerNormSchedule schedule, bool programmatic) {
    out.Poison();
    EXPECT_EQ(gpu::LaunchLayerNorm(x.data(), c.p.residual ? residual.data() : nullptr, gamma(c),
                                   beta(c), out.data(), c.p.rows, c.p.width, c.p.eps, c.type,
                                   programmatic, nullptr, schedule),
              cudaSuccess)
        << c.Name();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.Name();
    return out.Download();
  }
};

// Per element |out − ref| ≤ rel·|ref| + abs: one rounding to the storage type after fp32
// statistics (outputs are O(1) after the normalisation, gamma up to 1 and beta up to 0.5).
testing::Tolerance ToleranceFor(ElemType type) {
  if (type == ElemType::kBf16) return testing::kBf16Tolerance;
  if (type == ElemType::kFp16) return testing::kFp16Tolerance;
  // fp32: the row sums' own rounding (a few ulps of a sum of up to 512 values near 8).
  return {1e-4, 1e-4};
}

void ExpectMatchesReference(const std::vector<std::uint8_t>& out, const Case& c,
                            const std::string& what) {
  const testing::Tolerance tolerance = ToleranceFor(c.type);
  int bad = 0;
  for (std::size_t i = 0; i < c.reference.size() && bad < 5; ++i) {
    const double v = Decode(out, i, c.type);
    const double bound = tolerance.rel * std::abs(c.reference[i]) + tolerance.abs;
    if (!(std::abs(v - c.reference[i]) <= bound)) {
      ADD_FAILURE() << what << ": row " << i / c.p.width << " column " << i % c.p.width << " is "
                    << v << ", reference " << c.reference[i];
      ++bad;
    }
  }
  for (std::size_t i = c.reference.size(); i < c.reference.size() + kGuard; ++i) {
    if (!std::isnan(Decode(out, i, c.type))) {
      ADD_FAILURE() << what << ": element " << i - c.reference.size()
                    << " past the output lost its poison";
      break;
    }
  }
}

class LayerNormLaunchTest : public ::testing::TestWithParam<ElemType> {
 protected:
  std::vector<Problem> Problems() const {
    if (GetParam() == ElemType::kFp32) return {std::begin(kFp32Problems), std::end(kFp32Problems)};
    return {std::begin(k16BitProblems), std::end(k16BitProblems)};
  }
};

TEST_P(LayerNormLaunchTest, BothSchedulesMatchTheReferenceWithTheSameBits) {
  SKIP_WITHOUT_GPU();
  for (const Problem& p : Problems()) {
    const Case c(p, GetParam());
    DeviceCase device(c);
    const auto per_warp = device.Run(c, LayerNormSchedule::kRowPerWarp, false);
    ExpectMatchesReference(per_warp, c, c.Name() + ", a row a warp");
    const auto streaming = device.Run(c, LayerNormSchedule::kStreaming, false);
    ExpectMatchesReference(streaming, c, c.Name() + ", streaming");
    EXPECT_EQ(std::memcmp(per_warp.data(), streaming.data(), per_warp.size()), 0)
        << c.Name() << ": the schedules differ in their bits";
  }
}

// Programmatic or not, the same bits; the launch is accepted either way.
TEST_P(LayerNormLaunchTest, StreamingRerunsAreBitEqualUnderAProgrammaticLaunch) {
  SKIP_WITHOUT_HOPPER("a programmatic launch");
  const Case c(Problems().back(), GetParam());
  DeviceCase device(c);
  const auto first = device.Run(c, LayerNormSchedule::kStreaming, false);
  const auto second = device.Run(c, LayerNormSchedule::kStreaming, true);
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size()), 0) << c.Name();
}

// out = in, and out = residual: each row is read and written by its own warp, so in place
// gives the out-of-place bits.
TEST_P(LayerNormLaunchTest, StreamingInPlaceGivesTheSameBits) {
  SKIP_WITHOUT_GPU();
  const Case c(Problems().back(), GetParam());
  ASSERT_TRUE(c.p.residual);
  DeviceCase device(c);
  const auto expected = device.Run(c, LayerNormSchedule::kStreaming, false);
  const std::size_t bytes = c.reference.size() * Size(c.type);
  for (const bool into_residual : {false, true}) {
    DeviceBytes x(c.x.size()), residual(c.residual.size());
    x.Upload(c.x);
    residual.Upload(c.residual);
    void* out = into_residual ? residual.data() : x.data();
    ASSERT_EQ(gpu::LaunchLayerNorm(x.data(), residual.data(), device.gamma(c), device.beta(c), out,
                                   c.p.rows, c.p.width, c.p.eps, c.type, false, nullptr,
                                   LayerNormSchedule::kStreaming),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto got = (into_residual ? residual : x).Download();
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), bytes), 0)
        << c.Name() << (into_residual ? ", out = residual" : ", out = in");
  }
}

INSTANTIATE_TEST_SUITE_P(Types, LayerNormLaunchTest,
                         ::testing::Values(ElemType::kFp32, ElemType::kFp16, ElemType::kBf16),
                         [](const auto& info) { return TypeName(info.param); });

TEST(LayerNormSchedules, StreamingTakesWholeVectorsUpTo128ALane) {
  EXPECT_TRUE(gpu::StreamingLayerNormSupports(ElemType::kBf16, 768));
  EXPECT_TRUE(gpu::StreamingLayerNormSupports(ElemType::kBf16, 1024));
  EXPECT_TRUE(gpu::StreamingLayerNormSupports(ElemType::kFp16, 8));
  EXPECT_TRUE(gpu::StreamingLayerNormSupports(ElemType::kFp32, 512));
  EXPECT_FALSE(gpu::StreamingLayerNormSupports(ElemType::kBf16, 1032));  // 129 vectors
  EXPECT_FALSE(gpu::StreamingLayerNormSupports(ElemType::kFp32, 516));
  EXPECT_FALSE(gpu::StreamingLayerNormSupports(ElemType::kBf16, 12));    // not whole vectors
  EXPECT_FALSE(gpu::StreamingLayerNormSupports(ElemType::kFp32, 6));
  EXPECT_FALSE(gpu::StreamingLayerNormSupports(ElemType::kFp16, 0));
}

// A width the streaming kernel does not take is refused at launch, nothing written; the
// row-a-warp schedule takes it (its block kernel), as the executor relies on.
TEST(LayerNormSchedules, StreamingRefusesWidthsItDoesNotTake) {
  SKIP_WITHOUT_GPU();
  for (const std::int64_t width : {std::int64_t{1032}, std::int64_t{12}}) {
    const Case c({3, width, false, false, 1e-5f}, ElemType::kBf16);
    DeviceCase device(c);
    device.out.Poison();
    EXPECT_EQ(gpu::LaunchLayerNorm(device.x.data(), nullptr, nullptr, nullptr, device.out.data(),
                                   c.p.rows, width, c.p.eps, c.type, false, nullptr,
                                   LayerNormSchedule::kStreaming),
              cudaErrorInvalidValue)
        << width;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto untouched = device.out.Download();
    EXPECT_TRUE(std::isnan(Decode(untouched, 0, c.type))) << width;
    ExpectMatchesReference(device.Run(c, LayerNormSchedule::kRowPerWarp, false), c,
                           c.Name() + ", a row a warp");
  }
}

}  // namespace
}  // namespace ltserve
