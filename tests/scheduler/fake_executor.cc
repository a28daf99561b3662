#include "fake_executor.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <thread>

namespace ltserve::testing {

void FakeBackend::Hold() {
  std::lock_guard lock(mutex_);
  hold_ = true;
}

void FakeBackend::Release() {
  {
    std::lock_guard lock(mutex_);
    hold_ = false;
  }
  cv_.notify_all();
}

bool FakeBackend::WaitForHeld(int count, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return cv_.wait_for(lock, timeout, [&] { return held_ >= count; });
}

void FakeBackend::SetLatency(std::chrono::microseconds latency) {
  std::lock_guard lock(mutex_);
  latency_ = latency;
}

void FakeBackend::FailNext(Status status) {
  std::lock_guard lock(mutex_);
  next_error_ = std::move(status);
}

void FakeBackend::ReportWrongOutputRows() {
  std::lock_guard lock(mutex_);
  wrong_output_rows_ = true;
}

std::vector<ExecutedBatch> FakeBackend::batches() const {
  std::lock_guard lock(mutex_);
  return batches_;
}

FakeInstance::FakeInstance(FakeBackend* backend, std::size_t capacity_floats, BatchLayout layout)
    : backend_(backend),
      layout_(layout),
      input_(capacity_floats),
      doubled_(capacity_floats),
      sums_(capacity_floats) {}

Result<std::span<std::byte>> FakeInstance::InputBuffer(std::size_t index, std::size_t bytes) {
  if (index != 0) return InvalidArgument("the fake has one input");
  if (bytes > input_.size() * sizeof(float)) {
    return InvalidArgument("batch of " + std::to_string(bytes) + " bytes exceeds the fake's " +
                           std::to_string(input_.size() * sizeof(float)));
  }
  std::fill(input_.begin(), input_.end(), std::numeric_limits<float>::quiet_NaN());
  staged_floats_ = bytes / sizeof(float);
  return std::as_writable_bytes(std::span<float>(input_));
}

Status FakeInstance::Execute(const BatchShape& shape, ExecuteTimings* timings) {
  const auto start = std::chrono::steady_clock::now();
  std::chrono::microseconds latency{0};
  {
    std::unique_lock lock(backend_->mutex_);
    // Taken on entry, so an Execute already held when FailNext is called still succeeds.
    Status error = std::move(backend_->next_error_);
    backend_->next_error_ = Status::Ok();
    ++backend_->held_;
    backend_->cv_.notify_all();
    const bool released =
        backend_->cv_.wait_for(lock, FakeBackend::kHoldLimit, [&] { return !backend_->hold_; });
    --backend_->held_;
    if (!released) return Internal("fake executor held past its limit");
    if (!error.ok()) return error;
    latency = backend_->latency_;
    wrong_rows_ = backend_->wrong_output_rows_;
  }
  if (layout_ == BatchLayout::kPackedSequences) {
    if (!shape.input_dims.empty() ||
        shape.sequence_lengths.size() != static_cast<std::size_t>(shape.batch_size)) {
      return InvalidArgument("packed sequences come as one length per sequence, no dims");
    }
    rows_ = 0;
    for (std::int32_t length : shape.sequence_lengths) rows_ += length;
    width_ = rows_ > 0 ? static_cast<std::int64_t>(staged_floats_) / rows_ : 0;
  } else {
    if (shape.input_dims.size() != 1 || !shape.sequence_lengths.empty()) {
      return InvalidArgument("the fake has one input of rows");
    }
    const std::vector<std::int64_t>& dims = shape.input_dims[0];
    const bool whole = layout_ == BatchLayout::kWhole;
    if (dims.size() != (whole ? 2u : 1u) || (whole && shape.batch_size != 1)) {
      return InvalidArgument("the fake takes [batch, width], or [rows, width] whole");
    }
    rows_ = whole ? dims[0] : shape.batch_size;
    width_ = dims.back();
  }
  // "GPU memory" here is host memory the fake reads like a device: the rows the scheduler left
  // out of the staging buffer (still NaN) come from where the request holds them.
  for (const DeviceCopy& copy : shape.device_inputs) {
    if (copy.index != 0 || copy.first_row < 0 || copy.first_row + copy.rows > rows_ ||
        copy.bytes != static_cast<std::size_t>(copy.rows * width_) * sizeof(float)) {
      return InvalidArgument("device input outside the batch or of the wrong size");
    }
    std::memcpy(input_.data() + copy.first_row * width_, copy.device, copy.bytes);
  }
  if (static_cast<std::size_t>(rows_ * width_) != staged_floats_) {
    return InvalidArgument("staged " + std::to_string(staged_floats_) + " floats for " +
                           std::to_string(rows_) + " rows of " + std::to_string(width_));
  }

  // Simulated compute time: what a test of the delay bound or of overlap needs a batch to take.
  if (latency.count() > 0) std::this_thread::sleep_for(latency);

  ExecutedBatch record{shape.batch_size, shape.input_dims,
                      {shape.sequence_lengths.begin(), shape.sequence_lengths.end()}, {}, 0, 0, {}};
  std::fill(doubled_.begin(), doubled_.end(), std::numeric_limits<float>::quiet_NaN());
  std::fill(sums_.begin(), sums_.end(), std::numeric_limits<float>::quiet_NaN());
  for (std::int64_t r = 0; r < rows_; ++r) {
    double sum = 0;
    for (std::int64_t c = 0; c < width_; ++c) {
      const float x = input_[r * width_ + c];
      doubled_[r * width_ + c] = 2.0f * x + 1.0f;
      sum += x;
    }
    sums_[r] = static_cast<float>(sum);
    record.first_values.push_back(input_[r * width_]);
  }
  for (const DeviceCopy& copy : shape.device_outputs) {
    const std::int64_t columns = copy.index == 0 ? width_ : 1;
    const std::size_t bytes = static_cast<std::size_t>(copy.rows * columns) * sizeof(float);
    if (copy.index > 1 || copy.first_row < 0 || copy.first_row + copy.rows > rows_) {
      return InvalidArgument("device output outside the batch");
    }
    if (bytes > copy.bytes) continue;  // does not fit: not written, as the GPU instance does
    const std::vector<float>& values = copy.index == 0 ? doubled_ : sums_;
    std::memcpy(copy.device, values.data() + copy.first_row * columns, bytes);
    record.device_outputs += 1;
  }
  record.device_inputs = static_cast<int>(shape.device_inputs.size());
  record.thread = std::this_thread::get_id();
  {
    std::lock_guard lock(backend_->mutex_);
    backend_->batches_.push_back(std::move(record));
  }
  timings->infer_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
  return Status::Ok();
}

std::span<const std::byte> FakeInstance::Output(std::size_t index) const {
  const std::vector<float>& values = index == 0 ? doubled_ : sums_;
  const std::size_t count = static_cast<std::size_t>(rows_ * (index == 0 ? width_ : 1));
  return std::as_bytes(std::span<const float>(values.data(), count));
}

std::vector<std::int64_t> FakeInstance::OutputShape(std::size_t index) const {
  const std::int64_t rows = rows_ + (wrong_rows_ && index == 0 ? 1 : 0);
  return {rows, index == 0 ? width_ : 1};
}

}  // namespace ltserve::testing
