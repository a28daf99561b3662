#include "gpu/attention_batch.h"

#include <string>

#include "gpu/attention.h"
#include "gpu/cuda_check.h"

namespace ltserve::gpu {

Result<AttentionBatch> AttentionBatch::Create(std::int64_t max_tokens) {
  if (max_tokens < 1) return InvalidArgument("attention batch needs a capacity of >= 1 token");
  AttentionBatch batch;
  batch.max_tokens_ = max_tokens;
  const auto bytes = static_cast<std::size_t>(AttentionBatchInts(max_tokens)) * sizeof(std::int32_t);
  LTSERVE_ASSIGN_OR_RETURN(batch.host_, PinnedBuffer::Create(bytes, "attention batch staging"));
  LTSERVE_ASSIGN_OR_RETURN(batch.device_, DeviceBuffer::Create(bytes, "attention batch"));
  return batch;
}

Status AttentionBatch::Upload(std::span<const std::int32_t> lengths, cudaStream_t stream) {
  if (static_cast<std::int64_t>(lengths.size()) > max_tokens_) {
    return InvalidArgument("batch of " + std::to_string(lengths.size()) +
                           " sequences exceeds the attention capacity of " +
                           std::to_string(max_tokens_) + " tokens");
  }
  auto* host = reinterpret_cast<std::int32_t*>(host_.data());
  std::int32_t* cu_seqlens = host + 1;
  std::int32_t* work = host + AttentionWorkOffset(max_tokens_);
  std::int64_t tokens = 0;
  std::int32_t items = 0;
  cu_seqlens[0] = 0;
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    if (lengths[s] < 0) return InvalidArgument("negative sequence length");
    tokens += lengths[s];
    if (tokens > max_tokens_) {
      return InvalidArgument("batch of more than " + std::to_string(max_tokens_) +
                             " tokens exceeds the attention capacity");
    }
    cu_seqlens[s + 1] = static_cast<std::int32_t>(tokens);
    for (std::int32_t first = 0; first < lengths[s]; first += kAttentionQueriesPerItem) {
      work[2 * items] = static_cast<std::int32_t>(s);
      work[2 * items + 1] = first;
      ++items;
    }
  }
  host[0] = items;
  const std::size_t header = (2 + lengths.size()) * sizeof(std::int32_t);
  LTSERVE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(device_.data(), host_.data(), header, cudaMemcpyHostToDevice, stream));
  if (items > 0) {
    const std::size_t offset =
        static_cast<std::size_t>(AttentionWorkOffset(max_tokens_)) * sizeof(std::int32_t);
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        device_.data() + offset, host_.data() + offset,
        static_cast<std::size_t>(items) * 2 * sizeof(std::int32_t), cudaMemcpyHostToDevice,
        stream));
  }
  return Status::Ok();
}

}  // namespace ltserve::gpu
