// Fused multi-head self-attention over packed variable-length sequences: softmax(q·kᵀ·scale)·v
// per sequence and head in one pass per block of queries (online softmax with an fp32 running
// max, sum and accumulator), so the score matrix never reaches memory.
//
// Two kernels (attention.cu): for bf16/fp16 with head_dim a multiple of 16 up to 128, a
// flash-attention kernel on tensor cores (mma.sync m16n8k16, fp32 accumulation, K and V tiles
// staged in shared memory and shared by the block's four warps); for everything else (fp32,
// odd head dims) a CUDA-core kernel that keeps the whole computation in fp32.
//
// Which sequences a batch holds is data, not launch configuration: the kernel reads the
// sequence offsets and its work list from a device buffer (attention_batch.h) that the host
// refills per batch with an asynchronous copy. The grid depends only on the bucket's token
// count, which is what lets one CUDA graph per bucket replay any mix of lengths.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/kernels.h"

namespace ltserve::gpu {

// Queries of one sequence that one work item (one block, per head) covers: 4 warps of the
// tensor-core kernel with 16 query rows each, the m dimension of mma.m16n8k16.
constexpr int kAttentionQueriesPerItem = 64;
// The largest head_dim the kernel holds in shared memory and registers.
constexpr std::int64_t kAttentionMaxHeadDim = 128;

// Layout of the per-batch int32 buffer the kernel reads, for a capacity of `max_tokens`
// tokens (hence at most that many work items):
//   [0]                    number of work items
//   [1 + 3·i, 4 + 3·i)     work item i: its sequence's first token, the sequence's length, and
//                          the item's first query within the sequence
// Each item carries its sequence's offsets, so a block reads one item and then the data: no
// chain of dependent loads through a sequence table first.
constexpr std::int64_t kAttentionItemInts = 3;
constexpr std::int64_t AttentionBatchInts(std::int64_t max_tokens) {
  return 1 + kAttentionItemInts * max_tokens;
}

// out[t, h·head_dim + i] = Σ_j softmax_j(q_t·k_j / √head_dim) · v_j[i] over the keys j of t's
// sequence, for every token t of the batch described by `batch` (device memory, the layout
// above). `qkv` is [tokens, 3·num_heads·head_dim] (q | k | v, heads contiguous within each),
// `out` is [tokens, num_heads·head_dim], both of element type `type`; math in fp32.
// `bucket_tokens` bounds the tokens of any batch this launch will see (it sizes the grid);
// cudaErrorInvalidValue when it exceeds the buffer's capacity `max_tokens`. `programmatic`:
// launched to overlap the kernel before it (programmatic dependent launch, sm_90+ only).
cudaError_t LaunchAttention(const void* qkv, void* out, const std::int32_t* batch,
                            std::int64_t max_tokens, std::int64_t bucket_tokens,
                            std::int64_t num_heads, std::int64_t head_dim, ElemType type,
                            bool programmatic, cudaStream_t stream);

}  // namespace ltserve::gpu
