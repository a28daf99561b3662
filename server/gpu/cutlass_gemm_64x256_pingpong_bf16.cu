// CUTLASS's pingpong kernels with 64 x 256 tiles for bf16 storage (cutlass_gemm_kernels.cuh).
#include "gpu/cutlass_gemm_kernels.cuh"

namespace ltserve::gpu::cutlass_gemm {

cudaError_t Launch64x256PingpongBf16(const Operands& o) {
  return Dispatch<cutlass::bfloat16_t, cute::Shape<cute::_64, cute::_256, cute::_64>,
                  cute::Shape<cute::_2, cute::_1, cute::_1>, Pingpong>(o);
}

}  // namespace ltserve::gpu::cutlass_gemm
