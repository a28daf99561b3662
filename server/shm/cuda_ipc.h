// CUDA IPC regions for the registry, behind a header without CUDA types. cuda_ipc.cc talks to
// the CUDA runtime; cuda_ipc_stub.cc stands in when the server is built without CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "shm/shared_memory_registry.h"

namespace ltserve {

// Opens `raw_handle` (the bytes of a cudaIpcMemHandle_t) on `device_id` and checks that the
// allocation holds `byte_size` bytes. UNAVAILABLE when no GPU is usable.
Result<std::shared_ptr<const SharedMemoryRegion>> OpenCudaIpcRegion(const std::string& name,
                                                                    std::string_view raw_handle,
                                                                    std::int64_t device_id,
                                                                    std::uint64_t byte_size);

}  // namespace ltserve
