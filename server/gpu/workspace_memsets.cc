#include "gpu/workspace_memsets.h"

#include <algorithm>

#include "gpu/cuda_check.h"

namespace ltserve::gpu {

namespace {

// A node's dependencies (or dependents) with their edge data: edges of programmatic launches
// carry data, and asking without it for such an edge is an error (cudaErrorLossyQuery).
struct Edges {
  std::vector<cudaGraphNode_t> nodes;
  std::vector<cudaGraphEdgeData> data;
};

Result<Edges> Dependencies(cudaGraphNode_t node) {
  std::size_t count = 0;
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &count));
  Edges edges{std::vector<cudaGraphNode_t>(count), std::vector<cudaGraphEdgeData>(count)};
  if (count > 0) {
    LTSERVE_CUDA_RETURN_IF_ERROR(
        cudaGraphNodeGetDependencies(node, edges.nodes.data(), edges.data.data(), &count));
  }
  return edges;
}

Result<std::vector<cudaGraphNode_t>> Dependents(cudaGraphNode_t node) {
  std::size_t count = 0;
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphNodeGetDependentNodes(node, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  std::vector<cudaGraphEdgeData> data(count);
  if (count > 0) {
    LTSERVE_CUDA_RETURN_IF_ERROR(
        cudaGraphNodeGetDependentNodes(node, nodes.data(), data.data(), &count));
  }
  return nodes;
}

bool SameNodes(std::vector<cudaGraphNode_t> a, std::vector<cudaGraphNode_t> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

bool Contains(const std::vector<cudaGraphNode_t>& nodes, cudaGraphNode_t node) {
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

// The call whose region holds `dst` and whose first node `memset` is.
const CapturedWorkspaceCall* FindCall(const std::vector<CapturedWorkspaceCall>& calls,
                                      const void* dst, const std::vector<cudaGraphNode_t>& preds) {
  const auto* at = static_cast<const std::byte*>(dst);
  for (const CapturedWorkspaceCall& call : calls) {
    const auto* begin = static_cast<const std::byte*>(call.region);
    if (at < begin || at >= begin + call.region_bytes || call.entry.empty()) continue;
    if (SameNodes(call.entry, preds)) return &call;
  }
  return nullptr;
}

}  // namespace

Result<std::vector<cudaGraphNode_t>> CaptureDependencies(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* nodes = nullptr;
  const cudaGraphEdgeData* data = nullptr;
  std::size_t count = 0;
  LTSERVE_CUDA_RETURN_IF_ERROR(
      cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &nodes, &data, &count));
  if (status != cudaStreamCaptureStatusActive || nodes == nullptr) return std::vector<cudaGraphNode_t>{};
  return std::vector<cudaGraphNode_t>(nodes, nodes + count);
}

Result<int> OverlapWorkspaceMemsets(cudaGraph_t graph,
                                    const std::vector<CapturedWorkspaceCall>& calls) {
  if (calls.empty()) return 0;
  std::size_t count = 0;
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphGetNodes(graph, nodes.data(), &count));
  int moved = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeMemset) continue;
    cudaMemsetParams params{};
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphMemsetNodeGetParams(node, &params));
    LTSERVE_ASSIGN_OR_RETURN(Edges preds, Dependencies(node));
    const CapturedWorkspaceCall* call = FindCall(calls, params.dst, preds.nodes);
    if (call == nullptr) continue;
    LTSERVE_ASSIGN_OR_RETURN(std::vector<cudaGraphNode_t> dependents, Dependents(node));
    // The dependents first wait for the entry nodes themselves, so no order is lost while the
    // memset's own edges change.
    for (cudaGraphNode_t dependent : dependents) {
      LTSERVE_ASSIGN_OR_RETURN(Edges has, Dependencies(dependent));
      for (cudaGraphNode_t from : preds.nodes) {
        if (Contains(has.nodes, from)) continue;
        LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphAddDependencies(graph, &from, &dependent, nullptr, 1));
      }
    }
    const std::vector<cudaGraphNode_t> to(preds.nodes.size(), node);
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphRemoveDependencies(
        graph, preds.nodes.data(), to.data(), preds.data.data(), preds.nodes.size()));
    for (cudaGraphNode_t from : call->previous_user) {
      LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphAddDependencies(graph, &from, &node, nullptr, 1));
    }
    ++moved;
  }
  return moved;
}

}  // namespace ltserve::gpu
