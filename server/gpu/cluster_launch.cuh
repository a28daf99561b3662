// Launching a kernel in thread-block clusters (sm_90+), for the kernels that reduce through
// distributed shared memory (skinny_gemm.cu, norm_gemm.cu).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ltserve::gpu {

// Clusters of more than this many blocks need the kernel's opt-in (and a GPU that has them).
constexpr int kPortableClusterBlocks = 8;

// Opts kKernel in, once per device, to clusters past kPortableClusterBlocks and to
// `max_smem_bytes` of dynamic shared memory (past the default 48 KiB; a kernel passes the same
// maximum every time, and every launch's shared memory must be within it). The first call on
// a device is at load (timing), never under stream capture. Returns the first error.
template <auto kKernel>
cudaError_t OptInToClusters(std::size_t max_smem_bytes) {
  static std::atomic<std::uint64_t> opted_in{0};  // one bit per device, for this kernel
  int device = 0;
  if (const cudaError_t error = cudaGetDevice(&device); error != cudaSuccess) return error;
  const std::uint64_t bit = std::uint64_t{1} << (device % 64);
  if ((opted_in.load() & bit) != 0) return cudaSuccess;
  if (const cudaError_t error =
          cudaFuncSetAttribute(kKernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
      error != cudaSuccess) {
    return error;
  }
  if (const cudaError_t error = cudaFuncSetAttribute(
          kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(max_smem_bytes));
      error != cudaSuccess) {
    return error;
  }
  opted_in.fetch_or(bit);
  return cudaSuccess;
}

// Enqueues kKernel on `stream` with `grid` in clusters of shape `cluster` and `smem_bytes` of
// dynamic shared memory, after OptInToClusters(max_smem_bytes); with `programmatic`, as a
// programmatic dependent launch (kernels_device.cuh). Returns the first error.
template <auto kKernel, typename... Args>
cudaError_t LaunchInClustersUpTo(std::size_t max_smem_bytes, dim3 cluster, dim3 grid, dim3 block,
                                 std::size_t smem_bytes, bool programmatic, cudaStream_t stream,
                                 Args... args) {
  if (smem_bytes > max_smem_bytes) return cudaErrorInvalidValue;
  if (const cudaError_t error = OptInToClusters<kKernel>(max_smem_bytes); error != cudaSuccess) {
    return error;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attributes[2]{};
  attributes[0].id = cudaLaunchAttributeClusterDimension;
  attributes[0].val.clusterDim.x = cluster.x;
  attributes[0].val.clusterDim.y = cluster.y;
  attributes[0].val.clusterDim.z = cluster.z;
  attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[1].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attributes;
  config.numAttrs = programmatic ? 2 : 1;
  return cudaLaunchKernelEx(&config, kKernel, args...);
}

// LaunchInClustersUpTo for a kernel whose `smem_bytes` is the same at every launch.
template <auto kKernel, typename... Args>
cudaError_t LaunchInClusters(dim3 cluster, dim3 grid, dim3 block, std::size_t smem_bytes,
                             bool programmatic, cudaStream_t stream, Args... args) {
  return LaunchInClustersUpTo<kKernel>(smem_bytes, cluster, grid, block, smem_bytes,
                                       programmatic, stream, args...);
}

}  // namespace ltserve::gpu
