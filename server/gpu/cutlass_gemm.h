// CUTLASS's Hopper GEMM for the GEMM steps cuBLASLt runs (cutlass_gemm.cu): Y[M,N] =
// act(X[M,K]·W[N,K]ᵀ + bias + residual) with the bias, residual and activation in the
// epilogue, as cuBLASLt's. What it has that cuBLASLt's kernels lack is programmatic dependent
// launch: its producer warps wait for the kernel ahead (griddepcontrol.wait) before their first
// load, and it lets the kernel after it launch once its last tile's main loop is done. The
// kernels cuBLASLt 13 runs in BERT-base's passes (nvjet) have neither
// instruction in their code (bench/RESULTS.md, 2026-12-07), so each of them starts only after
// the kernel ahead has ended and lets nothing start before it ends.
//
// Warp-specialised and persistent (TMA copies, warpgroup MMAs, one block an SM), in two
// schedules: cooperative (a block's two consumer warpgroups share a tile) and pingpong (each
// has its own, and one's epilogue runs while the other multiplies). Built for
// sm_90a: compute capability 9.x only; 16-bit storage only; K and N multiples of 8 (16-byte
// rows for the tensor maps); activations none, ReLU and both GELUs. Compiled only where the
// build found CUTLASS's headers (LTSERVE_WITH_CUTLASS); CutlassGemmAvailable() says.
//
// Measured on an H100 (bench/RESULTS.md, 2026-12-07): with every GEMM of BERT-base on it the
// pass has no time left in which no kernel runs. The cooperative tiles alone are slower than
// cuBLASLt's kernels on those shapes (QKV ~17 %, FFN up ~16 %, FFN down ~5 %); the pingpong
// tile beats them on FFN up from 4,096 rows. Passes with it everywhere: 1.4-2.9 % faster at
// 32 sequences, slower at 1-8 and 128; `auto` (from kCutlassGemmAutoMinRows) 1-2 % faster at
// 128 and 0-1.3 % at 32, for about a minute more of BERT-base's load (2026-12-08). Hence off
// by default.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "gpu/kernels.h"
#include "plan/plan.h"

namespace ltserve::gpu {

// Rows from which `cutlass_gemm_kernel auto` lets the kernels compete with cuBLASLt (timed
// alone, then as the runner-up in the pass check); below, the executor's few-row kernels are
// the ones that compete. On an H100 every tile alone lost to cuBLASLt on BERT-base's GEMMs
// below 4,096 rows, and the pass check's joint trial lost at every bucket below 2,560
// (bench/RESULTS.md): offered there, CUTLASS only took the runner-up's place from the kernels
// that can win and added load time.
constexpr std::int64_t kCutlassGemmAutoMinRows = 2560;

// The tile shapes and schedules compiled, each with the cluster that shares its tiles' copies:
// the one operand two blocks of a cluster have in common is copied once for both (TMA
// multicast). Cooperative: a block's two consumer warpgroups on one tile; pingpong: each on a
// tile of its own, one's epilogue beside the other's main loop (cutlass_gemm_kernels.cuh). The
// values are the algorithm cache's numbers: new ones go at the end.
enum class CutlassTile : std::uint8_t {
  k128x192 = 0,          // 128 rows x 192 outputs, 2 x 1 cluster, cooperative: N = 768 in 4 tiles
  k128x256 = 1,          // 128 x 256, 2 x 1, cooperative
  k256x128 = 2,          // 256 x 128, 1 x 2, cooperative
  k128x128Pingpong = 4,  // 128 x 128, 2 x 1, pingpong
  // 3 and 5 were pingpong tiles of 64 x 256 and 64 x 192, measured and dropped: their numbers
  // stay unused, so that a cache file naming them is re-timed, not read as another tile.
};
inline constexpr CutlassTile kCutlassTiles[] = {CutlassTile::k128x192, CutlassTile::k128x256,
                                                CutlassTile::k256x128,
                                                CutlassTile::k128x128Pingpong};
inline constexpr int kCutlassTileCount = static_cast<int>(std::size(kCutlassTiles));

struct CutlassGemmConfig {
  CutlassTile tile = CutlassTile::k128x256;

  // For logs and tables, e.g. "CUTLASS 128x256 tiles, 2x1 clusters, cooperative".
  std::string Describe() const;
  // The number for the algorithm cache's text (the tile's value); FromNumber is its inverse,
  // false for a number no compiled tile has.
  int Number() const { return static_cast<int>(tile); }
  static bool FromNumber(int number, CutlassGemmConfig* config);
  friend bool operator==(const CutlassGemmConfig& a, const CutlassGemmConfig& b) {
    return a.tile == b.tile;
  }
};

// Whether this build has the kernels (CUTLASS's headers were found when it was configured).
bool CutlassGemmAvailable();

// Whether the kernels can run a Linear of this type, shape and activation on a device of
// compute capability `sm_major`.
bool CutlassGemmSupports(int sm_major, ElemType type, std::int64_t out_features,
                         std::int64_t in_features, plan::Activation act);

// The configurations worth timing for one shape: every compiled tile (empty where the kernels
// do not take the shape).
std::vector<CutlassGemmConfig> CutlassGemmCandidates(std::int64_t rows, std::int64_t out_features,
                                                     std::int64_t in_features);

// Enqueues y = act(x·wᵀ + bias + residual) on `stream` over at most `sm_count` SMs; `bias` and
// `residual` may be null. cudaErrorInvalidValue for what the kernels do not take (see
// CutlassGemmSupports) and for null or misaligned operands (each must be 16-byte aligned),
// cudaErrorNotSupported where the build has no kernels, else the launch's error.
// `programmatic`: launched to overlap the kernel before it (programmatic dependent launch).
cudaError_t LaunchCutlassGemm(const CutlassGemmConfig& config, const void* x, const void* w,
                              const void* bias, const void* residual, void* y, std::int64_t rows,
                              std::int64_t out_features, std::int64_t in_features,
                              plan::Activation act, ElemType type, int sm_count,
                              bool programmatic, cudaStream_t stream);

}  // namespace ltserve::gpu
