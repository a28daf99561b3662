// Timing and hardware-floor helpers shared by the GPU benchmarks: medians of back-to-back
// runs with the device synchronised around them, and the bf16 matmul peak and copy bandwidth
// measured in the same run (the floor every table reports against).
#pragma once

#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace ltserve_bench {

using Clock = std::chrono::steady_clock;
// Repetitions: the median of kRounds means of back-to-back passes; enough passes per round
// that launch jitter averages out at small batch, few enough that batch 8192 stays short.
constexpr int kRounds = 5;
inline int Iterations(std::int64_t batch) { return batch <= 256 ? 200 : (batch <= 2048 ? 50 : 20); }

inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Mean microseconds of `iterations` calls of `fn`, device synchronised around the loop.
template <typename Fn>
double TimeUs(Fn&& fn, int iterations) {
  torch::cuda::synchronize();
  const auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) fn();
  torch::cuda::synchronize();
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iterations;
}

template <typename Fn>
double MedianUs(Fn&& fn, int iterations) {
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> rounds;
  for (int r = 0; r < kRounds; ++r) rounds.push_back(TimeUs(fn, iterations));
  return Median(rounds);
}

inline double MeasurePeakTflops() {
  const auto options = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  constexpr std::int64_t n = 8192;
  auto a = torch::randn({n, n}, options);
  auto b = torch::randn({n, n}, options);
  const double us = MedianUs([&] { (void)torch::mm(a, b); }, 10);
  return 2.0 * n * n * n / us * 1e-6;
}

// The same product held for `seconds`, timed over the second half: the H200 runs a short burst
// at its top clock, then its power limit (700 W) lowers the clock within about a second of
// sustained matmuls. MeasurePeakTflops' bursts give the first figure, this the second.
inline double MeasureSustainedPeakTflops(double seconds) {
  const auto options = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  constexpr std::int64_t n = 8192;
  auto a = torch::randn({n, n}, options);
  auto b = torch::randn({n, n}, options);
  const auto mm = [&] { (void)torch::mm(a, b); };
  const double burst_us = MedianUs(mm, 10);
  const int half = std::max(1, static_cast<int>(seconds / 2 * 1e6 / burst_us));
  (void)TimeUs(mm, half);
  return 2.0 * n * n * n / TimeUs(mm, half) * 1e-6;
}

inline double MeasureCopyTBps() {
  const auto options = torch::TensorOptions().dtype(torch::kUInt8).device(torch::kCUDA);
  constexpr std::int64_t bytes = std::int64_t{2} << 30;
  auto src = torch::randint(0, 255, {bytes}, options);
  auto dst = torch::empty({bytes}, options);
  const double us = MedianUs([&] { dst.copy_(src); }, 10);
  return 2.0 * bytes / us * 1e-6;  // bytes read plus bytes written
}

inline std::vector<float> ToFloats(const torch::Tensor& t) {
  auto c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

}  // namespace ltserve_bench
