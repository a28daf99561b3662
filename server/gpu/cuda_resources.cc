#include "gpu/cuda_resources.h"

#include <utility>

#include "gpu/cuda_check.h"

namespace ltserve::gpu {

Result<Stream> CreateStream() {
  cudaStream_t stream = nullptr;
  // Non-blocking: the legacy default stream (used by libraries in the same process) must not
  // serialise against our instances.
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return Stream(stream);
}

Result<Event> CreateEvent(bool timing) {
  cudaEvent_t event = nullptr;
  LTSERVE_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming));
  return Event(event);
}

Result<LtHandle> CreateLtHandle() {
  cublasLtHandle_t handle = nullptr;
  LTSERVE_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&handle));
  return LtHandle(handle);
}

Result<Layout> CreateLayout(cudaDataType_t type, std::uint64_t rows, std::uint64_t cols,
                            std::int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  LTSERVE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld));
  return Layout(layout);
}

Result<DeviceBuffer> DeviceBuffer::Create(std::size_t bytes, const std::string& what) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;
  const cudaError_t code = cudaMalloc(&buffer.data_, bytes);
  if (code != cudaSuccess) {
    buffer.data_ = nullptr;
    return CudaError(code, "cudaMalloc", __FILE__, __LINE__)
        .WithContext(std::to_string(bytes) + " bytes for " + what + ": ");
  }
  buffer.bytes_ = bytes;
  return buffer;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

Result<PinnedBuffer> PinnedBuffer::Create(std::size_t bytes, const std::string& what) {
  PinnedBuffer buffer;
  if (bytes == 0) return buffer;
  void* data = nullptr;
  const cudaError_t code = cudaHostAlloc(&data, bytes, cudaHostAllocDefault);
  if (code != cudaSuccess) {
    return CudaError(code, "cudaHostAlloc", __FILE__, __LINE__)
        .WithContext(std::to_string(bytes) + " pinned bytes for " + what + ": ");
  }
  buffer.data_ = static_cast<std::byte*>(data);
  buffer.bytes_ = bytes;
  return buffer;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

}  // namespace ltserve::gpu
