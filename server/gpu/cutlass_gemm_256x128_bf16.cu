// CUTLASS's kernels with 256 x 128 tiles for bf16 storage (cutlass_gemm_kernels.cuh).
#include "gpu/cutlass_gemm_kernels.cuh"

namespace ltserve::gpu::cutlass_gemm {

cudaError_t Launch256x128Bf16(const Operands& o) {
  return Dispatch<cutlass::bfloat16_t, cute::Shape<cute::_256, cute::_128, cute::_64>,
                  cute::Shape<cute::_1, cute::_2, cute::_1>>(o);
}

}  // namespace ltserve::gpu::cutlass_gemm
