// Requests whose tensors are in GPU memory (CUDA shared memory left in place by the decoder):
// the batcher hands the instance their rows' addresses instead of staging them, in the same
// batch as requests staged from host memory. The fake instance treats those addresses as
// device memory it reads and writes itself (fake_executor.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "harness.h"

namespace ltserve::testing {
namespace {

using namespace std::chrono_literals;

// Where a request's outputs land in "GPU memory": poisoned until the instance writes them.
struct DeviceOutputs {
  std::vector<float> doubled;
  std::vector<float> sums;
};

// Moves the request's input to "GPU memory" (its own buffer, read in place).
void InputInDevice(InferenceRequest& request) {
  RequestInput& input = request.inputs[0];
  input.device = DeviceTensor{const_cast<std::byte*>(input.bytes.data()), input.bytes.size()};
  input.bytes = {};
}

// Asks for both outputs in `outputs`, sized for `rows` rows (plus `short_by` floats fewer for
// the doubled one) and poisoned.
void OutputsInDevice(InferenceRequest& request, DeviceOutputs& outputs, std::int64_t rows,
                     std::size_t short_by = 0) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  outputs.doubled.assign(static_cast<std::size_t>(rows * kWidth) - short_by, nan);
  outputs.sums.assign(static_cast<std::size_t>(rows), nan);
  request.device_outputs = {
      DeviceTensor{outputs.doubled.data(), outputs.doubled.size() * sizeof(float)},
      DeviceTensor{outputs.sums.data(), outputs.sums.size() * sizeof(float)}};
}

void ExpectDeviceOutputs(const Call& call, const DeviceOutputs& outputs) {
  ASSERT_EQ(outputs.doubled.size(), call.input.size());
  for (std::size_t i = 0; i < call.input.size(); ++i) {
    EXPECT_EQ(outputs.doubled[i], 2.0f * call.input[i] + 1.0f) << "value " << i;
  }
  for (std::int64_t r = 0; r < call.rows; ++r) {
    double sum = 0;
    for (std::int64_t c = 0; c < call.width; ++c) sum += call.input[r * call.width + c];
    EXPECT_EQ(outputs.sums[r], static_cast<float>(sum)) << "row " << r;
  }
}

TEST(DeviceMemory, RowsInGpuMemoryBatchWithStagedRowsAtTheirOwnPlace) {
  Harness h(BatchingOptions(/*max_batch_size=*/16, /*max_queue_delay=*/0us));
  auto first = h.SendAndHold(1);
  DeviceOutputs both_outputs, output_only;
  // Host, device in and out, host, device in only, device out only: one batch of 2+3+1+2+3.
  auto host = h.Send(2);
  auto in_and_out = h.Send(3, kWidth, [&](InferenceRequest& r) {
    InputInDevice(r);
    OutputsInDevice(r, both_outputs, 3);
  });
  auto host_again = h.Send(1);
  auto in_only = h.Send(2, kWidth, InputInDevice);
  auto out_only = h.Send(3, kWidth, [&](InferenceRequest& r) { OutputsInDevice(r, output_only, 3); });
  h.backend.Release();
  ExpectOwnOutputs(*first, first->Await());
  for (const auto& call : {host, host_again, in_only}) ExpectOwnOutputs(*call, call->Await());
  ASSERT_TRUE(in_and_out->Await().status.ok());
  ASSERT_TRUE(out_only->Await().status.ok());
  ExpectDeviceOutputs(*in_and_out, both_outputs);
  ExpectDeviceOutputs(*out_only, output_only);
  const std::vector<ExecutedBatch> batches = h.backend.batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[1].batch_size, 11);
  EXPECT_EQ(batches[1].device_inputs, 2);
  EXPECT_EQ(batches[1].device_outputs, 4);
  // The executor saw every request's rows in batch order, wherever they came from.
  EXPECT_EQ(ExecutedFirstValues(h.backend, 1),
            FirstValues({host, in_and_out, host_again, in_only, out_only}));
}

TEST(DeviceMemory, AnOutputWithTooLittleRoomIsNotWritten) {
  Harness h(BatchingOptions(4, 0us));
  DeviceOutputs outputs;
  auto call = h.Send(2, kWidth, [&](InferenceRequest& r) { OutputsInDevice(r, outputs, 2, 1); });
  ASSERT_TRUE(call->Await().status.ok());
  // The doubled output needs 14 floats and had room for 13: left poisoned, for the response
  // to refuse; the sums fitted.
  for (float value : outputs.doubled) EXPECT_TRUE(std::isnan(value));
  EXPECT_FALSE(std::isnan(outputs.sums[0]));
  EXPECT_EQ(h.backend.batches().back().device_outputs, 1);
}

TEST(DeviceMemory, AModelWithoutBatchDimensionRefusesGpuMemory) {
  Harness h(NoBatchingOptions(0));
  auto call = h.Send(2, kWidth, InputInDevice);
  const Outcome outcome = call->Await();
  EXPECT_EQ(outcome.status.code(), StatusCode::kInternal);
  EXPECT_NE(outcome.status.message().find("only a model with a batch dimension"), std::string::npos)
      << outcome.status.ToString();
}

}  // namespace
}  // namespace ltserve::testing
