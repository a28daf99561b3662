#include "gpu/cuda_check.h"

#include <string>

namespace ltserve::gpu {
namespace {

std::string Where(const char* call, const char* file, int line) {
  std::string path(file);
  const auto slash = path.find("gpu/");
  if (slash != std::string::npos) path = path.substr(slash);
  return std::string(call) + " (" + path + ":" + std::to_string(line) + ")";
}

}  // namespace

Status CudaError(cudaError_t code, const char* call, const char* file, int line) {
  (void)cudaGetLastError();
  std::string message = Where(call, file, line) + " failed: " + cudaGetErrorName(code) + " (" +
                        std::to_string(static_cast<int>(code)) + "): " + cudaGetErrorString(code);
  if (code == cudaErrorMemoryAllocation) {
    return ResourceExhausted("out of GPU memory: " + message);
  }
  return Internal(std::move(message));
}

Status CublasError(cublasStatus_t code, const char* call, const char* file, int line) {
  std::string message = Where(call, file, line) + " failed: " + cublasLtGetStatusName(code) +
                        " (" + std::to_string(static_cast<int>(code)) +
                        "): " + cublasLtGetStatusString(code);
  if (code == CUBLAS_STATUS_ALLOC_FAILED) return ResourceExhausted("out of GPU memory: " + message);
  if (code == CUBLAS_STATUS_NOT_SUPPORTED) return Unimplemented(std::move(message));
  return Internal(std::move(message));
}

}  // namespace ltserve::gpu
