// Built when CMake found no CUDA compiler: the server then runs every model on the CPU.
#include "gpu/gpu_executor.h"

namespace ltserve {

bool GpuAvailable(std::string* reason) {
  if (reason != nullptr) *reason = "built without CUDA";
  return false;
}

Result<std::unique_ptr<ExecutorFactory>> CreateGpuExecutorFactory(
    std::shared_ptr<const plan::Plan> /*plan*/, const ModelSpec& /*spec*/,
    const std::optional<TokenLayout>& /*tokens*/) {
  return Unavailable("built without CUDA");
}

}  // namespace ltserve
