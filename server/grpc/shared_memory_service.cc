// The shared-memory extensions' RPCs (Triton's system_shared_memory and cuda_shared_memory):
// the messages in and out of the registry. Triton's semantics: registering a taken name is
// ALREADY_EXISTS, status of an unknown name NOT_FOUND, unregistering an unknown name OK, and
// an empty name in status or unregister means every region of that kind.
#include "grpc/inference_service.h"

namespace ltserve {

Status InferenceService::ServeSystemSharedMemoryRegister(
    const inference::SystemSharedMemoryRegisterRequest& request,
    inference::SystemSharedMemoryRegisterResponse*) {
  if (request.name().empty()) return InvalidArgument("a shared memory region needs a name");
  return shared_memory_.RegisterSystem(request.name(), request.key(), request.offset(),
                                       request.byte_size());
}

Status InferenceService::ServeSystemSharedMemoryStatus(
    const inference::SystemSharedMemoryStatusRequest& request,
    inference::SystemSharedMemoryStatusResponse* response) {
  LTSERVE_ASSIGN_OR_RETURN(auto regions,
                           shared_memory_.Regions(SharedMemoryKind::kSystem, request.name()));
  for (const auto& region : regions) {
    auto& out = (*response->mutable_regions())[region->name()];
    out.set_name(region->name());
    out.set_key(region->key());
    out.set_offset(region->offset());
    out.set_byte_size(region->byte_size());
  }
  return Status::Ok();
}

Status InferenceService::ServeSystemSharedMemoryUnregister(
    const inference::SystemSharedMemoryUnregisterRequest& request,
    inference::SystemSharedMemoryUnregisterResponse*) {
  shared_memory_.Unregister(SharedMemoryKind::kSystem, request.name());
  return Status::Ok();
}

Status InferenceService::ServeCudaSharedMemoryRegister(
    const inference::CudaSharedMemoryRegisterRequest& request,
    inference::CudaSharedMemoryRegisterResponse*) {
  if (request.name().empty()) return InvalidArgument("a shared memory region needs a name");
  return shared_memory_.RegisterCuda(request.name(), request.raw_handle(), request.device_id(),
                                     request.byte_size());
}

Status InferenceService::ServeCudaSharedMemoryStatus(
    const inference::CudaSharedMemoryStatusRequest& request,
    inference::CudaSharedMemoryStatusResponse* response) {
  LTSERVE_ASSIGN_OR_RETURN(auto regions,
                           shared_memory_.Regions(SharedMemoryKind::kCuda, request.name()));
  for (const auto& region : regions) {
    auto& out = (*response->mutable_regions())[region->name()];
    out.set_name(region->name());
    out.set_device_id(static_cast<std::uint64_t>(region->device_id()));
    out.set_byte_size(region->byte_size());
  }
  return Status::Ok();
}

Status InferenceService::ServeCudaSharedMemoryUnregister(
    const inference::CudaSharedMemoryUnregisterRequest& request,
    inference::CudaSharedMemoryUnregisterResponse*) {
  shared_memory_.Unregister(SharedMemoryKind::kCuda, request.name());
  return Status::Ok();
}

}  // namespace ltserve
