// Built without CUDA: CUDA shared memory is refused with the reason.
#include "shm/cuda_ipc.h"

namespace ltserve {

Result<std::shared_ptr<const SharedMemoryRegion>> OpenCudaIpcRegion(const std::string& name,
                                                                    std::string_view,
                                                                    std::int64_t, std::uint64_t) {
  return Unavailable("failed to register CUDA shared memory region '" + name +
                     "': this server was built without CUDA; use system shared memory or send "
                     "the data in the request");
}

}  // namespace ltserve
