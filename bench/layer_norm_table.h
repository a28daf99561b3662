// The LayerNorm kernel's two schedules (gpu/kernels.h, LayerNormSchedule) side by side at the
// encoder's row counts: one warp a row in blocks of 8 rows, against the streaming grid whose
// warps keep the next row's loads in flight. The executor runs the first; this table is what
// decides where, if anywhere, it should run the second.
#pragma once

namespace ltserve_bench {

// Prints a markdown table, bf16, widths 768 (with and without a residual) and 1024, 128 to
// 65,536 rows: each schedule with the L2 emptied before each run (median of 9) and back to
// back (its input left in the L2 by the run before, as a GEMM's output often is), against the
// floor of its bytes (input, residual, output) at `copy_tbps`, the copy bandwidth measured in
// the run. `profile`: instead, runs each schedule once at 16,384 × 768 with a residual, for a
// profiler. Returns 0, or 1 after printing what failed.
int PrintLayerNormTable(double copy_tbps, bool profile);

}  // namespace ltserve_bench
