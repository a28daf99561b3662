// CUTLASS's tiles and schedules (server/gpu/cutlass_gemm.h) against cuBLASLt on BERT-base's
// GEMMs, so that which one a load chose, and by how much, can be read off.
#pragma once

namespace ltserve_bench {

// Prints two markdown tables, bf16: BERT-base's four GEMMs of a layer (QKV; output projection
// and FFN down with their residual; FFN up with the tanh GELU) at 128, 1,024, 4,096 and 16,384
// rows, cuBLASLt's first heuristic algorithm and every CUTLASS tile, each timed alone with the
// L2 emptied; then the four as one graph at 4,096 and 16,384 rows, cuBLASLt against CUTLASS at
// each GEMM's fastest tile, with programmatic launches and without. Returns 0, or 1 after
// printing what failed.
int PrintCutlassGemmTable();

}  // namespace ltserve_bench
