// Helpers shared by the GPU executor tests: random data from one printed seed, a plan builder
// with random weights, I/O conversion, a poisoned run and the relative-error measure.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/data_type.h"
#include "executor/executor.h"
#include "gpu/gpu_executor.h"
#include "model/model_options.h"
#include "plan/plan.h"

namespace ltserve::testing {

#define SKIP_WITHOUT_GPU()                                            \
  do {                                                                \
    std::string reason;                                               \
    if (!GpuAvailable(&reason)) GTEST_SKIP() << "no GPU: " << reason; \
  } while (false)

// One generator per process, seeded at random; the seed is printed so a failure can be rerun.
std::mt19937& Rng();
// Values uniform in [-scale, scale).
std::vector<float> Random(std::size_t count, float scale);

// Builds plans with random weights, PyTorch-like scales (weights ~ 1/√in_features).
struct Builder {
  std::shared_ptr<plan::Plan> plan = std::make_shared<plan::Plan>();
  plan::ValueId Value(std::int64_t width);
  plan::ValueId Linear(plan::ValueId in, std::int64_t out_features, bool bias,
                       plan::Activation act, plan::ValueId residual = plan::kNoValue);
  plan::ValueId LayerNorm(plan::ValueId in, plan::ValueId residual = plan::kNoValue);
  plan::ValueId Attention(plan::ValueId qkv, std::int64_t num_heads);
};

// `parameters` as a config.pbtxt would give them, parsed by the config's own rules (a test
// failure when they do not parse).
ModelOptions Options(const std::map<std::string, std::string>& parameters);

// `v` rounded to what the given precision or I/O type stores ("bf16", "fp16"; else unchanged).
float RoundTo(float v, const std::string& precision);

void WriteInput(std::span<std::byte> buffer, const std::vector<float>& values, DataType io);

// Poisons the instance before the real run: a NaN batch of the same shape through the whole
// model (every device buffer the run touches), then NaN bytes over the host output buffer.
// Then runs `input` and returns the output as floats. Rows are samples, or with
// `sequence_lengths` the packed tokens of those sequences.
std::vector<float> RunPoisoned(ExecutorInstance& instance, const plan::Plan& plan,
                               const std::vector<float>& input, std::int64_t rows, DataType io,
                               std::span<const std::int32_t> sequence_lengths = {});

// ‖out − ref‖ / ‖ref‖; infinity when `out` holds a non-finite value.
double RelativeError(const std::vector<float>& out, const std::vector<double>& ref);
// The same between two runs, the second taken as the reference.
double RelativeDifference(const std::vector<float>& out, const std::vector<float>& ref);

}  // namespace ltserve::testing
