// Helpers for the tests that launch the executor's own 16-bit kernels directly
// (test_skinny_gemm.cc, test_chain_gemm.cc): bf16/fp16 bits, device buffers of them, the
// per-element tolerance against a double reference, poisoned outputs with a guard band.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/float16.h"
#include "gpu/kernels.h"
#include "test_support.h"

namespace ltserve::testing {

// Elements past an output that must keep their poison.
constexpr std::size_t kGuard = 512;
constexpr std::uint16_t kPoison = 0xffff;  // NaN in bf16 and in fp16

// Per element |out − ref| ≤ rel·|ref| + abs: a 16-bit output rounds once (bf16 2⁻⁹, fp16
// 2⁻¹² relative) after fp32 accumulation, whose error is far smaller at these K.
struct Tolerance {
  double rel;
  double abs;
};
constexpr Tolerance kBf16Tolerance{8e-3, 1e-3};
constexpr Tolerance kFp16Tolerance{1.5e-3, 2e-4};

inline std::uint16_t ToBits(float v, gpu::ElemType type) {
  return type == gpu::ElemType::kBf16 ? FloatToBf16(v) : FloatToFp16(v);
}
inline float FromBits(std::uint16_t bits, gpu::ElemType type) {
  return type == gpu::ElemType::kBf16 ? Bf16ToFloat(bits) : Fp16ToFloat(bits);
}
inline std::vector<std::uint16_t> RoundToBits(const std::vector<float>& values, gpu::ElemType type) {
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = ToBits(values[i], type);
  return bits;
}

// 16-bit values on the device, owned.
class DeviceHalves {
 public:
  explicit DeviceHalves(std::size_t count) : count_(count) {
    EXPECT_EQ(cudaMalloc(&data_, count * 2), cudaSuccess);
  }
  ~DeviceHalves() { cudaFree(data_); }
  DeviceHalves(const DeviceHalves&) = delete;
  DeviceHalves& operator=(const DeviceHalves&) = delete;
  void* data() const { return data_; }
  std::size_t count() const { return count_; }
  void Upload(const std::vector<std::uint16_t>& values) {
    ASSERT_EQ(values.size(), count_);
    ASSERT_EQ(cudaMemcpy(data_, values.data(), count_ * 2, cudaMemcpyHostToDevice), cudaSuccess);
  }
  void Poison() { EXPECT_EQ(cudaMemset(data_, 0xff, count_ * 2), cudaSuccess); }
  std::vector<std::uint16_t> Download() const {
    std::vector<std::uint16_t> values(count_);
    EXPECT_EQ(cudaMemcpy(values.data(), data_, count_ * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    return values;
  }

 private:
  void* data_ = nullptr;
  std::size_t count_;
};

// Fails for every element of `out` outside the tolerance of `reference` (printing the first;
// NaN, poison left behind, counts as off) and for any element past it, up to out.size(), that
// lost its poison. `width`: elements a row, for the message.
inline void ExpectMatches(const std::vector<std::uint16_t>& out,
                          const std::vector<double>& reference, gpu::ElemType type,
                          std::int64_t width, const std::string& what) {
  const Tolerance tolerance = type == gpu::ElemType::kBf16 ? kBf16Tolerance : kFp16Tolerance;
  const std::size_t count = reference.size();
  int bad = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double v = FromBits(out[i], type);
    const double error = std::abs(v - reference[i]);
    const double bound = tolerance.rel * std::abs(reference[i]) + tolerance.abs;
    if (!(error <= bound)) {
      if (bad++ == 0) {
        ADD_FAILURE() << what << ": element " << i << " (row " << i / width << ", column "
                      << i % width << ") is " << v << ", reference " << reference[i];
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << count << " elements off";
  for (std::size_t i = count; i < out.size(); ++i) {
    if (out[i] != kPoison) {
      ADD_FAILURE() << what << ": wrote past the output, at element " << i;
      break;
    }
  }
}

// The current device's SM count (a test failure where it cannot be read).
inline int SmCount() {
  int device = 0;
  int count = 0;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  return count;
}

inline bool HopperAvailable() {
  int device = 0;
  int major = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         major >= 9;
}

#define SKIP_WITHOUT_HOPPER(what)                                              \
  do {                                                                         \
    SKIP_WITHOUT_GPU();                                                        \
    if (!::ltserve::testing::HopperAvailable()) {                              \
      GTEST_SKIP() << what << " needs sm_90 or newer";                         \
    }                                                                          \
  } while (false)

}  // namespace ltserve::testing
