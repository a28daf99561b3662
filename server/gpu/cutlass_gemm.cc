#include "gpu/cutlass_gemm.h"

#include <cstdint>

#include "gpu/cutlass_gemm_tiles.h"

namespace ltserve::gpu {

std::string CutlassGemmConfig::Describe() const {
  switch (tile) {
    case CutlassTile::k128x192: return "CUTLASS 128x192 tiles, 2x1 clusters, cooperative";
    case CutlassTile::k128x256: return "CUTLASS 128x256 tiles, 2x1 clusters, cooperative";
    case CutlassTile::k256x128: return "CUTLASS 256x128 tiles, 1x2 clusters, cooperative";
    case CutlassTile::k128x128Pingpong: return "CUTLASS 128x128 tiles, 2x1 clusters, pingpong";
  }
  return "CUTLASS";
}

bool CutlassGemmConfig::FromNumber(int number, CutlassGemmConfig* config) {
  for (const CutlassTile tile : kCutlassTiles) {
    if (static_cast<int>(tile) == number) {
      config->tile = tile;
      return true;
    }
  }
  return false;
}

bool CutlassGemmAvailable() {
#if defined(LTSERVE_WITH_CUTLASS)
  return true;
#else
  return false;
#endif
}

bool CutlassGemmSupports(int sm_major, ElemType type, std::int64_t out_features,
                         std::int64_t in_features, plan::Activation act) {
  const bool activation = act == plan::Activation::kNone || act == plan::Activation::kRelu ||
                          act == plan::Activation::kGeluErf || act == plan::Activation::kGeluTanh;
  // The problem's sizes are ints in CUTLASS's arguments.
  constexpr std::int64_t kMaxDim = std::int64_t{1} << 30;
  return CutlassGemmAvailable() && sm_major == 9 &&
         (type == ElemType::kBf16 || type == ElemType::kFp16) && activation &&
         out_features % 8 == 0 && in_features % 8 == 0 && out_features > 0 && in_features > 0 &&
         out_features < kMaxDim && in_features < kMaxDim;
}

std::vector<CutlassGemmConfig> CutlassGemmCandidates(std::int64_t rows, std::int64_t out_features,
                                                     std::int64_t in_features) {
  if (rows < 1 || out_features % 8 != 0 || in_features % 8 != 0) return {};
  std::vector<CutlassGemmConfig> configs;
  for (const CutlassTile tile : kCutlassTiles) configs.push_back({tile});
  return configs;
}

cudaError_t LaunchCutlassGemm(const CutlassGemmConfig& config, const void* x, const void* w,
                              const void* bias, const void* residual, void* y, std::int64_t rows,
                              std::int64_t out_features, std::int64_t in_features,
                              plan::Activation act, ElemType type, int sm_count,
                              bool programmatic, cudaStream_t stream) {
#if defined(LTSERVE_WITH_CUTLASS)
  // CutlassGemmSupports refuses the storage types without kernels, so `bf16` below decides.
  if (rows < 1 || rows >= (std::int64_t{1} << 30) || sm_count < 1 ||
      !CutlassGemmSupports(9, type, out_features, in_features, act)) {
    return cudaErrorInvalidValue;
  }
  // TMA's tensor maps need 16-byte aligned bases, and CUTLASS launches whatever it is given
  // (a misaligned X ran into an illegal instruction, which ends the CUDA context).
  const auto aligned = [](const void* p) {
    return p == nullptr || reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
  };
  if (x == nullptr || w == nullptr || y == nullptr || !aligned(x) || !aligned(w) ||
      !aligned(y) || !aligned(bias) || !aligned(residual)) {
    return cudaErrorInvalidValue;
  }
  const cutlass_gemm::Operands o{x,    w,           bias,         residual, y,        rows,
                                 out_features, in_features, act, type, sm_count, programmatic,
                                 stream};
  const bool bf16 = type == ElemType::kBf16;
  switch (config.tile) {
    case CutlassTile::k128x192:
      return bf16 ? cutlass_gemm::Launch128x192Bf16(o) : cutlass_gemm::Launch128x192Fp16(o);
    case CutlassTile::k128x256:
      return bf16 ? cutlass_gemm::Launch128x256Bf16(o) : cutlass_gemm::Launch128x256Fp16(o);
    case CutlassTile::k256x128:
      return bf16 ? cutlass_gemm::Launch256x128Bf16(o) : cutlass_gemm::Launch256x128Fp16(o);
    case CutlassTile::k128x128Pingpong:
      return bf16 ? cutlass_gemm::Launch128x128PingpongBf16(o)
                  : cutlass_gemm::Launch128x128PingpongFp16(o);
  }
  return cudaErrorInvalidValue;
#else
  (void)config, (void)x, (void)w, (void)bias, (void)residual, (void)y, (void)rows;
  (void)out_features, (void)in_features, (void)act, (void)type, (void)sm_count;
  (void)programmatic, (void)stream;
  return cudaErrorNotSupported;
#endif
}

}  // namespace ltserve::gpu
