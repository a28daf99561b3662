#include "shm/cuda_ipc.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>

namespace ltserve {

namespace {

std::string CudaText(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

// Device memory of another process, opened from its IPC handle; closed with the last reference.
class CudaIpcRegion final : public SharedMemoryRegion {
 public:
  CudaIpcRegion(const std::string& name, std::int64_t device_id, std::size_t byte_size, void* base)
      : SharedMemoryRegion(name, SharedMemoryKind::kCuda, byte_size, "", 0, device_id),
        base_(base) {}

  ~CudaIpcRegion() override {
    cudaSetDevice(static_cast<int>(device_id()));
    cudaIpcCloseMemHandle(base_);
  }

  std::byte* host_data() const override { return nullptr; }
  void* device_data() const override { return base_; }

  Status CopyToHost(std::size_t offset, std::span<std::byte> destination) const override {
    return Check(cudaMemcpy(destination.data(), static_cast<const std::byte*>(base_) + offset,
                            destination.size(), cudaMemcpyDeviceToHost),
                 "reading");
  }
  Status CopyFromHost(std::size_t offset, std::span<const std::byte> source) const override {
    return Check(cudaMemcpy(static_cast<std::byte*>(base_) + offset, source.data(), source.size(),
                            cudaMemcpyHostToDevice),
                 "writing");
  }

 private:
  Status Check(cudaError_t error, const char* doing) const {
    if (error == cudaSuccess) return Status::Ok();
    return Internal(std::string(doing) + " CUDA shared memory region '" + name() + "' failed (" +
                    CudaText(error) + ")");
  }

  void* const base_;
};

// The size of the allocation that holds `pointer`, from the driver's cuMemGetAddressRange,
// reached through the runtime so that the server does not link libcuda (absent without a GPU
// driver). 0 when the driver does not say.
std::size_t AllocationSize(void* pointer) {
  using GetAddressRange = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &function, 12000,
                                       cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || function == nullptr) {
    return 0;
  }
  CUdeviceptr base = 0;
  std::size_t size = 0;
  if (reinterpret_cast<GetAddressRange>(function)(&base, &size,
                                                  reinterpret_cast<CUdeviceptr>(pointer)) !=
      CUDA_SUCCESS) {
    return 0;
  }
  return size;
}

}  // namespace

Result<std::shared_ptr<const SharedMemoryRegion>> OpenCudaIpcRegion(const std::string& name,
                                                                    std::string_view raw_handle,
                                                                    std::int64_t device_id,
                                                                    std::uint64_t byte_size) {
  const std::string failed = "failed to register CUDA shared memory region '" + name + "': ";
  int devices = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&devices); error != cudaSuccess || devices == 0) {
    return Unavailable(failed + "this server has no usable GPU (" +
                       (error != cudaSuccess ? CudaText(error) : std::string("no devices")) +
                       "); use system shared memory or send the data in the request");
  }
  if (device_id < 0 || device_id >= devices) {
    return InvalidArgument(failed + "device_id " + std::to_string(device_id) +
                           " is not one of the server's " + std::to_string(devices) + " GPU(s)");
  }
  cudaIpcMemHandle_t handle;
  if (raw_handle.size() != sizeof(handle)) {
    return InvalidArgument(failed + "raw_handle has " + std::to_string(raw_handle.size()) +
                           " bytes; a cudaIpcMemHandle_t has " + std::to_string(sizeof(handle)));
  }
  if (byte_size == 0) return InvalidArgument(failed + "byte_size must be at least 1");
  std::memcpy(&handle, raw_handle.data(), sizeof(handle));
  if (const cudaError_t error = cudaSetDevice(static_cast<int>(device_id)); error != cudaSuccess) {
    return Unavailable(failed + "cannot use GPU " + std::to_string(device_id) + " (" +
                       CudaText(error) + ")");
  }
  void* base = nullptr;
  if (const cudaError_t error =
          cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess);
      error != cudaSuccess) {
    return InvalidArgument(failed + "the IPC handle does not open (" + CudaText(error) + ")");
  }
  // The handle names a whole allocation; the client's byte_size must fit in it.
  const std::size_t allocation_size = AllocationSize(base);
  if (allocation_size == 0 || byte_size > allocation_size) {
    cudaIpcCloseMemHandle(base);
    return InvalidArgument(failed + "byte_size " + std::to_string(byte_size) +
                           " is larger than the allocation (" +
                           (allocation_size == 0 ? std::string("whose size the driver did not tell")
                                                 : std::to_string(allocation_size) + " bytes") +
                           ")");
  }
  return std::shared_ptr<const SharedMemoryRegion>(
      new CudaIpcRegion(name, device_id, static_cast<std::size_t>(byte_size), base));
}

}  // namespace ltserve
