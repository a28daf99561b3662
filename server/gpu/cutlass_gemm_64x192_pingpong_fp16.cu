// CUTLASS's pingpong kernels with 64 x 192 tiles for fp16 storage (cutlass_gemm_kernels.cuh).
#include "gpu/cutlass_gemm_kernels.cuh"

namespace ltserve::gpu::cutlass_gemm {

cudaError_t Launch64x192PingpongFp16(const Operands& o) {
  return Dispatch<cutlass::half_t, cute::Shape<cute::_64, cute::_192, cute::_64>,
                  cute::Shape<cute::_2, cute::_1, cute::_1>, Pingpong>(o);
}

}  // namespace ltserve::gpu::cutlass_gemm
