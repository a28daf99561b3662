// CUTLASS's pingpong kernels with 128 x 128 tiles for bf16 storage (cutlass_gemm_kernels.cuh).
#include "gpu/cutlass_gemm_kernels.cuh"

namespace ltserve::gpu::cutlass_gemm {

cudaError_t Launch128x128PingpongBf16(const Operands& o) {
  return Dispatch<cutlass::bfloat16_t, cute::Shape<cute::_128, cute::_128, cute::_64>,
                  cute::Shape<cute::_2, cute::_1, cute::_1>, Pingpong>(o);
}

}  // namespace ltserve::gpu::cutlass_gemm
