#include "harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace ltserve::testing {

Outcome Call::Await() const {
  if (result.wait_for(kPatience) != std::future_status::ready) {
    ADD_FAILURE() << "request not answered within " << kPatience.count() << " s";
    return Outcome{Internal("no answer"), {}, {}, Clock::now()};
  }
  return result.get();
}

bool Call::answered() const {
  return result.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

SchedulerOptions BatchingOptions(int max_batch_size, std::chrono::microseconds max_queue_delay,
                                 std::vector<int> preferred) {
  SchedulerOptions options;
  options.max_batch_size = max_batch_size;
  options.dynamic_batching = true;
  options.max_queue_delay_us = static_cast<std::uint64_t>(max_queue_delay.count());
  options.preferred_batch_sizes = std::move(preferred);
  options.output_types = {DataType::kFp32, DataType::kFp32};
  return options;
}

SchedulerOptions NoBatchingOptions(int max_batch_size) {
  SchedulerOptions options = BatchingOptions(max_batch_size, std::chrono::microseconds(0));
  options.dynamic_batching = false;
  return options;
}

Harness::Harness(SchedulerOptions scheduler_options, int instances, std::size_t capacity_floats)
    : options(std::move(scheduler_options)), rng_(std::random_device{}()) {
  std::vector<std::unique_ptr<ExecutorInstance>> fakes;
  const BatchLayout layout = options.max_batch_size == 0 ? BatchLayout::kWhole
                            : options.tokens            ? BatchLayout::kPackedSequences
                                                        : BatchLayout::kRows;
  for (int i = 0; i < instances; ++i) {
    fakes.push_back(std::make_unique<FakeInstance>(&backend, capacity_floats, layout));
  }
  auto created = Scheduler::Create(options, std::move(fakes), &stats);
  if (!created.ok()) {
    ADD_FAILURE() << created.status().ToString();
    return;
  }
  scheduler_ = std::move(created).value();
}

std::shared_ptr<Call> Harness::Send(std::int64_t rows, std::int64_t width,
                                    const std::function<void(InferenceRequest&)>& adjust) {
  return SendShape({rows, width}, adjust);
}

std::shared_ptr<Call> Harness::SendClaiming(std::int64_t rows, Scheduler::ClaimedRun* claimed,
                                            const std::function<void(InferenceRequest&)>& adjust) {
  return SendShape({rows, kWidth}, adjust, {}, claimed);
}

std::shared_ptr<Call> Harness::SendSequences(std::int64_t batch, std::int64_t seq,
                                             std::int64_t width) {
  return SendShape({batch, seq, width}, {});
}

std::shared_ptr<Call> Harness::SendMasked(std::int64_t batch, std::int64_t seq,
                                          std::vector<std::uint8_t> mask,
                                          const std::function<void(InferenceRequest&)>& adjust) {
  return SendShape({batch, seq, kWidth}, adjust, std::move(mask));
}

std::shared_ptr<Call> Harness::SendShape(std::vector<std::int64_t> shape,
                                         const std::function<void(InferenceRequest&)>& adjust,
                                         std::vector<std::uint8_t> mask,
                                         Scheduler::ClaimedRun* claimed) {
  auto call = std::make_shared<Call>();
  call->shape = shape;
  call->mask = std::move(mask);
  call->width = shape.back();
  call->rows = 1;
  for (std::size_t d = 0; d + 1 < shape.size(); ++d) call->rows *= std::max<std::int64_t>(shape[d], 0);
  call->input.resize(static_cast<std::size_t>(call->rows * call->width));
  {
    std::lock_guard lock(rng_mutex_);
    std::uniform_real_distribution<float> value(-100.0f, 100.0f);
    for (float& x : call->input) x = value(rng_);
  }
  auto request = std::make_unique<InferenceRequest>();
  request->inputs.push_back(RequestInput{std::as_bytes(std::span<const float>(call->input)),
                                         shape, {}});
  if (!call->mask.empty()) {
    request->inputs.push_back(RequestInput{std::as_bytes(std::span<const std::uint8_t>(call->mask)),
                                           {shape[0], shape[1]}, {}});
  }
  request->batch_size = options.max_batch_size > 0 ? shape.front() : 1;
  request->keep_alive = call;
  Call* raw = call.get();
  request->on_complete = [raw](const Status& status, std::span<const OutputSlice> outputs) {
    if (raw->completions.fetch_add(1) > 0) return;  // counted: a test checks exactly one
    Outcome outcome{status, {}, {}, Clock::now()};
    for (const OutputSlice& slice : outputs) {
      std::vector<float> values(slice.bytes.size() / sizeof(float));
      std::memcpy(values.data(), slice.bytes.data(), values.size() * sizeof(float));
      outcome.outputs.push_back(std::move(values));
      outcome.shapes.push_back(slice.shape);
    }
    raw->promise.set_value(std::move(outcome));
  };
  if (adjust) adjust(*request);
  call->sent = request->arrival;
  call->id = scheduler_->Enqueue(std::move(request), claimed);
  return call;
}

std::shared_ptr<Call> Harness::SendAndHold(std::int64_t rows, std::int64_t width) {
  backend.Hold();
  auto call = Send(rows, width);
  EXPECT_TRUE(backend.WaitForHeld(1, kPatience)) << "the held request never reached Execute";
  return call;
}

void ExpectOwnOutputs(const Call& call, const Outcome& outcome) {
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.ToString();
  EXPECT_EQ(call.completions.load(), 1);
  ASSERT_EQ(outcome.outputs.size(), 2u);
  std::vector<std::int64_t> sum_shape = call.shape;
  sum_shape.back() = 1;
  EXPECT_EQ(outcome.shapes[0], call.shape);
  EXPECT_EQ(outcome.shapes[1], sum_shape);
  ASSERT_EQ(outcome.outputs[0].size(), call.input.size());
  ASSERT_EQ(outcome.outputs[1].size(), static_cast<std::size_t>(call.rows));
  ASSERT_TRUE(call.mask.empty() || call.mask.size() == static_cast<std::size_t>(call.rows));
  // Reference in double; the fake computes 2x + 1 in float (one rounding: 1 ulp of |y| <= 201)
  // and sums a row in double before rounding to float. A padded token's outputs are zeros.
  constexpr double kRelativeTolerance = 1e-6;
  for (std::int64_t r = 0; r < call.rows; ++r) {
    const bool padding = !call.mask.empty() && call.mask[r] != 0;
    double sum = 0;
    for (std::int64_t c = 0; c < call.width; ++c) {
      const double x = call.input[r * call.width + c];
      const double expected = padding ? 0.0 : 2.0 * x + 1.0;
      EXPECT_NEAR(outcome.outputs[0][r * call.width + c], expected,
                  kRelativeTolerance * (std::abs(expected) + 1.0))
          << "row " << r << " col " << c << (padding ? " (padding)" : "");
      sum += padding ? 0.0 : x;
    }
    EXPECT_NEAR(outcome.outputs[1][r], sum, kRelativeTolerance * (std::abs(sum) + 1.0))
        << "row " << r << (padding ? " (padding)" : "");
  }
}

TokenLayout PackedLayout(std::int64_t max_tokens) {
  TokenLayout tokens;
  tokens.token_inputs = {0};
  tokens.sequence_input = 0;
  tokens.max_sequence_length = 0;  // no limit unless a test sets one
  tokens.max_batch_tokens = max_tokens;
  return tokens;
}

SchedulerOptions MaskedOptions(std::int64_t max_tokens, std::int64_t width) {
  SchedulerOptions options = BatchingOptions(/*max_batch_size=*/8, std::chrono::microseconds(0));
  TokenLayout tokens = PackedLayout(max_tokens);
  tokens.mask_input = 1;
  tokens.output_token_bytes = {static_cast<std::size_t>(width) * sizeof(float), sizeof(float)};
  options.tokens = tokens;
  return options;
}

std::vector<float> FirstValues(const std::vector<std::shared_ptr<Call>>& calls) {
  std::vector<float> values;
  for (const auto& call : calls) {
    for (std::int64_t r = 0; r < call->rows; ++r) values.push_back(call->input[r * call->width]);
  }
  return values;
}

std::vector<float> ExecutedFirstValues(const FakeBackend& backend, std::size_t from) {
  std::vector<float> values;
  std::vector<ExecutedBatch> batches = backend.batches();
  for (std::size_t b = from; b < batches.size(); ++b) {
    values.insert(values.end(), batches[b].first_values.begin(), batches[b].first_values.end());
  }
  return values;
}

std::vector<std::int64_t> ExecutedBatchSizes(const FakeBackend& backend) {
  std::vector<std::int64_t> sizes;
  for (const ExecutedBatch& batch : backend.batches()) sizes.push_back(batch.batch_size);
  return sizes;
}

std::thread::id LastExecutingThread(const FakeBackend& backend) {
  const std::vector<ExecutedBatch> batches = backend.batches();
  return batches.empty() ? std::thread::id{} : batches.back().thread;
}

}  // namespace ltserve::testing
