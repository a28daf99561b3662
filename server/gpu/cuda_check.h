// The one error sink of server/gpu: every CUDA runtime and cuBLAS call goes through these
// macros and becomes a Status naming the call, the code and the message (after ggml-cuda's
// CUDA_CHECK and llm.c's cudaCheck, but returning instead of aborting: nothing here may exit).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "common/status.h"

namespace ltserve::gpu {

// Out-of-memory becomes RESOURCE_EXHAUSTED (a clean model-load error); anything else INTERNAL.
// Clears the runtime's last error so a failed allocation does not poison later calls.
Status CudaError(cudaError_t code, const char* call, const char* file, int line);
Status CublasError(cublasStatus_t code, const char* call, const char* file, int line);

}  // namespace ltserve::gpu

#define LTSERVE_CUDA_RETURN_IF_ERROR(call)                                                   \
  do {                                                                                       \
    const cudaError_t ltserve_cuda_code_ = (call);                                           \
    if (ltserve_cuda_code_ != cudaSuccess) {                                                 \
      return ::ltserve::gpu::CudaError(ltserve_cuda_code_, #call, __FILE__, __LINE__);       \
    }                                                                                        \
  } while (false)

#define LTSERVE_CUBLAS_RETURN_IF_ERROR(call)                                                 \
  do {                                                                                       \
    const cublasStatus_t ltserve_cublas_code_ = (call);                                      \
    if (ltserve_cublas_code_ != CUBLAS_STATUS_SUCCESS) {                                     \
      return ::ltserve::gpu::CublasError(ltserve_cublas_code_, #call, __FILE__, __LINE__);   \
    }                                                                                        \
  } while (false)
