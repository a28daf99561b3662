// RAII owners for every CUDA and cuBLASLt resource server/gpu creates. Each is created by a
// static Create() returning Result (construction can fail), is move-only, and releases its
// resource in the destructor (release errors are ignored: nothing useful can be done there).
//
// Thread-safety: none of these objects is safe to use from two threads at once.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "common/status.h"

namespace ltserve::gpu {

struct StreamDeleter { void operator()(cudaStream_t s) const { cudaStreamDestroy(s); } };
struct EventDeleter { void operator()(cudaEvent_t e) const { cudaEventDestroy(e); } };
struct GraphDeleter { void operator()(cudaGraph_t g) const { cudaGraphDestroy(g); } };
struct GraphExecDeleter { void operator()(cudaGraphExec_t g) const { cudaGraphExecDestroy(g); } };
struct LtHandleDeleter { void operator()(cublasLtHandle_t h) const { cublasLtDestroy(h); } };
struct MatmulDescDeleter {
  void operator()(cublasLtMatmulDesc_t d) const { cublasLtMatmulDescDestroy(d); }
};
struct LayoutDeleter {
  void operator()(cublasLtMatrixLayout_t l) const { cublasLtMatrixLayoutDestroy(l); }
};
struct PreferenceDeleter {
  void operator()(cublasLtMatmulPreference_t p) const { cublasLtMatmulPreferenceDestroy(p); }
};

// The handle types are pointers to opaque structs, so unique_ptr over the pointee works.
using Stream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;
using Event = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;
using Graph = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter>;
using GraphExec = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter>;
using LtHandle = std::unique_ptr<std::remove_pointer_t<cublasLtHandle_t>, LtHandleDeleter>;
using MatmulDesc = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>, MatmulDescDeleter>;
using Layout = std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>, LayoutDeleter>;
using Preference =
    std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, PreferenceDeleter>;

Result<Stream> CreateStream();
Result<Event> CreateEvent(bool timing);
Result<LtHandle> CreateLtHandle();
Result<Layout> CreateLayout(cudaDataType_t type, std::uint64_t rows, std::uint64_t cols,
                            std::int64_t ld);
// What `enqueue` puts on `stream`, captured (this thread's capture mode) and instantiated,
// after `edit` (when given) has changed the captured graph. The capture is ended whatever
// `enqueue` returns, so the stream is usable after an error.
Result<GraphExec> CaptureGraph(cudaStream_t stream, const std::function<Status()>& enqueue,
                               const std::function<Status(cudaGraph_t)>& edit = {});

// How each kind of memory is allocated and freed.
struct DeviceAllocation {  // cudaMalloc: 256-byte aligned
  static constexpr const char* kCall = "cudaMalloc";
  static constexpr const char* kWhat = " bytes of device memory for ";
  static cudaError_t Allocate(void** data, std::size_t bytes) { return cudaMalloc(data, bytes); }
  static void Free(void* data) { cudaFree(data); }
};
struct PinnedAllocation {  // page-locked host memory, so async copies really are asynchronous
  static constexpr const char* kCall = "cudaHostAlloc";
  static constexpr const char* kWhat = " bytes of pinned host memory for ";
  static cudaError_t Allocate(void** data, std::size_t bytes) {
    return cudaHostAlloc(data, bytes, cudaHostAllocDefault);
  }
  static void Free(void* data) { cudaFreeHost(data); }
};

// One allocation, owned. `what` names the use in the out-of-memory message.
template <typename Allocation>
class Buffer {
 public:
  static Result<Buffer> Create(std::size_t bytes, const std::string& what);
  Buffer() = default;
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      if (data_ != nullptr) Allocation::Free(data_);
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (data_ != nullptr) Allocation::Free(data_);
  }

  std::byte* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

using DeviceBuffer = Buffer<DeviceAllocation>;
using PinnedBuffer = Buffer<PinnedAllocation>;

}  // namespace ltserve::gpu
