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

template <typename Allocation>
Result<Buffer<Allocation>> Buffer<Allocation>::Create(std::size_t bytes, const std::string& what) {
  Buffer buffer;
  if (bytes == 0) return buffer;
  void* data = nullptr;
  const cudaError_t code = Allocation::Allocate(&data, bytes);
  if (code != cudaSuccess) {
    return CudaError(code, Allocation::kCall, __FILE__, __LINE__)
        .WithContext(std::to_string(bytes) + Allocation::kWhat + what + ": ");
  }
  buffer.data_ = static_cast<std::byte*>(data);
  buffer.bytes_ = bytes;
  return buffer;
}

template class Buffer<DeviceAllocation>;
template class Buffer<PinnedAllocation>;

Result<GraphExec> CaptureGraph(cudaStream_t stream, const std::function<Status()>& enqueue,
                               const std::function<Status(cudaGraph_t)>& edit) {
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const Status enqueued = enqueue();
  cudaGraph_t raw = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &raw);
  Graph graph(raw);
  LTSERVE_RETURN_IF_ERROR(enqueued);
  if (end != cudaSuccess) return CudaError(end, "cudaStreamEndCapture", __FILE__, __LINE__);
  if (edit) LTSERVE_RETURN_IF_ERROR(edit(graph.get()));
  cudaGraphExec_t exec = nullptr;
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&exec, graph.get(), 0));
  return GraphExec(exec);
}

}  // namespace ltserve::gpu
