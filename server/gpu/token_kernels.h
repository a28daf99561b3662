// The kernels of token-id models (a Hugging Face encoder): the embedding gather with its
// LayerNorm, pooling of each packed sequence into one row, and L2 normalisation of rows.
// Every launcher enqueues on `stream` and returns the launch's error (cudaGetLastError).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/kernels.h"
#include "plan/plan.h"

namespace ltserve::gpu {

// The largest width the embedding kernel holds a row of in shared memory (32 KiB of fp32).
constexpr std::int64_t kEmbeddingMaxWidth = 8192;

// The device tables of an EmbeddingOp: `word`, `position` and `token_type` ([rows, width],
// element type of the launch; `token_type` null when the model has none), `gamma` and `beta`
// fp32 [width].
struct EmbeddingTables {
  const void* word = nullptr;
  const void* position = nullptr;
  const void* token_type = nullptr;
  std::int32_t vocab_size = 0;
  std::int32_t max_positions = 0;
  std::int32_t type_vocab_size = 0;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float eps = 1e-12f;
};

// out[t] = LayerNorm(word[ids[t]] + position[positions[t]] + token_type[types[t]]) for each
// token t < rows, statistics in fp32. Each index is clamped into its table first: the batcher
// validated them, and a stale or corrupt one must still never read outside a table.
cudaError_t LaunchEmbedding(const std::int32_t* ids, const std::int32_t* positions,
                            const std::int32_t* types, const EmbeddingTables& tables, void* out,
                            std::int64_t rows, std::int64_t width, ElemType type,
                            cudaStream_t stream);

// Layout of the int32 sequence table pooling reads, for batches of at most `max_sequences`:
//   [0]       S, the sequences in the batch
//   [1 + s]   the first token of sequence s, for s <= S ([1 + S] is the batch's token count)
constexpr std::int64_t SequenceTableInts(std::int64_t max_sequences) { return max_sequences + 2; }

// out[s] = the pooling of sequence s's token rows of `in` (the table above, device memory),
// for s < sequence_rows: the first token's row, the mean, or the element-wise max (NaN
// propagates, as in torch). A sequence of no tokens gives 0 (first, mean) or `empty_value`
// (max); rows s >= S, computed only because a graph's grid is fixed, are 0.
cudaError_t LaunchPool(const void* in, const std::int32_t* sequences, void* out,
                       std::int64_t sequence_rows, std::int64_t width, plan::Pooling pooling,
                       float empty_value, ElemType type, cudaStream_t stream);

// out[r] = in[r] / max(‖in[r]‖₂, eps) for each row r < rows, the norm accumulated in fp32;
// `in` may equal `out`.
cudaError_t LaunchL2Normalize(const void* in, void* out, std::int64_t rows, std::int64_t width,
                              float eps, ElemType type, cudaStream_t stream);

}  // namespace ltserve::gpu
