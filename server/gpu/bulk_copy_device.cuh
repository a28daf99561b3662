// Device-side building blocks of the kernels that stream weights through shared-memory rings
// (streamed_gemm.cu, chain_ring.cu) or stage tiles (staged_gemm.cu): mbarriers, bulk copies
// and tensor-map copies (the Hopper copy engine), sm_90+.
// A ring stage is filled by one producer's bulk copies, completing on the stage's "full"
// barrier with a byte count, and handed back by its consumers on its "empty" barrier.
#pragma once

#include <cstdint>

namespace ltserve::gpu {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned SharedAddress(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void BarrierInit(std::uint64_t* barrier, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SharedAddress(barrier)),
               "r"(count)
               : "memory");
}
// After the block's barriers are initialised, before __syncthreads: makes the initialisation
// visible to the copy engine and to the rest of the cluster.
__device__ __forceinline__ void FenceBarrierInit() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// One arrival that also announces `bytes` of bulk copies completing on this phase.
__device__ __forceinline__ void BarrierArriveExpecting(std::uint64_t* barrier, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   SharedAddress(barrier)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void BarrierArrive(std::uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(SharedAddress(barrier))
               : "memory");
}
__device__ __forceinline__ void BarrierWait(std::uint64_t* barrier, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(SharedAddress(barrier)),
      "r"(parity)
      : "memory");
}
// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global to this block's
// shared memory by the copy engine, counted against `barrier`'s current phase.
__device__ __forceinline__ void BulkCopy(void* dst, const void* src, unsigned bytes,
                                         std::uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          SharedAddress(dst)),
      "l"(src), "r"(bytes), "r"(SharedAddress(barrier))
      : "memory");
}
// The 2-D box at (inner, outer) of the tensor that `tensor_map` (a CUtensorMap, passed as a
// __grid_constant__ kernel parameter) describes, by the copy engine into this block's shared
// memory in the map's layout, counted against `barrier`'s current phase with the whole box's
// bytes: parts of the box outside the tensor arrive as zeros.
__device__ __forceinline__ void TensorCopy2D(void* dst, const void* tensor_map, int inner,
                                             int outer, std::uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(SharedAddress(dst)),
      "l"(reinterpret_cast<std::uint64_t>(tensor_map)), "r"(inner), "r"(outer),
      "r"(SharedAddress(barrier))
      : "memory");
}
// A barrier for the consumer warps only, the block's first kConsumerThreads threads: the
// producer warp may be elsewhere in its loop. Named barrier 1 (0 is __syncthreads').
template <int kConsumerThreads>
__device__ __forceinline__ void ConsumersSync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumerThreads) : "memory");
}
#endif

}  // namespace ltserve::gpu
