// Which kernel runs one GEMM step at one bucket: cuBLASLt (with the algorithm chosen for that
// step and bucket) or one of the executor's own, chosen by timing at load (DeviceState::Tune)
// and kept in the algorithm cache file beside the cuBLASLt algorithms (algo_cache.h). The cache
// also keeps whether a run of steps goes to the layer-chain kernel: kChain with its
// configuration, or kCublasLt for "each step its own kernel". kNormGemm marks a GEMM step that
// runs together with the LayerNorm step after it (norm_gemm.h); that LayerNorm step then
// launches nothing of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gpu/chain_gemm.h"
#include "gpu/cutlass_gemm.h"
#include "gpu/norm_gemm.h"
#include "gpu/skinny_gemm.h"
#include "gpu/staged_gemm.h"

namespace ltserve::gpu {

struct GemmKernel {
  enum class Kind : std::uint8_t {
    kCublasLt, kSmallBatch, kSkinny, kChain, kNormGemm, kStaged, kCutlass
  };
  Kind kind = Kind::kCublasLt;
  SkinnyGemmConfig skinny;  // kSkinny only
  StagedGemmConfig staged;  // kStaged only
  CutlassGemmConfig cutlass;  // kCutlass only
  ChainGemmConfig chain;    // kChain only
  NormGemmConfig norm;      // kNormGemm only

  static GemmKernel SmallBatch() { return WithKind(Kind::kSmallBatch); }
  static GemmKernel Skinny(const SkinnyGemmConfig& config) {
    GemmKernel kernel = WithKind(Kind::kSkinny);
    kernel.skinny = config;
    return kernel;
  }
  static GemmKernel Staged(const StagedGemmConfig& config) {
    GemmKernel kernel = WithKind(Kind::kStaged);
    kernel.staged = config;
    return kernel;
  }
  static GemmKernel Cutlass(const CutlassGemmConfig& config) {
    GemmKernel kernel = WithKind(Kind::kCutlass);
    kernel.cutlass = config;
    return kernel;
  }
  static GemmKernel Chain(const ChainGemmConfig& config) {
    GemmKernel kernel = WithKind(Kind::kChain);
    kernel.chain = config;
    return kernel;
  }
  static GemmKernel NormGemm(const NormGemmConfig& config) {
    GemmKernel kernel = WithKind(Kind::kNormGemm);
    kernel.norm = config;
    return kernel;
  }

  friend bool operator==(const GemmKernel& a, const GemmKernel& b) {
    return a.kind == b.kind && (a.kind != Kind::kSkinny || a.skinny == b.skinny) &&
           (a.kind != Kind::kStaged || a.staged == b.staged) &&
           (a.kind != Kind::kCutlass || a.cutlass == b.cutlass) &&
           (a.kind != Kind::kChain || a.chain == b.chain) &&
           (a.kind != Kind::kNormGemm || a.norm == b.norm);
  }
  // One word or, for kSkinny, kChain and kNormGemm, the word and its numbers: "cublaslt",
  // "small-batch", "skinny 32 2 4 8" (m_tile, row_tiles, unroll, cluster), "staged 128 6"
  // (m_tile, cluster), "cutlass 1" (CutlassGemmConfig::Number), "chain 2 1 1"
  // (units_per_worker, prefetch, blocks_per_sm), "chain-ring 1 2 3" (units_per_worker,
  // ring_stages, blocks_per_sm), "norm 16 3 4" (m_tile, col_tiles, stages),
  // "norm-split 8 1 4 4" (the split-K schedule of GEMM + LayerNorm: as "skinny").
  std::string ToText() const;
  // The inverse of ToText; nullopt for anything else.
  static std::optional<GemmKernel> FromText(std::string_view text);

 private:
  static GemmKernel WithKind(Kind k) {
    GemmKernel kernel;
    kernel.kind = k;
    return kernel;
  }
};

}  // namespace ltserve::gpu
