// The split-K kernel against cuBLASLt one GEMM at a time, with the L2 emptied before each
// timed run (as the executor's tuner times them): every candidate configuration per layer shape
// and row count, so that what the tuner chose, and by how much, can be read off.
#pragma once

namespace ltserve_bench {

// Prints a markdown table for the MLP's and BERT-base's layer shapes at 1, 8, 32 and 128 rows,
// bf16. `copy_tbps`: the copy bandwidth measured in the run, for the weight-streaming floor.
// Returns 0, or 1 after printing what failed.
int PrintSkinnyGemmTable(double copy_tbps);

}  // namespace ltserve_bench
