// A/B of programmatic dependent launch (the model option programmatic_launch) in one process:
// the same plan loaded twice, on and off, with the same cuBLASLt algorithms (the first load
// writes an algorithm cache file that the second reads, so a flip between close candidates
// cannot pass for the launch's effect), timed in alternating rounds from their graphs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "model/model_spec.h"
#include "model/token_layout.h"
#include "plan/plan.h"

namespace ltserve_bench {

// Prints a markdown table: per batch, the median graph µs with it on and off and their ratio.
// `seq` > 0: a token model, each batch `batch` sequences of `seq` tokens; 0: rows. Returns 0,
// or 1 after printing why a load or a timing failed.
int PrintProgrammaticLaunchAB(const std::string& name, std::shared_ptr<const ltserve::plan::Plan> plan,
                              ltserve::ModelSpec spec,
                              const std::optional<ltserve::TokenLayout>& tokens,
                              std::span<const std::int64_t> batches, std::int64_t seq);

}  // namespace ltserve_bench
