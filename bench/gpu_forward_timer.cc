#include "gpu_forward_timer.h"

#include <chrono>

#include <iterator>
#include <random>
#include <type_traits>
#include <variant>

#include "gpu/cuda_check.h"

namespace ltserve_bench {

using ltserve::InvalidArgument;
using ltserve::Result;
using ltserve::Status;
namespace gpu = ltserve::gpu;

Result<std::unique_ptr<GpuForwardTimer>> GpuForwardTimer::Create(
    std::shared_ptr<const gpu::GpuModel> model, bool halves_on_one_stream) {
  std::unique_ptr<GpuForwardTimer> timer(new GpuForwardTimer());
  LTSERVE_ASSIGN_OR_RETURN(timer->state_, gpu::DeviceState::Create(model));
  timer->state_->set_halves_on_one_stream(halves_on_one_stream);
  LTSERVE_ASSIGN_OR_RETURN(timer->graphs_,
                           gpu::BucketGraphs::Capture(*timer->state_, model->buckets().size(),
                                                      model->options().cuda_graphs));
  LTSERVE_ASSIGN_OR_RETURN(timer->start_, gpu::CreateEvent(/*timing=*/true));
  LTSERVE_ASSIGN_OR_RETURN(timer->stop_, gpu::CreateEvent(/*timing=*/true));
  timer->model_ = std::move(model);
  return timer;
}

Result<double> GpuForwardTimer::TimeForward(std::int64_t rows, int iterations,
                                            std::int64_t sequences) {
  if (rows < 1 || rows > model_->options().capacity_rows || iterations < 1) {
    return InvalidArgument("TimeForward: rows or iterations out of range");
  }
  const std::size_t bucket = model_->BucketFor(rows, sequences);
  cudaStream_t stream = state_->stream();
  LTSERVE_RETURN_IF_ERROR(graphs_.Launch(*state_, bucket));  // warm-up
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(start_.get(), stream));
  for (int i = 0; i < iterations; ++i) LTSERVE_RETURN_IF_ERROR(graphs_.Launch(*state_, bucket));
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop_.get(), stream));
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop_.get()));
  float ms = 0;
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start_.get(), stop_.get()));
  return static_cast<double>(ms) * 1e3 / iterations;
}

Result<double> GpuForwardTimer::TimeLaunchAndWait(std::int64_t rows, int iterations) {
  if (rows < 1 || rows > model_->options().capacity_rows || iterations < 1) {
    return InvalidArgument("TimeLaunchAndWait: rows or iterations out of range");
  }
  const std::size_t bucket = model_->BucketFor(rows);
  cudaStream_t stream = state_->stream();
  LTSERVE_RETURN_IF_ERROR(graphs_.Launch(*state_, bucket));  // warm-up
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    LTSERVE_RETURN_IF_ERROR(graphs_.Launch(*state_, bucket));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
             .count() /
         iterations;
}

Result<double> GpuForwardTimer::TimeRoundTrip(int iterations) {
  if (iterations < 1) return InvalidArgument("TimeRoundTrip: iterations < 1");
  cudaStream_t stream = state_->stream();
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop_.get(), stream));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop_.get()));
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
             .count() /
         iterations;
}

Result<GpuForwardTimer::LoneLaunch> GpuForwardTimer::TimeLoneLaunches(
    std::int64_t rows, int iterations, const std::function<void()>& before) {
  if (rows < 1 || rows > model_->options().capacity_rows || iterations < 1) {
    return InvalidArgument("TimeLoneLaunches: rows or iterations out of range");
  }
  using Clock = std::chrono::steady_clock;
  const auto us = [](Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
  const std::size_t bucket = model_->BucketFor(rows);
  cudaStream_t stream = state_->stream();
  LoneLaunch out;
  for (int i = 0; i < iterations; ++i) {
    before();
    const auto start = Clock::now();
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(start_.get(), stream));
    LTSERVE_RETURN_IF_ERROR(graphs_.Launch(*state_, bucket));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop_.get(), stream));
    const auto launched = Clock::now();
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop_.get()));
    const auto done = Clock::now();
    float ms = 0;
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start_.get(), stop_.get()));
    out.launch_us.push_back(us(launched - start));
    out.wait_us.push_back(us(done - launched));
    out.device_us.push_back(static_cast<double>(ms) * 1e3);
  }
  return out;
}

Status GpuForwardTimer::FillTokenIds(std::int32_t bound, std::uint64_t seed) {
  if (model_->plan().input_kind() != ltserve::plan::InputKind::kTokenIds || bound < 1) {
    return InvalidArgument("FillTokenIds: a token-id model and a bound >= 1");
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> draw(0, bound - 1);
  std::vector<std::int32_t> values(ltserve::kTokenIdInputs *
                                   static_cast<std::size_t>(model_->options().capacity_rows));
  for (std::int32_t& value : values) value = draw(rng);
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpy(state_->input_device(), values.data(),
                                          values.size() * sizeof(std::int32_t),
                                          cudaMemcpyHostToDevice));
  return Status::Ok();
}

Result<std::int64_t> GpuForwardTimer::TokenRows(std::span<const std::int32_t> lengths) const {
  if (!ltserve::plan::TakesTokens(model_->plan().input_kind())) {
    return InvalidArgument("timing sequences needs a token model");
  }
  std::int64_t rows = 0;
  for (std::int32_t length : lengths) {
    if (length < 0) return InvalidArgument("negative sequence length");
    rows += length;
  }
  return rows;
}

Result<double> GpuForwardTimer::TimeTokenForward(std::span<const std::int32_t> lengths,
                                                 int iterations) {
  LTSERVE_ASSIGN_OR_RETURN(const std::int64_t rows, TokenRows(lengths));
  LTSERVE_RETURN_IF_ERROR(state_->SetSequences(lengths));
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(state_->stream()));
  return TimeForward(rows, iterations, std::ssize(lengths));
}

Result<std::vector<StepTime>> GpuForwardTimer::ProfileTokenForward(
    std::span<const std::int32_t> lengths, int iterations) {
  LTSERVE_ASSIGN_OR_RETURN(const std::int64_t rows, TokenRows(lengths));
  if (rows < 1 || rows > model_->options().capacity_rows || iterations < 1) {
    return InvalidArgument("ProfileTokenForward: tokens or iterations out of range");
  }
  const std::vector<gpu::Step>& steps = model_->steps();
  std::vector<gpu::Event> marks;
  for (std::size_t s = 0; s <= steps.size(); ++s) {
    LTSERVE_ASSIGN_OR_RETURN(gpu::Event event, gpu::CreateEvent(/*timing=*/true));
    marks.push_back(std::move(event));
  }
  LTSERVE_RETURN_IF_ERROR(state_->SetSequences(lengths));
  const std::size_t bucket = model_->BucketFor(rows, std::ssize(lengths));
  cudaStream_t stream = state_->stream();
  std::vector<StepTime> times(steps.size());
  for (std::size_t s = 0; s < steps.size(); ++s) {
    times[s].kind = std::visit(
        [](const auto& step) -> std::string {
          using T = std::decay_t<decltype(step)>;
          if constexpr (std::is_same_v<T, gpu::GemmStep>) return "gemm";
          if constexpr (std::is_same_v<T, gpu::AttentionStep>) return "attention";
          if constexpr (std::is_same_v<T, gpu::LayerNormStep>) return "layernorm";
          if constexpr (std::is_same_v<T, gpu::EmbedStep>) return "embedding";
          if constexpr (std::is_same_v<T, gpu::PoolStep>) return "pooling";
          if constexpr (std::is_same_v<T, gpu::L2NormalizeStep>) return "l2-normalize";
          return "pointwise";
        },
        steps[s]);
  }
  LTSERVE_RETURN_IF_ERROR(state_->Forward(bucket));  // warm-up
  for (int i = 0; i < iterations; ++i) {
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(marks.front().get(), stream));
    LTSERVE_RETURN_IF_ERROR(
        state_->Forward(bucket, std::span<const gpu::Event>(marks).subspan(1)));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(marks.back().get()));
    for (std::size_t s = 0; s < steps.size(); ++s) {
      float ms = 0;
      LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, marks[s].get(), marks[s + 1].get()));
      times[s].us += static_cast<double>(ms) * 1e3 / iterations;
    }
  }
  return times;
}

}  // namespace ltserve_bench
