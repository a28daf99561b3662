#include "gpu/gemm_kernel.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace ltserve::gpu {
namespace {

std::string SkinnyNumbers(const SkinnyGemmConfig& c) {
  return std::to_string(c.m_tile) + " " + std::to_string(c.row_tiles) + " " +
         std::to_string(c.unroll) + " " + std::to_string(c.cluster);
}

// The four numbers of SkinnyNumbers, each 1 to 255; nullopt otherwise.
std::optional<SkinnyGemmConfig> ReadSkinnyNumbers(std::istream& in) {
  int values[4] = {};
  for (int& v : values) in >> v;
  if (!in) return std::nullopt;
  for (int v : values) {
    if (v < 1 || v > 255) return std::nullopt;
  }
  return SkinnyGemmConfig{static_cast<std::uint8_t>(values[0]), static_cast<std::uint8_t>(values[1]),
                          static_cast<std::uint8_t>(values[2]), static_cast<std::uint8_t>(values[3])};
}

}  // namespace

std::string GemmKernel::ToText() const {
  switch (kind) {
    case Kind::kCublasLt: return "cublaslt";
    case Kind::kSmallBatch: return "small-batch";
    case Kind::kSkinny: return "skinny " + SkinnyNumbers(skinny);
    case Kind::kStaged:
      return "staged " + std::to_string(staged.m_tile) + " " + std::to_string(staged.cluster);
    case Kind::kCutlass: return "cutlass " + std::to_string(cutlass.Number());
    case Kind::kChain:
      if (chain.ring()) {
        return "chain-ring " + std::to_string(chain.units_per_worker) + " " +
               std::to_string(chain.ring_stages) + " " + std::to_string(chain.blocks_per_sm);
      }
      return "chain " + std::to_string(chain.units_per_worker) + " " + (chain.prefetch ? "1" : "0") +
             " " + std::to_string(chain.blocks_per_sm);
    case Kind::kNormGemm:
      if (norm.split_k.has_value()) return "norm-split " + SkinnyNumbers(*norm.split_k);
      return "norm " + std::to_string(norm.m_tile) + " " + std::to_string(norm.col_tiles) + " " +
             std::to_string(norm.stages);
  }
  return "cublaslt";
}

std::optional<GemmKernel> GemmKernel::FromText(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string word;
  in >> word;
  GemmKernel kernel;
  if (word == "cublaslt" || word == "small-batch") {
    kernel.kind = word == "cublaslt" ? Kind::kCublasLt : Kind::kSmallBatch;
  } else if (word == "skinny" || word == "norm-split") {
    const std::optional<SkinnyGemmConfig> config = ReadSkinnyNumbers(in);
    // A cache file may predate a change to what is compiled: such an entry is no choice.
    if (!config.has_value() || !SkinnyGemmCompiled(*config, /*layer_norm=*/word == "norm-split")) {
      return std::nullopt;
    }
    if (word == "skinny") {
      kernel.kind = Kind::kSkinny;
      kernel.skinny = *config;
    } else {
      kernel.kind = Kind::kNormGemm;
      kernel.norm = NormGemmConfig::SplitK(*config);
    }
  } else if (word == "staged") {
    int m_tile = 0;
    int cluster = 0;
    in >> m_tile >> cluster;
    if (!in || m_tile < 1 || m_tile > 255 || cluster < 1 || cluster > 255) return std::nullopt;
    const StagedGemmConfig config{static_cast<std::uint8_t>(m_tile),
                                  static_cast<std::uint8_t>(cluster)};
    if (!StagedGemmCompiled(config)) return std::nullopt;
    kernel.kind = Kind::kStaged;
    kernel.staged = config;
  } else if (word == "cutlass") {
    int number = -1;
    in >> number;
    CutlassGemmConfig config;
    // Also nothing where this build has no CUTLASS kernels: a cache file from a build with them.
    if (!in || !CutlassGemmConfig::FromNumber(number, &config) || !CutlassGemmAvailable()) {
      return std::nullopt;
    }
    kernel.kind = Kind::kCutlass;
    kernel.cutlass = config;
  } else if (word == "chain" || word == "chain-ring") {
    const bool ring = word == "chain-ring";
    int units = 0;
    int second = -1;  // prefetch (0 or 1), or the ring's stages
    int blocks = 0;
    in >> units >> second >> blocks;
    if (!in || units < 1 || units > 255 || second < 0 || second > 255 || blocks < 1 ||
        blocks > 255) {
      return std::nullopt;
    }
    const ChainGemmConfig config =
        ring ? ChainGemmConfig{static_cast<std::uint8_t>(units), false,
                               static_cast<std::uint8_t>(blocks), static_cast<std::uint8_t>(second)}
             : ChainGemmConfig{static_cast<std::uint8_t>(units), second == 1,
                               static_cast<std::uint8_t>(blocks)};
    // Only what some bucket offers: a cache file may predate a change to the candidates.
    const std::vector<ChainGemmConfig> offered = ChainGemmCandidates(1);
    const std::vector<ChainGemmConfig> offered_wide = ChainGemmCandidates(kChainMaxRows);
    if ((!ring && second > 1) || (ring && second == 0) || (std::find(offered.begin(), offered.end(), config) == offered.end() &&
                                  std::find(offered_wide.begin(), offered_wide.end(), config) ==
                                      offered_wide.end())) {
      return std::nullopt;
    }
    kernel.kind = Kind::kChain;
    kernel.chain = config;
  } else if (word == "norm") {
    int m_tile = 0;
    int col_tiles = 0;
    int stages = 0;
    in >> m_tile >> col_tiles >> stages;
    if (!in || (m_tile != 8 && m_tile != 16) || col_tiles < 1 || col_tiles > 4 ||
        (stages != 4 && stages != 8)) {
      return std::nullopt;
    }
    kernel.kind = Kind::kNormGemm;
    kernel.norm = NormGemmConfig{static_cast<std::uint8_t>(m_tile),
                                 static_cast<std::uint8_t>(col_tiles),
                                 static_cast<std::uint8_t>(stages)};
  } else {
    return std::nullopt;
  }
  std::string rest;
  if (in >> rest) return std::nullopt;
  return kernel;
}

}  // namespace ltserve::gpu
