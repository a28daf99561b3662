// Which kernel runs one GEMM step at one bucket: cuBLASLt (with the algorithm chosen for that
// step and bucket) or one of the executor's own, chosen by timing at load (DeviceState::Tune)
// and kept in the algorithm cache file beside the cuBLASLt algorithms (algo_cache.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gpu/skinny_gemm.h"

namespace ltserve::gpu {

struct GemmKernel {
  enum class Kind : std::uint8_t { kCublasLt, kSmallBatch, kSkinny };
  Kind kind = Kind::kCublasLt;
  SkinnyGemmConfig skinny;  // kSkinny only

  friend bool operator==(const GemmKernel& a, const GemmKernel& b) {
    return a.kind == b.kind && (a.kind != Kind::kSkinny || a.skinny == b.skinny);
  }
  // One word or, for kSkinny, the word and its four numbers: "cublaslt", "small-batch",
  // "skinny 32 2 4 8" (m_tile, row_tiles, unroll, cluster).
  std::string ToText() const;
  // The inverse of ToText; nullopt for anything else.
  static std::optional<GemmKernel> FromText(std::string_view text);
};

}  // namespace ltserve::gpu
