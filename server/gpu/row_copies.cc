#include "gpu/row_copies.h"

#include <string>

namespace ltserve::gpu {
namespace {

// The part of the batch an entry covers, checked against the batch and the entry before it.
Status CheckRows(const DeviceCopy& copy, std::int64_t rows, std::int64_t previous_end,
                 const char* what) {
  if (copy.index != 0) {
    return InvalidArgument(std::string(what) + " " + std::to_string(copy.index) +
                           " in GPU memory: the model has one");
  }
  if (copy.rows < 1 || copy.first_row < previous_end || copy.first_row + copy.rows > rows) {
    return InvalidArgument(std::string(what) + " rows [" + std::to_string(copy.first_row) + ", " +
                           std::to_string(copy.first_row + copy.rows) +
                           ") in GPU memory are not in order inside the batch of " +
                           std::to_string(rows) + " rows");
  }
  if (copy.device == nullptr) {
    return InvalidArgument(std::string(what) + " in GPU memory without an address");
  }
  return Status::Ok();
}

std::size_t Bytes(std::int64_t rows, std::size_t row_bytes) {
  return static_cast<std::size_t>(rows) * row_bytes;
}

void Add(std::vector<PlannedCopy>* copies, void* destination, const void* source,
         std::size_t bytes) {
  if (bytes > 0) copies->push_back(PlannedCopy{destination, source, bytes});
}

enum class Direction { kIntoBatch, kOutOfBatch };

// Walks the batch's rows in order: per entry, the run of staged rows before it, then its own
// rows; last the staged run after the last entry. Into the batch (inputs) every entry must be
// exactly its rows; out of it (outputs) an entry without room for its rows is left out and its
// rows go to staging with the rest.
Status Plan(std::span<const DeviceCopy> entries, std::int64_t rows, std::size_t row_bytes,
            std::byte* batch, std::byte* staged, Direction direction,
            std::vector<PlannedCopy>* copies) {
  const bool into = direction == Direction::kIntoBatch;
  const auto staged_run = [&](std::int64_t first, std::int64_t end) {
    std::byte* in_batch = batch + Bytes(first, row_bytes);
    std::byte* in_staging = staged + Bytes(first, row_bytes);
    Add(copies, into ? in_batch : in_staging, into ? in_staging : in_batch,
        Bytes(end - first, row_bytes));
  };
  std::int64_t next = 0;  // the first row not yet planned
  for (const DeviceCopy& entry : entries) {
    LTSERVE_RETURN_IF_ERROR(CheckRows(entry, rows, next, into ? "input" : "output"));
    const std::size_t bytes = Bytes(entry.rows, row_bytes);
    if (into && entry.bytes != bytes) {
      return InvalidArgument("input in GPU memory has " + std::to_string(entry.bytes) +
                             " bytes for " + std::to_string(entry.rows) + " rows of " +
                             std::to_string(row_bytes));
    }
    if (!into && bytes > entry.bytes) continue;  // does not fit: staged with the rest
    staged_run(next, entry.first_row);
    std::byte* in_batch = batch + Bytes(entry.first_row, row_bytes);
    Add(copies, into ? in_batch : entry.device, into ? entry.device : in_batch, bytes);
    next = entry.first_row + entry.rows;
  }
  staged_run(next, rows);
  return Status::Ok();
}

}  // namespace

Status PlanInputCopies(std::span<const DeviceCopy> in_device, std::int64_t rows,
                       std::size_t row_bytes, const std::byte* staged, std::byte* device,
                       std::vector<PlannedCopy>* copies) {
  // Staging is only read on this direction.
  return Plan(in_device, rows, row_bytes, device, const_cast<std::byte*>(staged),
              Direction::kIntoBatch, copies);
}

Status PlanOutputCopies(std::span<const DeviceCopy> to_device, std::int64_t rows,
                        std::size_t row_bytes, const std::byte* device, std::byte* staged,
                        std::vector<PlannedCopy>* copies) {
  // The batch's buffer is only read on this direction.
  return Plan(to_device, rows, row_bytes, const_cast<std::byte*>(device), staged,
              Direction::kOutOfBatch, copies);
}

}  // namespace ltserve::gpu
