// Device-side building blocks of the tensor-core kernels (attention.cu, the GEMM kernels): the
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

// Four 8×8 tiles of 16-bit values from shared memory into mma fragments; lane L names the
// address of row L % 8 of tile L / 8. TRANS: each thread gets a column pair instead of a row
// pair, i.e. the B fragment of a row-major [k][n] tile.
__device__ __forceinline__ void LoadTiles(std::uint32_t (&r)[4], const std::uint16_t* row) {
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void LoadTilesTransposed(std::uint32_t (&r)[4], const std::uint16_t* row) {
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// Component i of a 16-byte vector: the pair of 16-bit values at slots 2i, 2i + 1, one mma
// operand register. The GEMM kernels use a thread's 16-byte loads of W and X as fragments as
// they are (skinny_gemm.cu explains the slot order).
__device__ __forceinline__ std::uint32_t SlotPair(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// One 32-K step of Yᵀ += W·Xᵀ on staged tiles (streamed_gemm.cu, chain_ring.cu): rows g and
// g + 8 of a 16-row W tile and rows i·8 + g of X, each at K offset k of its shared-memory row
// (strides in halves), thread (g, t) = (lane / 4, lane % 4) reading 16 bytes of each at
// k = its step's base + 8t. Where !valid (K past the data) or an X row is at or past `rows`,
// zeros are used instead: 0 × stale shared memory could be NaN.
template <typename T, int kNTiles>
__device__ __forceinline__ void MmaStepFromShared(float (&acc)[kNTiles][4], const std::uint16_t* w,
                                                  int w_stride, const std::uint16_t* x,
                                                  int x_stride, int k, bool valid, int rows,
                                                  int g) {
  const uint4 zero{0u, 0u, 0u, 0u};
  const uint4 w_lo = valid ? *reinterpret_cast<const uint4*>(w + g * w_stride + k) : zero;
  const uint4 w_hi = valid ? *reinterpret_cast<const uint4*>(w + (g + 8) * w_stride + k) : zero;
#pragma unroll
  for (int i = 0; i < kNTiles; ++i) {
    const int m = i * 8 + g;
    const uint4 xv = valid && m < rows ? *reinterpret_cast<const uint4*>(x + m * x_stride + k) : zero;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const std::uint32_t a[4] = {SlotPair(w_lo, 2 * h), SlotPair(w_hi, 2 * h),
                                  SlotPair(w_lo, 2 * h + 1), SlotPair(w_hi, 2 * h + 1)};
      Mma<T>::Run(acc[i], a, SlotPair(xv, 2 * h), SlotPair(xv, 2 * h + 1));
    }
  }
}

}  // namespace ltserve::gpu
