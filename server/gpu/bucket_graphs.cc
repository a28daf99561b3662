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
    LTSERVE_ASSIGN_OR_RETURN(GraphExec exec, state.Capture([&] { return state.Forward(b); }));
    graphs.graphs_.push_back(std::move(exec));
  }
  return graphs;
}

Status BucketGraphs::Launch(DeviceState& state, std::size_t bucket) const {
  if (graphs_.empty()) return state.Forward(bucket);
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graphs_[bucket].get(), state.stream()));
  return Status::Ok();
}

namespace {

// One bucket's staged request, enqueued on the (capturing) stream.
Status EnqueueStaged(DeviceState& state, std::size_t bucket, const StagedCopies& copies) {
  cudaStream_t stream = state.stream();
  // External records: the events stay ordinary timing events that the host waits on and
  // reads, recorded by the graph's own nodes.
  LTSERVE_CUDA_RETURN_IF_ERROR(
      cudaEventRecordWithFlags(copies.events[0], stream, cudaEventRecordExternal));
  LTSERVE_RETURN_IF_ERROR(state.ConvertInputFrom(bucket, copies.host_input));
  LTSERVE_CUDA_RETURN_IF_ERROR(
      cudaEventRecordWithFlags(copies.events[1], stream, cudaEventRecordExternal));
  LTSERVE_RETURN_IF_ERROR(state.RunSteps(bucket));
  LTSERVE_CUDA_RETURN_IF_ERROR(
      cudaEventRecordWithFlags(copies.events[2], stream, cudaEventRecordExternal));
  LTSERVE_RETURN_IF_ERROR(state.ConvertOutputTo(bucket, copies.host_output));
  LTSERVE_CUDA_RETURN_IF_ERROR(
      cudaEventRecordWithFlags(copies.events[3], stream, cudaEventRecordExternal));
  return Status::Ok();
}

}  // namespace

Result<StagedGraphs> StagedGraphs::Capture(DeviceState& state,
                                           std::span<const std::int64_t> bucket_rows,
                                           const StagedCopies& copies) {
  StagedGraphs staged;
  staged.graphs_.resize(bucket_rows.size());
  for (std::size_t b = 0; b < bucket_rows.size(); ++b) {
    if (!Takes(bucket_rows[b], copies)) continue;
    LTSERVE_ASSIGN_OR_RETURN(staged.graphs_[b],
                             state.Capture([&] { return EnqueueStaged(state, b, copies); }));
  }
  return staged;
}

bool StagedGraphs::Takes(std::int64_t rows, const StagedCopies& copies) {
  const auto r = static_cast<std::size_t>(rows);
  const std::size_t in_bytes = r * copies.input_row_bytes;
  const std::size_t out_bytes = r * copies.output_row_bytes;
  return in_bytes + out_bytes <= copies.max_bytes && in_bytes <= copies.input_capacity_bytes &&
         out_bytes <= copies.output_capacity_bytes;
}

Status StagedGraphs::Launch(DeviceState& state, std::size_t bucket) const {
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graphs_[bucket].get(), state.stream()));
  return Status::Ok();
}

}  // namespace ltserve::gpu
