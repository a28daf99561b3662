// How one batch's rows move between the instance's staging buffers, its device buffers and
// the requests' own GPU memory (CUDA shared memory, DeviceCopy in executor.h). Arithmetic
// only, no CUDA: the GPU instance issues what is planned here in one batched copy, and a CPU
// test checks the plans.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "executor/executor.h"

namespace ltserve::gpu {

struct PlannedCopy {
  void* destination = nullptr;
  const void* source = nullptr;
  std::size_t bytes = 0;
};

// Copies that fill `device` (the batch's input, `rows` rows of `row_bytes`): the requests' rows
// in GPU memory (`in_device`, input 0) from there, every other run of rows from `staged` (the
// host staging buffer). Appended to `copies`. INVALID_ARGUMENT for a device tensor that is not
// input 0, not its rows' size, outside the batch, or before the one listed ahead of it.
Status PlanInputCopies(std::span<const DeviceCopy> in_device, std::int64_t rows,
                       std::size_t row_bytes, const std::byte* staged, std::byte* device,
                       std::vector<PlannedCopy>* copies);

// Copies that take the batch's output (`rows` rows of `row_bytes` at `device`) to where it is
// read: the rows of each entry of `to_device` (output 0) into its GPU memory when they fit its
// room, every other run of rows to `staged` (the host output buffer). Rows that do not fit their
// room go to `staged` like the rest; the response then refuses that request's output.
// INVALID_ARGUMENT as for PlanInputCopies.
Status PlanOutputCopies(std::span<const DeviceCopy> to_device, std::int64_t rows,
                        std::size_t row_bytes, const std::byte* device, std::byte* staged,
                        std::vector<PlannedCopy>* copies);

}  // namespace ltserve::gpu
