// Rows in device memory (CUDA shared memory on the model's GPU): the instance copies them device
// to device instead of staging them (executor.h, DeviceCopy). Needs the CUDA runtime to make
// that memory, so it is built only with CUDA; it skips without a GPU like the rest.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "gpu/gpu_executor.h"
#include "test_support.h"

namespace ltserve {
namespace {

using plan::Activation;
using testing::Builder;
using testing::Random;
using testing::RunPoisoned;
using testing::WriteInput;

constexpr std::int64_t kMaxBatch = 200;

// Odd widths, a LayerNorm and conversions at both edges (FP32 I/O, bf16 inside).
std::shared_ptr<const plan::Plan> OddPlan() {
  Builder b;
  const auto in = b.Value(37);
  const auto hidden = b.Linear(in, 61, true, Activation::kRelu);
  const auto normed = b.LayerNorm(hidden);
  const auto out = b.Linear(normed, 33, true, Activation::kNone);
  b.plan->SetInput(in, plan::InputKind::kRows);
  b.plan->SetOutput(out);
  EXPECT_TRUE(b.plan->Validate().ok());
  return b.plan;
}

ModelSpec Spec(const plan::Plan& plan) {
  ModelSpec spec;
  spec.name = "device_memory";
  spec.max_batch_size = kMaxBatch;
  spec.inputs = {TensorSpec{"x", DataType::kFp32, {plan.input_width()}}};
  spec.outputs = {TensorSpec{"y", DataType::kFp32, {plan.output_width()}}};
  spec.options = testing::Options({{"precision", "bf16"}});
  return spec;
}

// Device memory a test owns, as a client's CUDA shared-memory region would be.
struct DeviceMemory {
  explicit DeviceMemory(std::size_t bytes) : bytes(bytes) {
    EXPECT_EQ(cudaMalloc(&data, bytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(data, 0xff, bytes), cudaSuccess);  // NaN bits until written
  }
  ~DeviceMemory() { cudaFree(data); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  std::vector<float> Read() const {
    std::vector<float> out(bytes / sizeof(float));
    EXPECT_EQ(cudaMemcpy(out.data(), data, out.size() * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return out;
  }
  void* data = nullptr;
  std::size_t bytes = 0;
};

// A batch whose requests hold some rows in GPU memory (CUDA shared memory) gives, bit for bit,
// what the same rows staged from host memory give: each request's input read where it is (its
// staged rows are NaN, so a row read from staging would show), each output written where it is
// asked for, one with too little room left alone.
TEST(GpuExecutor, RowsInDeviceMemoryGiveTheResultsOfStagedRows) {
  SKIP_WITHOUT_GPU();
  auto plan = OddPlan();
  auto factory = CreateGpuExecutorFactory(plan, Spec(*plan), std::nullopt);
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  EXPECT_EQ(factory.value()->DirectDeviceMemory(), std::optional<std::int64_t>(0));
  auto instance = factory.value()->CreateInstance(0);
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  ExecutorInstance& exec = *instance.value();
  const std::size_t in_row = plan->input_width() * sizeof(float);
  const std::size_t out_row = plan->output_width() * sizeof(float);

  // Requests of these rows; which have their input and which their output in device memory.
  struct Request {
    std::int64_t rows;
    bool input_on_device;
    bool output_on_device;
    std::size_t short_by = 0;  // output room this many bytes short of its rows
  };
  const std::vector<std::vector<Request>> batches = {
      {{2, false, false}, {3, true, true}, {1, false, true, 1}, {4, true, false}, {1, false, true}},
      {{5, true, true}, {1, true, true}, {7, true, true}},  // every row on the device
      {{kMaxBatch - 1, true, false}, {1, false, true}}};
  for (const std::vector<Request>& requests : batches) {
    std::int64_t rows = 0;
    for (const Request& r : requests) rows += r.rows;
    const std::vector<float> input = Random(rows * plan->input_width(), 1.0f);
    const std::vector<float> expected = RunPoisoned(exec, *plan, input, rows, DataType::kFp32);

    auto staging = exec.InputBuffer(0, rows * in_row);
    ASSERT_TRUE(staging.ok());
    WriteInput(staging.value(), input, DataType::kFp32);
    BatchShape shape;
    shape.batch_size = rows;
    std::vector<std::unique_ptr<DeviceMemory>> inputs, outputs;
    std::int64_t row = 0;
    for (const Request& r : requests) {
      if (r.input_on_device) {
        inputs.push_back(std::make_unique<DeviceMemory>(r.rows * in_row));
        ASSERT_EQ(cudaMemcpy(inputs.back()->data, input.data() + row * plan->input_width(),
                             r.rows * in_row, cudaMemcpyHostToDevice),
                  cudaSuccess);
        std::memset(staging.value().data() + row * in_row, 0xff, r.rows * in_row);
        shape.device_inputs.push_back({0, row, r.rows, inputs.back()->data, r.rows * in_row});
      }
      if (r.output_on_device) {
        outputs.push_back(std::make_unique<DeviceMemory>(r.rows * out_row - r.short_by));
        shape.device_outputs.push_back({0, row, r.rows, outputs.back()->data, outputs.back()->bytes});
      }
      row += r.rows;
    }
    const Status status = exec.Execute(shape, nullptr);
    ASSERT_TRUE(status.ok()) << status.ToString();

    const std::span<const std::byte> host = exec.Output(0);
    ASSERT_EQ(host.size(), rows * out_row);
    row = 0;
    std::size_t next_output = 0;
    for (const Request& r : requests) {
      const float* want = expected.data() + row * plan->output_width();
      const std::size_t count = r.rows * plan->output_width();
      if (r.output_on_device) {
        const std::vector<float> got = outputs[next_output++]->Read();
        if (r.short_by > 0) {
          for (float v : got) EXPECT_TRUE(std::isnan(v)) << "an output without room was written";
        } else {
          ASSERT_EQ(got.size(), count);
          EXPECT_EQ(std::memcmp(got.data(), want, count * sizeof(float)), 0) << "row " << row;
        }
      }
      if (!r.output_on_device || r.short_by > 0) {
        EXPECT_EQ(std::memcmp(host.data() + row * out_row, want, count * sizeof(float)), 0)
            << "row " << row;
      }
      row += r.rows;
    }
  }

  // A device input that is not its rows' size is refused before anything runs.
  DeviceMemory small(in_row);
  BatchShape shape;
  shape.batch_size = 2;
  shape.device_inputs.push_back({0, 0, 2, small.data, small.bytes});
  ASSERT_TRUE(exec.InputBuffer(0, 2 * in_row).ok());
  EXPECT_EQ(exec.Execute(shape, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ltserve
