// cuBLASLt's heuristic against an exhaustive search of its configurations, one GEMM at a time
// at BERT-base's layer shapes: whether any tile, stage count or cluster shape the heuristic
// does not offer runs the short-K GEMMs of a 32-sequence batch closer to the peak.
#pragma once

namespace ltserve_bench {

// Prints a markdown table (and each shape's fastest configurations on stderr) for BERT-base's
// four GEMMs at 128, 4,096 and 16,384 rows, bf16, with their epilogues; every configuration
// timed warm, as the executor's tuner times cuBLASLt. `peak_tflops`: the bf16 matmul peak
// measured in the run. Returns 0, or 1 after printing what failed.
int PrintGemmSearchTable(double peak_tflops);

}  // namespace ltserve_bench
