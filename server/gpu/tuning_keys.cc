#include "gpu/tuning_keys.h"

#include <algorithm>
#include <cstdio>

namespace ltserve::gpu {

std::string StepsText(const GpuModel& model,
                      const std::function<std::string(std::size_t)>& gemm_kernels) {
  std::string text;
  for (std::size_t s = 0; s < model.steps().size(); ++s) {
    const Step& step = model.steps()[s];
    text += std::to_string(step.index()) + ":";
    if (const auto* gemm = std::get_if<GemmStep>(&step)) {
      text += std::to_string(gemm->k) + ">" + std::to_string(gemm->n) + "," +
              std::to_string(static_cast<int>(gemm->Effective(model.options().gelu))) +
              (gemm->bias_offset != kNoOffset ? ",b" : "") +
              (gemm->residual != plan::kNoValue ? ",r" : "") + (gemm->fused ? ",f" : "") + "," +
              gemm_kernels(s);
    } else if (const auto* norm = std::get_if<LayerNormStep>(&step)) {
      text += std::to_string(model.plan().values()[norm->output].width) +
              (norm->residual != plan::kNoValue ? ",r" : "");
    } else if (const auto* attention = std::get_if<AttentionStep>(&step)) {
      text += std::to_string(attention->num_heads) + "x" + std::to_string(attention->head_dim);
    } else if (const auto* pointwise = std::get_if<PointwiseStep>(&step)) {
      text += std::to_string(static_cast<int>(pointwise->activation)) +
              (pointwise->residual != plan::kNoValue ? ",r" : "");
    }
    text += ";";
  }
  return text;
}

std::string Digest(const std::string& text) {
  std::uint64_t digest = 14695981039346656037ull;
  for (const char c : text) {
    digest = (digest ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(digest));
  return hex;
}

void DistinctRows::Add(std::int64_t rows) {
  if (std::find(rows_.begin(), rows_.end(), rows) == rows_.end()) rows_.push_back(rows);
}

std::string DistinctRows::Text() const {
  std::string text = "at";
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    text += (r > 0 ? ", " : " ") + std::to_string(rows_[r]);
  }
  return text + " rows";
}

}  // namespace ltserve::gpu
