#include "gpu/bucket_graphs.h"

#include "gpu/cuda_check.h"

namespace ltserve::gpu {

Result<BucketGraphs> BucketGraphs::Capture(DeviceState& state, std::size_t buckets,
                                           bool cuda_graphs) {
  cudaStream_t stream = state.stream();
  for (std::size_t b = 0; b < buckets; ++b) LTSERVE_RETURN_IF_ERROR(state.Forward(b));
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  BucketGraphs graphs;
  if (!cuda_graphs) return graphs;
  for (std::size_t b = 0; b < buckets; ++b) {
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const Status forward = state.Forward(b);
    cudaGraph_t raw = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream, &raw);
    Graph graph(raw);
    LTSERVE_RETURN_IF_ERROR(forward);
    if (end != cudaSuccess) return CudaError(end, "cudaStreamEndCapture", __FILE__, __LINE__);
    cudaGraphExec_t exec = nullptr;
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&exec, graph.get(), 0));
    graphs.graphs_.emplace_back(exec);
  }
  return graphs;
}

Status BucketGraphs::Launch(DeviceState& state, std::size_t bucket) const {
  if (graphs_.empty()) return state.Forward(bucket);
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graphs_[bucket].get(), state.stream()));
  return Status::Ok();
}

}  // namespace ltserve::gpu
