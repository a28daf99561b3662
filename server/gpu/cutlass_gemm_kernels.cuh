// One tile shape's CUTLASS kernels for one storage type and every activation cutlass_gemm.h
// takes, included once by each cutlass_gemm_<tile>_<type>.cu. CUTLASS's 3.x builders assemble a
// warp-specialised persistent kernel: a producer warpgroup copies A (X) and B (W) tiles by
// TMA into a ring of shared-memory stages, two consumer warpgroups multiply them with wgmma,
// and the epilogue adds the bias (a row vector read by the consumers), the residual (C,
// copied by TMA) and applies the activation in fp32 before one rounding to the storage type.
// Two schedules: *cooperative*, both consumer warpgroups on one tile (half its rows each), then
// both in its epilogue; *pingpong*, each warpgroup a tile of its own, their main loops taking
// turns, so that one warpgroup's epilogue runs while the other multiplies. With K = 768 a
// tile's main loop is 12 k-steps, and an epilogue the tensor cores wait through (GELU's erf
// over the whole tile, the residual's copy) is a large part of it.
//
// Built with CUTLASS_ENABLE_GDC_FOR_SM90: the producer warps execute griddepcontrol.wait before
// their first copy of X or the residual, so a programmatic launch cannot read what the kernel
// ahead has not finished writing, and consumers write Y only from tiles those copies fed. The
// kernel issues griddepcontrol.launch_dependents once its last tile's main loop is done.
// NDEBUG matters: an assert inside the main loop is a call that makes ptxas serialise the
// warpgroup MMAs (its warning C7510).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include "gpu/cutlass_gemm_tiles.h"

namespace ltserve::gpu::cutlass_gemm {

// 16-byte rows and vectors: what TMA and the epilogue's vector accesses need.
constexpr int kAlignment = 8;

// The kernel and epilogue schedules of each of the two: CUTLASS pairs them.
struct Cooperative {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};
struct Pingpong {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
};

template <typename T, template <class> class Activation, class TileShape, class ClusterShape,
          class Schedule>
struct Kernel {
  using Fusion =
      cutlass::epilogue::fusion::LinCombPerColBiasEltAct<Activation, T, float, T, T, float>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, T, cutlass::layout::RowMajor,
      kAlignment, T, cutlass::layout::RowMajor, kAlignment,
      typename Schedule::Epilogue, Fusion>::CollectiveOp;
  // X is row-major [M, K] and W row-major [N, K]: both K-major, the layout wgmma reads best.
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, T, cutlass::layout::RowMajor, kAlignment,
      T, cutlass::layout::ColumnMajor, kAlignment, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<
          static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      typename Schedule::Kernel>::CollectiveOp;
  using GemmKernel =
      cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
};

template <typename T, template <class> class Activation, class TileShape, class ClusterShape,
          class Schedule>
cudaError_t Run(const Operands& o) {
  using K = Kernel<T, Activation, TileShape, ClusterShape, Schedule>;
  using GemmKernel = typename K::GemmKernel;
  using Gemm = typename K::Gemm;
  const int m = static_cast<int>(o.rows);
  const int n = static_cast<int>(o.out_features);
  const int k = static_cast<int>(o.in_features);
  // Without a residual, C is Y itself with beta 0: the epilogue then reads no source at all
  // (its is_source_needed), and the tensor map still gets a valid address.
  const T* source = static_cast<const T*>(o.residual != nullptr ? o.residual : o.y);
  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {m, n, k, 1},
      {static_cast<const T*>(o.x),
       cutlass::make_cute_packed_stride(typename GemmKernel::StrideA{}, {m, k, 1}),
       static_cast<const T*>(o.w),
       cutlass::make_cute_packed_stride(typename GemmKernel::StrideB{}, {n, k, 1})},
      {{},
       source,
       cutlass::make_cute_packed_stride(typename GemmKernel::StrideC{}, {m, n, 1}),
       static_cast<T*>(o.y),
       cutlass::make_cute_packed_stride(typename GemmKernel::StrideD{}, {m, n, 1})}};
  args.epilogue.thread.alpha = 1.f;
  args.epilogue.thread.beta = o.residual != nullptr ? 1.f : 0.f;
  args.epilogue.thread.bias_ptr = static_cast<const T*>(o.bias);
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  args.hw_info.device_id = device;
  args.hw_info.sm_count = o.sm_count;
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
  // The persistent schedule without split-K or stream-K needs none; a workspace would have to
  // come from the caller, never from an allocation here.
  if (Gemm::get_workspace_size(args) != 0) return cudaErrorInvalidValue;
  // Builds the tensor maps (host-side encoding only). It does not refuse a misaligned operand:
  // LaunchCutlassGemm checks alignment first.
  if (gemm.initialize(args, nullptr, o.stream) != cutlass::Status::kSuccess) {
    return cudaErrorInvalidValue;
  }
  if (gemm.run(o.stream, nullptr, o.programmatic) != cutlass::Status::kSuccess) {
    const cudaError_t e = cudaGetLastError();
    return e != cudaSuccess ? e : cudaErrorLaunchFailure;
  }
  return cudaGetLastError();
}

template <typename T, class TileShape, class ClusterShape, class Schedule = Cooperative>
cudaError_t Dispatch(const Operands& o) {
  namespace act = cutlass::epilogue::thread;
  switch (o.act) {
    case plan::Activation::kNone:
      return Run<T, act::Identity, TileShape, ClusterShape, Schedule>(o);
    case plan::Activation::kRelu:
      return Run<T, act::ReLu, TileShape, ClusterShape, Schedule>(o);
    case plan::Activation::kGeluErf:
      return Run<T, act::GELU, TileShape, ClusterShape, Schedule>(o);
    case plan::Activation::kGeluTanh:
      return Run<T, act::GELU_taylor, TileShape, ClusterShape, Schedule>(o);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace ltserve::gpu::cutlass_gemm
