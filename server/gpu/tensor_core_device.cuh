// Device-side building blocks of the tensor-core kernels (attention.cu, skinny_gemm.cu,
// norm_gemm.cu): the warp-level m16n8k16 matrix multiply-accumulate with fp32 accumulators,
// asynchronous 16-byte copies from global into shared memory (sm_80+), and bulk copies counted
// on shared-memory barriers (sm_90+).
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

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// Bulk copies (sm_90+): one thread moves a whole contiguous run of bytes from global into
// shared memory through the copy engine, and a shared-memory barrier counts the bytes that
// have landed. Unlike cp.async, the copies in flight are not bounded by per-thread requests.
__device__ __forceinline__ unsigned SharedAddress(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void BarrierInit(std::uint64_t* barrier, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SharedAddress(barrier)),
               "r"(arrivals));
}
// Makes initialised barriers visible to the copy engine (then a __syncthreads to the block).
__device__ __forceinline__ void FenceBarrierInit() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival that also announces `bytes` more to land before the barrier's phase completes.
__device__ __forceinline__ void BarrierExpectBytes(std::uint64_t* barrier, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SharedAddress(barrier)),
               "r"(bytes)
               : "memory");
}
// `bytes` (a multiple of 16, both addresses 16-byte aligned) from `src` to `dst`, counted on
// `barrier` when they land.
__device__ __forceinline__ void BulkCopy(void* dst, const void* src, unsigned bytes,
                                         std::uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          SharedAddress(dst)),
      "l"(src), "r"(bytes), "r"(SharedAddress(barrier))
      : "memory");
}
// Waits until the barrier's phase of parity `parity` has completed.
__device__ __forceinline__ void BarrierWait(std::uint64_t* barrier, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait;\n"
      "}\n" ::"r"(SharedAddress(barrier)),
      "r"(parity)
      : "memory");
}
#endif

}  // namespace ltserve::gpu
