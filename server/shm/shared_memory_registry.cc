#include "shm/shared_memory_registry.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "shm/cuda_ipc.h"

namespace ltserve {

namespace {

std::string ErrnoText() { return std::strerror(errno); }

// A POSIX shm object's part [offset, offset + byte_size), mapped read-write.
class SystemRegion final : public SharedMemoryRegion {
 public:
  static Result<std::shared_ptr<const SharedMemoryRegion>> Open(const std::string& name,
                                                                const std::string& key,
                                                                std::uint64_t offset,
                                                                std::uint64_t byte_size) {
    const std::string failed = "failed to register system shared memory region '" + name + "': ";
    if (byte_size == 0) return InvalidArgument(failed + "byte_size must be at least 1");
    const int fd = shm_open(key.c_str(), O_RDWR, 0);
    if (fd < 0) {
      return InvalidArgument(failed + "unable to open shared memory key '" + key + "' (" +
                             ErrnoText() + ")");
    }
    struct stat info {};
    if (fstat(fd, &info) != 0) {
      const std::string why = ErrnoText();
      close(fd);
      return InvalidArgument(failed + "cannot stat key '" + key + "' (" + why + ")");
    }
    const auto object_size = static_cast<std::uint64_t>(info.st_size);
    if (offset > object_size || byte_size > object_size - offset) {
      close(fd);
      return InvalidArgument(failed + "offset " + std::to_string(offset) + " + byte_size " +
                             std::to_string(byte_size) + " is outside key '" + key + "' of " +
                             std::to_string(object_size) + " bytes");
    }
    // mmap wants a page-aligned file offset: map from the page holding `offset`.
    const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
    const std::uint64_t aligned = offset - offset % page;
    const std::size_t map_size = static_cast<std::size_t>(byte_size + (offset - aligned));
    void* mapped = mmap(nullptr, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                        static_cast<off_t>(aligned));
    const std::string why = ErrnoText();
    close(fd);  // the mapping stays valid without the descriptor
    if (mapped == MAP_FAILED) return InvalidArgument(failed + "mmap failed (" + why + ")");
    return std::shared_ptr<const SharedMemoryRegion>(
        new SystemRegion(name, key, offset, byte_size, mapped, map_size, offset - aligned));
  }

  ~SystemRegion() override { munmap(mapping_, mapping_size_); }

  std::byte* host_data() const override { return static_cast<std::byte*>(mapping_) + skip_; }

  Status CopyToHost(std::size_t offset, std::span<std::byte> destination) const override {
    std::memcpy(destination.data(), host_data() + offset, destination.size());
    return Status::Ok();
  }
  Status CopyFromHost(std::size_t offset, std::span<const std::byte> source) const override {
    std::memcpy(host_data() + offset, source.data(), source.size());
    return Status::Ok();
  }

 private:
  SystemRegion(const std::string& name, const std::string& key, std::uint64_t offset,
               std::uint64_t byte_size, void* mapping, std::size_t mapping_size, std::size_t skip)
      : SharedMemoryRegion(name, SharedMemoryKind::kSystem, static_cast<std::size_t>(byte_size),
                           key, offset, 0),
        mapping_(mapping), mapping_size_(mapping_size), skip_(skip) {}

  void* const mapping_;
  const std::size_t mapping_size_;
  const std::size_t skip_;  // from the page boundary to the region's first byte
};

Status NameTaken(const std::string& name) {
  return Status(StatusCode::kAlreadyExists, "shared memory region '" + name + "' already in manager");
}

}  // namespace

Status SharedMemoryRegistry::CheckNameFree(const std::string& name) const {
  std::lock_guard lock(mutex_);
  return regions_.count(name) != 0 ? NameTaken(name) : Status::Ok();
}

Status SharedMemoryRegistry::Add(std::shared_ptr<const SharedMemoryRegion> region) {
  std::lock_guard lock(mutex_);
  if (regions_.count(region->name()) != 0) return NameTaken(region->name());
  regions_.emplace(region->name(), std::move(region));
  return Status::Ok();
}

Status SharedMemoryRegistry::RegisterSystem(const std::string& name, const std::string& key,
                                            std::uint64_t offset, std::uint64_t byte_size) {
  // Checked first too, so that a taken name gets Triton's error even when the key is bad.
  LTSERVE_RETURN_IF_ERROR(CheckNameFree(name));
  LTSERVE_ASSIGN_OR_RETURN(auto region, SystemRegion::Open(name, key, offset, byte_size));
  return Add(std::move(region));
}

Status SharedMemoryRegistry::RegisterCuda(const std::string& name, std::string_view raw_handle,
                                          std::int64_t device_id, std::uint64_t byte_size) {
  LTSERVE_RETURN_IF_ERROR(CheckNameFree(name));
  LTSERVE_ASSIGN_OR_RETURN(auto region,
                           OpenCudaIpcRegion(name, raw_handle, device_id, byte_size));
  return Add(std::move(region));
}

void SharedMemoryRegistry::Unregister(SharedMemoryKind kind, const std::string& name) {
  // Regions are released outside the lock: munmap or cudaIpcCloseMemHandle may take a while.
  std::vector<std::shared_ptr<const SharedMemoryRegion>> released;
  std::lock_guard lock(mutex_);
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (it->second->kind() == kind && (name.empty() || it->first == name)) {
      released.push_back(std::move(it->second));
      it = regions_.erase(it);
    } else {
      ++it;
    }
  }
}

Result<std::vector<std::shared_ptr<const SharedMemoryRegion>>> SharedMemoryRegistry::Regions(
    SharedMemoryKind kind, const std::string& name) const {
  const char* kind_name = kind == SharedMemoryKind::kSystem ? "system" : "cuda";
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<const SharedMemoryRegion>> out;
  if (!name.empty()) {
    auto it = regions_.find(name);
    if (it == regions_.end() || it->second->kind() != kind) {
      return NotFound(std::string("Unable to find ") + kind_name + " shared memory region: '" +
                      name + "'");
    }
    out.push_back(it->second);
    return out;
  }
  for (const auto& [region_name, region] : regions_) {
    if (region->kind() == kind) out.push_back(region);
  }
  return out;
}

Result<SharedMemorySlice> SharedMemoryRegistry::Slice(const std::string& name,
                                                      std::uint64_t offset,
                                                      std::uint64_t byte_size,
                                                      const std::string& what) const {
  std::shared_ptr<const SharedMemoryRegion> region;
  {
    std::lock_guard lock(mutex_);
    auto it = regions_.find(name);
    if (it == regions_.end()) {
      return InvalidArgument(what + " names shared memory region '" + name +
                             "', which is not registered");
    }
    region = it->second;
  }
  const std::uint64_t size = region->byte_size();
  if (offset >= size || byte_size > size - offset) {
    return InvalidArgument(what + ": shared_memory_offset " + std::to_string(offset) +
                           " + shared_memory_byte_size " + std::to_string(byte_size) +
                           " is outside region '" + name + "' of " + std::to_string(size) +
                           " bytes");
  }
  return SharedMemorySlice{std::move(region), static_cast<std::size_t>(offset),
                           static_cast<std::size_t>(byte_size)};
}

}  // namespace ltserve
