// Device-side building blocks of the Hopper warpgroup GEMM (staged_gemm.cu): shared-memory
// matrix descriptors for tiles the copy engine wrote with the 128-byte swizzle, and the
// asynchronous warpgroup multiply-accumulate (wgmma) with fp32 accumulators. wgmma exists only
// in the sm_90a target (not sm_90, not later GPUs), so everything here compiles only there
// (__CUDA_ARCH_FEAT_SM90_ALL).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace ltserve::gpu {

// Rows of a swizzled tile: 64 16-bit elements (128 bytes) of K each, as the copy engine lays
// them out with CU_TENSOR_MAP_SWIZZLE_128B; groups of 8 rows (kSwizzleAtomBytes) repeat the
// pattern, so a tile starts on that boundary. (Host code sizes tiles and boxes with these too.)
constexpr int kSwizzledRowElements = 64;
constexpr int kSwizzleAtomBytes = 1024;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// The descriptor wgmma reads a K-major operand through: a tile of rows of 128 bytes, 128-byte
// swizzled, starting at `tile` (1,024-byte aligned, plus 32 bytes for each k16 step inside the
// row, which the swizzle resolves from the address bits). Fields (PTX "matrix descriptor"):
// start address / 16, leading byte offset / 16 (unused for swizzled K-major; 1 by
// convention), stride byte offset / 16 = 1,024 bytes between 8-row groups, and layout 1 in
// bits 62-63 for the 128-byte swizzle.
__device__ __forceinline__ std::uint64_t SwizzledTileDescriptor(const void* tile) {
  const auto address = static_cast<std::uint64_t>(__cvta_generic_to_shared(tile));
  return ((address & 0x3FFFF) >> 4) | (std::uint64_t{1} << 16) |
         (std::uint64_t{kSwizzleAtomBytes >> 4} << 32) | (std::uint64_t{1} << 62);
}

// Orders this warpgroup's earlier register and shared-memory accesses before the wgmmas that
// follow (required before the first wgmma touching the accumulators).
__device__ __forceinline__ void WarpgroupFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
// Closes the wgmmas issued so far into one group.
__device__ __forceinline__ void WarpgroupCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most kPending groups of this warpgroup are still running.
template <int kPending>
__device__ __forceinline__ void WarpgroupWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Tells the compiler the accumulators change here, so that it reads them only after the
// wait that precedes this (the wgmmas write them behind its back).
template <int kCount>
__device__ __forceinline__ void FenceAccumulators(float (&d)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D[64 x N] += A[64 x 16] · B[N x 16]ᵀ, A and B K-major in shared memory (descriptors above),
// D in registers: thread T of warp w holds, in d[4i + e], D[16w + T/4 + 8·(e >= 2)]
// [8i + 2·(T % 4) + (e & 1)].
#define LTSERVE_WGMMA_M64N64K16(TYPE, d, a, b)                                          \
  asm volatile(                                                                           \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {"                    \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "  \
      "%32, %33, 1, 1, 1, 0, 0;\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), \
        "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), \
        "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), \
        "+f"(d[31]) \
      : "l"(a), "l"(b))
#define LTSERVE_WGMMA_M64N128K16(TYPE, d, a, b)                                          \
  asm volatile(                                                                           \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {"                    \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "  \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "  \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "  \
      "%64, %65, 1, 1, 1, 0, 0;\n"                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), \
        "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), \
        "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), \
        "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), \
        "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), \
        "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), \
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), \
        "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), \
        "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
      : "l"(a), "l"(b))

template <typename T, int kN>
struct WarpgroupMma;

template <typename T>
struct WarpgroupMma<T, 64> {
  __device__ static void Run(float (&d)[32], std::uint64_t a, std::uint64_t b) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      LTSERVE_WGMMA_M64N64K16("bf16", d, a, b);
    } else {
      LTSERVE_WGMMA_M64N64K16("f16", d, a, b);
    }
  }
};
template <typename T>
struct WarpgroupMma<T, 128> {
  __device__ static void Run(float (&d)[64], std::uint64_t a, std::uint64_t b) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      LTSERVE_WGMMA_M64N128K16("bf16", d, a, b);
    } else {
      LTSERVE_WGMMA_M64N128K16("f16", d, a, b);
    }
  }
};
#undef LTSERVE_WGMMA_M64N64K16
#undef LTSERVE_WGMMA_M64N128K16
#endif

}  // namespace ltserve::gpu
