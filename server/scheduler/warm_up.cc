#include "scheduler/warm_up.h"

#include <cstring>

#include "scheduler/batch_data.h"

namespace ltserve {

Status WarmUpOutputShapes(ExecutorInstance& instance, const ModelSpec& spec) {
  for (const TensorSpec& input : spec.inputs) {
    for (std::int64_t dim : input.dims) {
      if (dim < 0) return Status::Ok();
    }
  }
  for (std::size_t i = 0; i < spec.inputs.size(); ++i) {
    std::size_t elements = 1;
    for (std::int64_t dim : spec.inputs[i].dims) elements *= static_cast<std::size_t>(dim);
    const std::size_t bytes = elements * ElementSize(spec.inputs[i].dtype);
    Result<std::span<std::byte>> buffer = instance.InputBuffer(i, bytes);
    if (!buffer.ok()) return Status::Ok();
    std::memset(buffer->data(), 0, bytes);
  }
  BatchShape shape;
  shape.batch_size = 1;
  if (!instance.Execute(shape, nullptr).ok()) return Status::Ok();
  const bool batched = spec.max_batch_size > 0;
  for (std::size_t i = 0; i < spec.outputs.size(); ++i) {
    Status checked = CheckOutputDims(i, instance.OutputShape(i), spec.outputs[i].dims, batched);
    if (!checked.ok()) {
      return InvalidArgument("warm-up on zeros: output '" + spec.outputs[i].name + "': " +
                             checked.message());
    }
  }
  return Status::Ok();
}

}  // namespace ltserve
