// cuBLASLt's memset nodes taken off a captured pass's critical path.
//
// A persistent cuBLASLt kernel with a dynamic tile schedule needs a tile counter at zero, so
// cuBLASLt zeroes 4 bytes of the workspace before each launch: in a captured graph, a memset
// node between the kernel before and the GEMM. Each such memset cost a BERT-base pass 3.8-4.7
// µs on the H100 (two dependency hops instead of one: ~3.5 % of the pass at 32 and 128
// sequences, bench/RESULTS.md). OverlapWorkspaceMemsets moves each such node after the last
// user of its workspace region instead, so it runs while the kernels between run, and the GEMM
// waits for the memset and for the nodes it used to wait for.
//
// That is safe when nothing after the region's previous user touches the region before the
// GEMM does: DeviceState gives each stream's cuBLASLt calls two regions in turn, so the kernel
// just before a call never works in the region its memset clears.
//
// Thread-safety: none; the graph must not be instantiated or captured into meanwhile.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "common/status.h"

namespace ltserve::gpu {

// One cuBLASLt call as it was captured: the region of the workspace it was given, the capture
// dependencies of its stream just before it (what its first node waits for), and the last
// nodes of the previous captured call given the same region on the same stream (empty: none
// in this graph, so the region is free from the graph's start).
struct CapturedWorkspaceCall {
  const void* region = nullptr;
  std::size_t region_bytes = 0;
  std::vector<cudaGraphNode_t> entry;
  std::vector<cudaGraphNode_t> previous_user;
};

// The nodes the next node captured on `stream` will depend on; empty when it is not capturing.
Result<std::vector<cudaGraphNode_t>> CaptureDependencies(cudaStream_t stream);

// For each call whose first node is a memset into its region (its dependencies are exactly the
// call's entry), makes the memset depend on previous_user instead, and its dependents on the
// entry nodes. Returns how many memsets moved.
Result<int> OverlapWorkspaceMemsets(cudaGraph_t graph,
                                    const std::vector<CapturedWorkspaceCall>& calls);

}  // namespace ltserve::gpu
