// Device-side building blocks of the tensor-core kernels (attention.cu, skinny_gemm.cu): the
// warp-level m16n8k16 matrix multiply-accumulate with fp32 accumulators, and asynchronous
// 16-byte copies from global into shared memory (sm_80+).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace ltserve::gpu {

// D += A·B for one m16n8k16 tile; TYPE is the PTX name of the 16-bit input type.
#define LTSERVE_MMA_M16N8K16(TYPE, d, a, b0, b1)                                         \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE                    \
               ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"          \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

template <typename T>
struct Mma {
  __device__ static void Run(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                             std::uint32_t b1) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      LTSERVE_MMA_M16N8K16("bf16", d, a, b0, b1);
    } else {
      LTSERVE_MMA_M16N8K16("f16", d, a, b0, b1);
    }
  }
  // Two fp32 values rounded to T, the lower one in the low half (mma's element order).
  __device__ static std::uint32_t Pack(float lo, float hi) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
      return *reinterpret_cast<std::uint32_t*>(&v);
    } else {
      __half2 v = __floats2half2_rn(lo, hi);
      return *reinterpret_cast<std::uint32_t*>(&v);
    }
  }
};
#undef LTSERVE_MMA_M16N8K16

// 16 bytes global → shared without passing through registers; zero-filled when !valid (then
// `src` is only a placeholder address and nothing is read).
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src, bool valid) {
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void CommitCopies() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void WaitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

}  // namespace ltserve::gpu
