// What the load-time choosers (device_state_tuning.cc, device_state_pass_check.cc) share: the
// text of a plan's steps for cache keys of choices that depend on the whole pass, and the
// row counts a load-log note lists. Internal to server/gpu.
//
// Thread-safety: plain functions and a value type.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpu/gpu_model.h"

namespace ltserve::gpu {

// Every step of `model` as text (its kind and what decides its bits: widths, epilogue,
// residual), each GEMM step followed by `gemm_kernels(step)`: the kernels a choice depends on.
std::string StepsText(const GpuModel& model,
                      const std::function<std::string(std::size_t)>& gemm_kernels);

// 16 hex digits of a 64-bit FNV-1a digest of `text`: a cache key stays short whatever the
// number of steps.
std::string Digest(const std::string& text);

// Row counts in order of first use, each once, for a load-log note: "at 8, 32, 1024 rows".
class DistinctRows {
 public:
  void Add(std::int64_t rows);
  bool empty() const { return rows_.empty(); }
  std::string Text() const;

 private:
  std::vector<std::int64_t> rows_;
};

}  // namespace ltserve::gpu
