// A fake ExecutorInstance for the batcher tests: one FP32 input [rows, width], two outputs
// computed row by row from it, y0 = 2x + 1 ([rows, width]) and y1 = the row's sum ([rows, 1]),
// so a request that received another request's rows, or rows from a stale batch, is caught.
// Buffers are poisoned with NaN before each use for the same reason.
//
// A FakeBackend is shared by the instances of one scheduler: it records every executed batch
// and lets a test hold Execute on a gate (to pile up a queue deterministically), add a latency,
// or make the next Execute fail.
//
// Thread-safety: FakeBackend is safe from any thread; each FakeInstance is driven by one worker.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "executor/executor.h"
#include "scheduler/batch_data.h"

namespace ltserve::testing {

struct ExecutedBatch {
  std::int64_t batch_size = 0;
  std::vector<std::vector<std::int64_t>> input_dims;
  std::vector<std::int32_t> sequence_lengths;
  std::vector<float> first_values;  // column 0 of every row, in buffer order
  int device_inputs = 0;            // requests' inputs read from (fake) GPU memory
  int device_outputs = 0;           // outputs written there
  std::thread::id thread;           // the thread that ran Execute
};

class FakeBackend {
 public:
  // While held, Execute blocks until Release (or kHoldLimit, then fails: a test that forgot to
  // release must not hang the suite).
  void Hold();
  void Release();
  // Waits until `count` Executes are blocked on the hold; false after `timeout`.
  bool WaitForHeld(int count, std::chrono::milliseconds timeout);
  // Simulated compute time of every Execute.
  void SetLatency(std::chrono::microseconds latency);
  // The next Execute to start returns `status` without computing.
  void FailNext(Status status);
  // From now on OutputShape(0) claims one row more than the batch has.
  void ReportWrongOutputRows();
  std::vector<ExecutedBatch> batches() const;

 private:
  friend class FakeInstance;
  static constexpr std::chrono::seconds kHoldLimit{20};

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool hold_ = false;
  int held_ = 0;
  std::chrono::microseconds latency_{0};
  Status next_error_;
  bool wrong_output_rows_ = false;
  std::vector<ExecutedBatch> batches_;
};

class FakeInstance : public ExecutorInstance {
 public:
  // Staging and output buffers hold `capacity_floats` floats. `layout` says how to read a
  // BatchShape: full shapes, [batch] + input_dims, or packed sequences (whose width is what
  // was staged divided by the tokens).
  FakeInstance(FakeBackend* backend, std::size_t capacity_floats, BatchLayout layout);

  Result<std::span<std::byte>> InputBuffer(std::size_t index, std::size_t bytes) override;
  Status Execute(const BatchShape& shape, ExecuteTimings* timings) override;
  std::span<const std::byte> Output(std::size_t index) const override;
  std::vector<std::int64_t> OutputShape(std::size_t index) const override;

 private:
  FakeBackend* const backend_;
  const BatchLayout layout_;
  std::size_t staged_floats_ = 0;
  std::vector<float> input_;
  std::vector<float> doubled_;
  std::vector<float> sums_;
  std::int64_t rows_ = 0;
  std::int64_t width_ = 0;
  bool wrong_rows_ = false;
};

}  // namespace ltserve::testing
