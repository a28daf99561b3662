#include "gpu/workspace_memsets.h"

#include <algorithm>

#include "gpu/cuda_check.h"

namespace ltserve::gpu {

namespace {

// A node's neighbours on one side. Edge data is asked for too: edges of programmatic launches
// carry some, and asking without it for such an edge is an error (cudaErrorLossyQuery).
Result<std::vector<cudaGraphNode_t>> Neighbours(cudaGraphNode_t node, bool dependencies) {
  const auto query = dependencies ? cudaGraphNodeGetDependencies : cudaGraphNodeGetDependentNodes;
  std::size_t count = 0;
  LTSERVE_CUDA_RETURN_IF_ERROR(query(node, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  std::vector<cudaGraphEdgeData> data(count);
  if (count > 0) LTSERVE_CUDA_RETURN_IF_ERROR(query(node, nodes.data(), data.data(), &count));
  return nodes;
}

bool SameNodes(std::vector<cudaGraphNode_t> a, std::vector<cudaGraphNode_t> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

// Whether the memset writes only within the zeroed start of `slot`.
bool WithinZeroedStart(const cudaMemsetParams& params, const void* slot,
                       const CounterSlots& slots) {
  if (params.height != 1) return false;
  const auto* begin = static_cast<const std::byte*>(slot);
  const auto* at = static_cast<const std::byte*>(params.dst);
  const std::size_t bytes = params.width * params.elementSize;
  return at >= begin && at + bytes <= begin + slots.zeroed_bytes;
}

// The call whose first node `memset` is, or null.
const CapturedWorkspaceCall* FindCall(const std::vector<CapturedWorkspaceCall>& calls,
                                      const cudaMemsetParams& params,
                                      const std::vector<cudaGraphNode_t>& dependencies,
                                      const CounterSlots& slots) {
  for (const CapturedWorkspaceCall& call : calls) {
    // An empty entry is a call at the graph's start: its memset is a root node.
    if (!WithinZeroedStart(params, call.slot, slots)) continue;
    if (SameNodes(call.entry, dependencies)) return &call;
  }
  return nullptr;
}

// Every node in the graph waits for a new memset of every slot's zeroed start.
Status ZeroSlotsFirst(cudaGraph_t graph, const CounterSlots& slots) {
  std::size_t count = 0;
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphGetRootNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> roots(count);
  if (count > 0) LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphGetRootNodes(graph, roots.data(), &count));
  cudaMemsetParams params{};
  params.dst = slots.base;
  params.pitch = slots.slot_bytes;
  params.value = 0;
  params.elementSize = 4;
  params.width = slots.zeroed_bytes / 4;
  params.height = slots.count;
  cudaGraphNode_t zero = nullptr;
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphAddMemsetNode(&zero, graph, nullptr, 0, &params));
  for (cudaGraphNode_t root : roots) {
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphAddDependencies(graph, &zero, &root, nullptr, 1));
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<cudaGraphNode_t>> CaptureDependencies(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* nodes = nullptr;
  const cudaGraphEdgeData* data = nullptr;
  std::size_t count = 0;
  LTSERVE_CUDA_RETURN_IF_ERROR(
      cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &nodes, &data, &count));
  if (status != cudaStreamCaptureStatusActive || nodes == nullptr) {
    return std::vector<cudaGraphNode_t>{};
  }
  return std::vector<cudaGraphNode_t>(nodes, nodes + count);
}

Result<int> ConsolidateWorkspaceMemsets(cudaGraph_t graph,
                                        const std::vector<CapturedWorkspaceCall>& calls,
                                        const CounterSlots& slots) {
  if (calls.empty() || slots.count == 0 || slots.zeroed_bytes % 4 != 0 ||
      slots.zeroed_bytes > slots.slot_bytes) {
    return 0;
  }
  std::size_t count = 0;
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphGetNodes(graph, nodes.data(), &count));
  int deleted = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeMemset) continue;
    cudaMemsetParams params{};
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphMemsetNodeGetParams(node, &params));
    LTSERVE_ASSIGN_OR_RETURN(std::vector<cudaGraphNode_t> before, Neighbours(node, true));
    if (FindCall(calls, params, before, slots) == nullptr) continue;
    LTSERVE_ASSIGN_OR_RETURN(std::vector<cudaGraphNode_t> after, Neighbours(node, false));
    for (cudaGraphNode_t dependent : after) {
      LTSERVE_ASSIGN_OR_RETURN(std::vector<cudaGraphNode_t> has, Neighbours(dependent, true));
      for (cudaGraphNode_t from : before) {
        if (std::find(has.begin(), has.end(), from) != has.end()) continue;
        LTSERVE_CUDA_RETURN_IF_ERROR(
            cudaGraphAddDependencies(graph, &from, &dependent, nullptr, 1));
      }
    }
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphDestroyNode(node));
    ++deleted;
  }
  if (deleted > 0) LTSERVE_RETURN_IF_ERROR(ZeroSlotsFirst(graph, slots));
  return deleted;
}

}  // namespace ltserve::gpu
