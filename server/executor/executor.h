// The contract between the scheduler and whatever computes a model: the CPU plan executor,
// the cuBLASLt GPU executor, or libtorch's TorchScript forward (the fallback).
//
// A model has one ExecutorFactory; it creates one ExecutorInstance per `instance_group` count.
// Instances share the factory's weights (uploaded once) and own everything else: staging
// buffers, streams, handles, workspaces, all allocated in Create, so Execute allocates nothing
// (the TorchScript fallback is the exception: libtorch allocates as it likes).
//
// Data path: the scheduler asks an instance for its input staging buffer, copies each
// request's bytes into it back to back (rows for an MLP, packed tokens for an encoder: this is
// the one copy of request data), calls Execute with the batch's shape, then slices the output
// buffer back into responses. For a GPU instance the staging buffers are pinned host memory.
//
// CUDA shared memory: a factory whose instances can read and write GPU memory themselves says
// which GPU (DirectDeviceMemory). Requests whose tensors are in that GPU's memory then skip the
// host: the scheduler hands the instance the device addresses in the BatchShape (DeviceCopy)
// instead of staging their bytes, and the instance copies device to device.
//
// Thread-safety: an ExecutorFactory is safe to use from any thread. An ExecutorInstance is not:
// exactly one scheduler worker drives it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/data_type.h"
#include "common/status.h"

namespace ltserve {

// Where a model runs; logged at load and exported as a metric label.
enum class ExecutionPath : std::uint8_t { kGpuFused, kCpuPlan, kTorchScript };
const char* ExecutionPathName(ExecutionPath path);  // "gpu-fused", "cpu", "torchscript"

// One request's tensor in GPU memory that the instance reads (an input) or writes (an output)
// itself, device to device: the request's rows [first_row, first_row + rows) of the batch's
// tensor `index` (config order). Row models only (BatchLayout::kRows).
struct DeviceCopy {
  std::size_t index = 0;
  std::int64_t first_row = 0;
  std::int64_t rows = 0;
  void* device = nullptr;  // the client's memory, on the factory's DirectDeviceMemory GPU
  // An input: its size, rows x the input's row bytes. An output: the room at `device`; an
  // output that does not fit is not written (the response then fails for that request).
  std::size_t bytes = 0;
};

// Shape of one executed batch.
struct BatchShape {
  // Rows in the batch: samples for a row model; sequences for a token model.
  std::int64_t batch_size = 0;
  // Token models only: the length of each of the batch_size sequences, packed back to back in
  // the input buffer without padding. Empty for row models.
  std::span<const std::int32_t> sequence_lengths;
  // Non-batch dims of each input as sent (row models with variable dims, fallback only);
  // empty means the configured dims.
  std::vector<std::vector<std::int64_t>> input_dims;
  // Rows in GPU memory (see DeviceCopy); only for instances of a factory with
  // DirectDeviceMemory. Their part of the input staging buffer is not read, and their part of
  // Output() is unspecified: the rows went to `device` instead.
  std::vector<DeviceCopy> device_inputs;
  std::vector<DeviceCopy> device_outputs;
};

// Wall-clock split of one Execute, in nanoseconds, for ModelStatistics and the histograms.
struct ExecuteTimings {
  std::uint64_t input_ns = 0;   // host->device copies and input conversion
  std::uint64_t infer_ns = 0;   // the forward pass
  std::uint64_t output_ns = 0;  // device->host copies and output conversion
};

class ExecutorInstance {
 public:
  virtual ~ExecutorInstance() = default;

  // Host staging buffer for input `index` (config order), at least `bytes` long. Fails with
  // INVALID_ARGUMENT when `bytes` exceeds what the instance was sized for at load.
  virtual Result<std::span<std::byte>> InputBuffer(std::size_t index, std::size_t bytes) = 0;

  // Runs the forward pass over the first bytes of the input buffers.
  virtual Status Execute(const BatchShape& shape, ExecuteTimings* timings) = 0;

  // Output `index` of the last successful Execute: row-major, batch (or packed tokens) first.
  // Valid until the next Execute.
  virtual std::span<const std::byte> Output(std::size_t index) const = 0;
  // Full shape of output `index` of the last Execute, batch dimension included (for a token
  // model: [total_tokens, width]).
  virtual std::vector<std::int64_t> OutputShape(std::size_t index) const = 0;
};

class ExecutorFactory {
 public:
  virtual ~ExecutorFactory() = default;
  virtual ExecutionPath path() const = 0;
  // Human-readable summary for the load log line: "cuBLASLt bf16, 3 fused GEMMs, graphs for 9 buckets".
  virtual std::string Describe() const = 0;
  // Creates instance number `index`; all allocation happens here.
  virtual Result<std::unique_ptr<ExecutorInstance>> CreateInstance(int index) = 0;
  // The GPU whose memory the instances read inputs from and write outputs to themselves
  // (BatchShape::device_inputs/device_outputs); nullopt when they work in host memory only.
  virtual std::optional<std::int64_t> DirectDeviceMemory() const { return std::nullopt; }
  // True when an instance may be driven from any thread, one call at a time (it keeps no
  // thread-local state between calls), so that the scheduler may run a lone request on the
  // thread that received it (SchedulerOptions::run_on_caller_when_idle). False where the
  // executor's thread matters, as ATen's OpenMP pools do: each calling thread gets a team.
  virtual bool RunsOnAnyThread() const { return false; }
};

}  // namespace ltserve
