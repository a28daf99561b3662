// SharedMemoryRegistry on real POSIX shm objects: registration with Triton's errors, bounds on
// every slice, and regions that outlive Unregister while a request holds them.
#include "shm/shared_memory_registry.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace ltserve {
namespace {

// A shm object of `size` bytes, each byte its index mod 251, removed at the end of the test.
class ShmObject {
 public:
  explicit ShmObject(std::size_t size)
      : key_("/ltserve-registry-test-" + std::to_string(getpid()) + "-" + std::to_string(next_++)) {
    const int fd = shm_open(key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    std::string bytes(size, '\0');
    for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i % 251);
    EXPECT_EQ(write(fd, bytes.data(), size), static_cast<ssize_t>(size));
    close(fd);
  }
  ~ShmObject() { shm_unlink(key_.c_str()); }
  const std::string& key() const { return key_; }

 private:
  static inline int next_ = 0;
  std::string key_;
};

TEST(SharedMemoryRegistry, RegisteredRegionIsListedWithItsKeyOffsetAndSize) {
  ShmObject object(8192);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.RegisterSystem("r", object.key(), 4100, 100).ok());
  auto regions = registry.Regions(SharedMemoryKind::kSystem, "");
  ASSERT_TRUE(regions.ok());
  ASSERT_EQ(regions->size(), 1u);
  EXPECT_EQ((*regions)[0]->key(), object.key());
  EXPECT_EQ((*regions)[0]->offset(), 4100u);
  EXPECT_EQ((*regions)[0]->byte_size(), 100u);
  EXPECT_TRUE(registry.Regions(SharedMemoryKind::kCuda, "")->empty());
}

TEST(SharedMemoryRegistry, UnalignedOffsetMapsTheRightBytes) {
  ShmObject object(8192);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.RegisterSystem("r", object.key(), 4100, 100).ok());
  auto slice = registry.Slice("r", 10, 4, "input 'x'");
  ASSERT_TRUE(slice.ok()) << slice.status().message();
  const std::byte* bytes = slice->region->host_data() + slice->offset;
  EXPECT_EQ(static_cast<int>(bytes[0]), (4100 + 10) % 251);
}

TEST(SharedMemoryRegistry, SameNameTwiceIsAlreadyExists) {
  ShmObject object(64);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.RegisterSystem("r", object.key(), 0, 64).ok());
  const Status again = registry.RegisterSystem("r", object.key(), 0, 64);
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(again.message(), "shared memory region 'r' already in manager");
}

TEST(SharedMemoryRegistry, RegionOutsideTheObjectIsRefused) {
  ShmObject object(64);
  SharedMemoryRegistry registry;
  EXPECT_EQ(registry.RegisterSystem("r", object.key(), 1, 64).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.RegisterSystem("r", object.key(), UINT64_MAX, 2).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.RegisterSystem("r", object.key(), 0, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.RegisterSystem("r", "/ltserve-no-such-key", 0, 8).code(),
            StatusCode::kInvalidArgument);
}

TEST(SharedMemoryRegistry, SliceOutsideTheRegionIsInvalidArgument) {
  ShmObject object(64);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.RegisterSystem("r", object.key(), 0, 64).ok());
  EXPECT_TRUE(registry.Slice("r", 0, 64, "input 'x'").ok());
  EXPECT_EQ(registry.Slice("r", 1, 64, "input 'x'").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Slice("r", 64, 0, "input 'x'").status().code(), StatusCode::kInvalidArgument);
  // offset + byte_size would wrap around
  EXPECT_EQ(registry.Slice("r", 8, UINT64_MAX - 4, "input 'x'").status().code(),
            StatusCode::kInvalidArgument);
  const Status unknown = registry.Slice("nope", 0, 1, "output 'y'").status();
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.message(), "output 'y' names shared memory region 'nope', which is not registered");
}

TEST(SharedMemoryRegistry, HeldSliceStaysMappedAfterUnregister) {
  ShmObject object(64);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.RegisterSystem("r", object.key(), 0, 64).ok());
  auto slice = registry.Slice("r", 0, 64, "input 'x'");
  ASSERT_TRUE(slice.ok());
  registry.Unregister(SharedMemoryKind::kSystem, "");
  EXPECT_EQ(registry.Regions(SharedMemoryKind::kSystem, "r").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(registry.Slice("r", 0, 1, "input 'x'").ok());
  const std::byte one{1};
  ASSERT_TRUE(slice->region->CopyFromHost(5, std::span(&one, 1)).ok());  // still mapped
  EXPECT_EQ(slice->region->host_data()[5], one);
}

TEST(SharedMemoryRegistry, UnregisterOfTheOtherKindOrAnUnknownNameKeepsTheRegion) {
  ShmObject object(64);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.RegisterSystem("r", object.key(), 0, 64).ok());
  registry.Unregister(SharedMemoryKind::kCuda, "r");
  registry.Unregister(SharedMemoryKind::kSystem, "other");
  EXPECT_TRUE(registry.Regions(SharedMemoryKind::kSystem, "r").ok());
  EXPECT_EQ(registry.Regions(SharedMemoryKind::kCuda, "r").status().code(), StatusCode::kNotFound);
}

TEST(SharedMemoryRegistry, CudaRegionWithoutAGpuIsUnavailableWithTheReason) {
  SharedMemoryRegistry registry;
  const Status status = registry.RegisterCuda("c", std::string(64, '\0'), 0, 64);
  if (status.code() != StatusCode::kUnavailable) {
    GTEST_SKIP() << "a GPU is usable here; the CUDA path is tested by scripts/gpu.sh";
  }
  EXPECT_NE(status.message().find("failed to register CUDA shared memory region 'c'"),
            std::string::npos)
      << status.message();
  EXPECT_TRUE(registry.Regions(SharedMemoryKind::kCuda, "")->empty());
}

}  // namespace
}  // namespace ltserve
