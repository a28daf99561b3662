// One Linear problem for the tests of the few-row GEMM kernels launched directly
// (test_skinny_gemm.cc, test_streamed_gemm.cc): random inputs rounded to the storage type, a
// double-precision reference, and the device side with a poisoned output and a guard band.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/kernels.h"
#include "plan/plan.h"
#include "reference.h"
#include "sixteen_bit.h"
#include "test_support.h"

namespace ltserve::testing {

struct LinearProblem {
  std::int64_t rows, n, k;
  bool bias, residual;
  plan::Activation act;
};

// One problem's data, rounded to the storage type, and its double-precision reference.
struct LinearCase {
  LinearProblem p;
  gpu::ElemType type;
  std::vector<std::uint16_t> x, w, bias, residual;
  std::vector<double> reference;

  LinearCase(const LinearProblem& problem, gpu::ElemType t) : p(problem), type(t) {
    const auto quantize = [&](const std::vector<float>& values) { return RoundToBits(values, type); };
    x = quantize(Random(p.rows * p.k, 1.0f));
    w = quantize(Random(p.n * p.k, 1.0f / std::sqrt(static_cast<float>(p.k))));
    if (p.bias) bias = quantize(Random(p.n, 0.5f));
    if (p.residual) residual = quantize(Random(p.rows * p.n, 1.0f));
    reference.resize(p.rows * p.n);
    for (std::int64_t m = 0; m < p.rows; ++m) {
      for (std::int64_t n = 0; n < p.n; ++n) {
        double sum = 0;
        for (std::int64_t k = 0; k < p.k; ++k) {
          sum += static_cast<double>(FromBits(x[m * p.k + k], type)) * FromBits(w[n * p.k + k], type);
        }
        if (p.bias) sum += FromBits(bias[n], type);
        if (p.residual) sum += FromBits(residual[m * p.n + n], type);
        reference[m * p.n + n] = Activate(p.act, sum);
      }
    }
  }

  std::string Name() const {
    return std::string(type == gpu::ElemType::kBf16 ? "bf16" : "fp16") + " " +
           std::to_string(p.rows) + "x" + std::to_string(p.k) + " -> " + std::to_string(p.n);
  }
  void ExpectMatches(const std::vector<std::uint16_t>& out, const std::string& what) const {
    testing::ExpectMatches(out, reference, type, p.n, what);
  }
};

// The device side of a LinearCase (or of any case with its x, w, bias, residual and p.rows,
// p.n, p.bias, p.residual): inputs uploaded once, an output with a guard band.
struct DeviceLinearCase {
  DeviceHalves x, w, bias, residual, y;
  template <typename AnyCase>
  explicit DeviceLinearCase(const AnyCase& c)
      : x(c.x.size()), w(c.w.size()), bias(std::max<std::size_t>(c.bias.size(), 1)),
        residual(std::max<std::size_t>(c.residual.size(), 1)),
        y(static_cast<std::size_t>(c.p.rows * c.p.n) + kGuard) {
    x.Upload(c.x);
    w.Upload(c.w);
    if (c.p.bias) bias.Upload(c.bias);
    if (c.p.residual) residual.Upload(c.residual);
  }
  // Poisons the output, calls launch(x, w, bias or null, residual or null, y) and returns the
  // output with its guard band.
  template <typename Launch>
  std::vector<std::uint16_t> Run(const LinearCase& c, const std::string& what, Launch&& launch) {
    EXPECT_EQ(cudaMemset(y.data(), 0xff, (c.p.rows * c.p.n + kGuard) * 2), cudaSuccess);
    EXPECT_EQ(launch(x.data(), w.data(), c.p.bias ? bias.data() : nullptr,
                     c.p.residual ? residual.data() : nullptr, y.data()),
              cudaSuccess)
        << what;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
    return y.Download();
  }
};

}  // namespace ltserve::testing
