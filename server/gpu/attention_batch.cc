#include "gpu/attention_batch.h"

#include <string>

#include "gpu/attention.h"
#include "gpu/cuda_check.h"
#include "gpu/token_kernels.h"

namespace ltserve::gpu {

Result<AttentionBatch> AttentionBatch::Create(std::int64_t max_tokens, std::int64_t max_sequences,
                                             bool last_sequence_first) {
  if (max_tokens < 1) return InvalidArgument("attention batch needs a capacity of >= 1 token");
  AttentionBatch batch;
  batch.max_tokens_ = max_tokens;
  batch.last_sequence_first_ = last_sequence_first;
  batch.max_sequences_ = max_sequences > 0 ? max_sequences : max_tokens;
  // In front, so that one copy from the start covers the table and the used work items.
  batch.table_ints_ = max_sequences > 0 ? SequenceTableInts(max_sequences) : 0;
  const auto bytes = static_cast<std::size_t>(batch.table_ints_ + AttentionBatchInts(max_tokens)) *
                     sizeof(std::int32_t);
  LTSERVE_ASSIGN_OR_RETURN(batch.host_, PinnedBuffer::Create(bytes, "attention batch staging"));
  LTSERVE_ASSIGN_OR_RETURN(batch.device_, DeviceBuffer::Create(bytes, "attention batch"));
  // Blocks read their first item's slot before the item count (attention.cu): defined bytes.
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemset(batch.device_.data(), 0, bytes));
  return batch;
}

Status AttentionBatch::Upload(std::span<const std::int32_t> lengths, cudaStream_t stream) {
  if (static_cast<std::int64_t>(lengths.size()) > max_sequences_) {
    return InvalidArgument("batch of " + std::to_string(lengths.size()) +
                           " sequences exceeds the capacity of " + std::to_string(max_sequences_) +
                           (table_ints_ == 0 ? " (one a token)" : " sequences"));
  }
  auto* table = reinterpret_cast<std::int32_t*>(host_.data());
  auto* host = table + table_ints_;
  std::int32_t* work = host + 1;
  std::int64_t tokens = 0;
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    if (lengths[s] < 0) return InvalidArgument("negative sequence length");
    tokens += lengths[s];
    if (tokens > max_tokens_) {
      return InvalidArgument("batch of more than " + std::to_string(max_tokens_) +
                             " tokens exceeds the attention capacity");
    }
    if (table_ints_ > 0) table[1 + s] = static_cast<std::int32_t>(tokens - lengths[s]);
  }
  // The work items, a sequence's at a time (`begin`: its first token's row).
  std::int32_t items = 0;
  const auto add_items = [&](std::size_t s, std::int64_t begin) {
    for (std::int32_t first = 0; first < lengths[s]; first += kAttentionQueriesPerItem) {
      work[kAttentionItemInts * items] = static_cast<std::int32_t>(begin);
      work[kAttentionItemInts * items + 1] = lengths[s];
      work[kAttentionItemInts * items + 2] = first;
      ++items;
    }
  };
  if (last_sequence_first_) {
    std::int64_t begin = tokens;
    for (std::size_t s = lengths.size(); s-- > 0;) {
      begin -= lengths[s];
      add_items(s, begin);
    }
  } else {
    std::int64_t begin = 0;
    for (std::size_t s = 0; s < lengths.size(); ++s) {
      add_items(s, begin);
      begin += lengths[s];
    }
  }
  host[0] = items;
  if (table_ints_ > 0) {
    table[0] = static_cast<std::int32_t>(lengths.size());
    table[1 + lengths.size()] = static_cast<std::int32_t>(tokens);
  }
  const std::size_t bytes =
      static_cast<std::size_t>(table_ints_ + 1 + kAttentionItemInts * items) * sizeof(std::int32_t);
  LTSERVE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(device_.data(), host_.data(), bytes, cudaMemcpyHostToDevice, stream));
  return Status::Ok();
}

}  // namespace ltserve::gpu
