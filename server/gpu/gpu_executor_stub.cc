// Built when CMake found no CUDA compiler: the server then runs every model on the CPU.
#include "gpu/gpu_executor.h"

namespace ltserve {

bool GpuAvailable(std::string* reason) {
  if (reason != nullptr) *reason = "built without CUDA";
  return false;
}

Result<std::unique_ptr<ExecutorFactory>> CreateGpuExecutorFactory(
    std::shared_ptr<const plan::Plan> /*plan*/, const ModelSpec& /*spec*/) {
  return Unavailable("built without CUDA");
}

Result<double> GpuTimeForward(ExecutorInstance& /*instance*/, std::int64_t /*rows*/,
                              int /*iterations*/) {
  return Unavailable("built without CUDA");
}

Result<double> GpuTimeTokenForward(ExecutorInstance& /*instance*/,
                                   std::span<const std::int32_t> /*sequence_lengths*/,
                                   int /*iterations*/) {
  return Unavailable("built without CUDA");
}

Result<std::vector<GpuStepTime>> GpuProfileTokenForward(
    ExecutorInstance& /*instance*/, std::span<const std::int32_t> /*sequence_lengths*/,
    int /*iterations*/) {
  return Unavailable("built without CUDA");
}

}  // namespace ltserve
