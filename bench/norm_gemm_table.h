// The GEMM + LayerNorm kernel against what it replaces, one post-LN step at a time with the L2
// emptied before each timed run (as the executor's tuner times them): cuBLASLt's GEMM followed
// by the LayerNorm kernel, each alone and together, against every candidate configuration, so
// that what the tuner chose, and by how much, can be read off.
#pragma once

namespace ltserve_bench {

// Prints a markdown table for BERT-base's two post-LN shapes (768->768 and 3072->768, bias and
// residual) at 1 to 512 rows, bf16. `copy_tbps`: the copy bandwidth measured in the run, for
// the weight-streaming floor. `profile`: instead, runs each candidate once at 128 rows, for a
// profiler. Returns 0, or 1 after printing what failed.
int PrintNormGemmTable(double copy_tbps, bool profile);

}  // namespace ltserve_bench
