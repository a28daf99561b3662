// cuBLASLt's tile-counter memsets in a captured pass, many nodes made one.
//
// A persistent cuBLASLt kernel with a dynamic tile schedule needs a tile counter at zero, so
// cuBLASLt zeroes 4 bytes of the workspace before each launch: in a captured graph, a memset
// node between the kernel before and the GEMM. Each cost a BERT-base pass 3.8-4.7 µs on the
// H100 (12 a pass at 32 sequences, 48 at 128: ~3.5 % of those passes, bench/RESULTS.md).
// Hanging each memset off an earlier node instead saved nothing: the branch delayed the
// kernels beside it by as much. So the executor gives each cuBLASLt call of a pass a workspace
// slot of its own (CounterSlots) while it captures, and ConsolidateWorkspaceMemsets then
// deletes the memset nodes that zero the start of a slot and zeroes the start of every slot in
// one memset node ahead of the graph's first nodes: one node a pass instead of one a GEMM (on
// the H100, 1.7 % off BERT-base's passes at 32 and 128 sequences).
//
// Correct because each slot serves one call a pass: nothing but that call's kernel changes
// its counter between the pass's start and the kernel, and graph launches on one stream run
// one after another.
//
// Thread-safety: none; the graph must not be instantiated or captured into meanwhile.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "common/status.h"

namespace ltserve::gpu {

// The start of each slot that the one memset zeroes: the counter memsets cuBLASLt 13 put in
// the graphs were of 4 bytes at the workspace's start.
inline constexpr std::size_t kCounterSlotZeroedBytes = 256;
// A call whose algorithm needs more workspace than this keeps the shared workspace and its
// memset: slots come one a GEMM step and stream, and split-K algorithms can need megabytes.
inline constexpr std::size_t kMaxCounterSlotBytes = std::size_t{1} << 20;

// One cuBLASLt call as captured into a slot: the slot, and the capture dependencies of its
// stream just before the call (what its first node waits for).
struct CapturedWorkspaceCall {
  const void* slot = nullptr;
  std::vector<cudaGraphNode_t> entry;
};

// `count` slots of `slot_bytes` from `base`, of which the first `zeroed_bytes` each are what
// the one memset clears.
struct CounterSlots {
  void* base = nullptr;
  std::size_t slot_bytes = 0;
  std::size_t count = 0;
  std::size_t zeroed_bytes = 0;
};

// The nodes the next node captured on `stream` will depend on; empty when it is not capturing.
Result<std::vector<cudaGraphNode_t>> CaptureDependencies(cudaStream_t stream);

// Deletes each memset that is a call's first node (its dependencies are exactly the call's
// entry) and writes only within the zeroed start of the call's slot, its dependents then
// waiting for its dependencies; where any was deleted, adds one memset of every slot's zeroed
// start ahead of the graph's root nodes. Returns how many memsets were deleted.
Result<int> ConsolidateWorkspaceMemsets(cudaGraph_t graph,
                                        const std::vector<CapturedWorkspaceCall>& calls,
                                        const CounterSlots& slots);

}  // namespace ltserve::gpu
