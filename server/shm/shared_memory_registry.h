// The shared-memory extensions' regions: system shared memory (a POSIX shm object, shm_open +
// mmap) and CUDA shared memory (a cudaIpcMemHandle_t opened with cudaIpcOpenMemHandle), by name.
// Inference requests read inputs from and write outputs into a registered region instead of
// carrying the bytes in the message.
//
// A region is held by shared_ptr: the registry holds one reference, each request that names the
// region another. Unregister drops the registry's reference only, so a request in flight keeps
// its mapping until it completes; the last reference unmaps (or closes the IPC handle).
//
// Thread-safety: every method may be called concurrently; the name map is guarded by one mutex,
// and a region's own state is immutable after registration (its bytes belong to the client).
// No CUDA types appear here: gRPC code includes this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ltserve {

enum class SharedMemoryKind { kSystem, kCuda };

// One registered region. The bytes are the client's and may change at any time; the server
// only copies in and out within [0, byte_size).
class SharedMemoryRegion {
 public:
  virtual ~SharedMemoryRegion() = default;
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  const std::string& name() const { return name_; }
  SharedMemoryKind kind() const { return kind_; }
  std::size_t byte_size() const { return byte_size_; }
  const std::string& key() const { return key_; }          // system regions
  std::uint64_t offset() const { return offset_; }         // in the shm object; system regions
  std::int64_t device_id() const { return device_id_; }    // CUDA regions

  // The mapped bytes when the server can address them directly (system memory), else nullptr.
  virtual std::byte* host_data() const = 0;
  // The region's address in GPU device_id()'s memory (CUDA regions), for a GPU executor that
  // copies device to device; nullptr for system memory.
  virtual void* device_data() const { return nullptr; }
  // Copies between the region at `offset` and host memory; the caller has bounds-checked.
  virtual Status CopyToHost(std::size_t offset, std::span<std::byte> destination) const = 0;
  virtual Status CopyFromHost(std::size_t offset, std::span<const std::byte> source) const = 0;

 protected:
  SharedMemoryRegion(std::string name, SharedMemoryKind kind, std::size_t byte_size,
                     std::string key, std::uint64_t offset, std::int64_t device_id)
      : name_(std::move(name)), kind_(kind), byte_size_(byte_size), key_(std::move(key)),
        offset_(offset), device_id_(device_id) {}

 private:
  const std::string name_;
  const SharedMemoryKind kind_;
  const std::size_t byte_size_;
  const std::string key_;
  const std::uint64_t offset_;
  const std::int64_t device_id_;
};

// A bounds-checked part of a region, holding the region alive.
struct SharedMemorySlice {
  std::shared_ptr<const SharedMemoryRegion> region;
  std::size_t offset = 0;
  std::size_t byte_size = 0;
};

class SharedMemoryRegistry {
 public:
  SharedMemoryRegistry() = default;
  SharedMemoryRegistry(const SharedMemoryRegistry&) = delete;
  SharedMemoryRegistry& operator=(const SharedMemoryRegistry&) = delete;

  // ALREADY_EXISTS when `name` is taken (by either kind, as in Triton); INVALID_ARGUMENT when
  // the key cannot be opened or [offset, offset + byte_size) is not inside the shm object.
  Status RegisterSystem(const std::string& name, const std::string& key, std::uint64_t offset,
                        std::uint64_t byte_size);
  // `raw_handle` is a cudaIpcMemHandle_t's bytes. UNAVAILABLE when the server has no usable
  // GPU (or was built without CUDA); INVALID_ARGUMENT for a handle that does not open.
  Status RegisterCuda(const std::string& name, std::string_view raw_handle,
                      std::int64_t device_id, std::uint64_t byte_size);
  // Registers a region opened elsewhere (the two above open theirs, then add it);
  // ALREADY_EXISTS when its name is taken.
  Status Add(std::shared_ptr<const SharedMemoryRegion> region);

  // Drops `name` (every region of `kind` when empty). An unknown name is not an error, as in
  // Triton; a name registered as the other kind is left alone.
  void Unregister(SharedMemoryKind kind, const std::string& name);

  // The regions of `kind`, or the one named (NOT_FOUND when there is none of that kind).
  Result<std::vector<std::shared_ptr<const SharedMemoryRegion>>> Regions(
      SharedMemoryKind kind, const std::string& name) const;

  // The part [offset, offset + byte_size) of region `name`. Every failure (unknown region, a
  // part outside it) is INVALID_ARGUMENT naming `what` ("input 'x'"): it is the request's fault.
  Result<SharedMemorySlice> Slice(const std::string& name, std::uint64_t offset,
                                  std::uint64_t byte_size, const std::string& what) const;

 private:
  Status CheckNameFree(const std::string& name) const;

  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const SharedMemoryRegion>> regions_;
};

}  // namespace ltserve
