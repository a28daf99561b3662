// The layer-chain kernel against the same layers run one kernel each, with the L2 emptied
// before each timed run (as the executor's tuner times them): every configuration per chain
// and row count, so that what the tuner chose, and by how much, can be read off.
#pragma once

namespace ltserve_bench {

// Prints a markdown table for the MLP 1024-4096-4096-1024, BERT-base's FFN 768-3072-768 and
// the FFN 4096-16384-4096 at 1, 8, 16 and 32 rows, bf16. `copy_tbps`: the copy bandwidth
// measured in the run, for the weight-streaming floor. Returns 0, or 1 after printing what
// failed. With `profile`, times nothing: launches every configuration once on the MLP at 1 and
// 32 rows between cudaProfilerStart and Stop, for Nsight Compute.
int PrintChainGemmTable(double copy_tbps, bool profile);

// Where the ring schedule's units spend their time (chain_gemm.h, kChainTraceFields): the MLP
// at 1 and 8 rows, every ring configuration, one traced launch after a warm-up, per layer the
// units' first start and last end (µs from the launch's first unit) and the medians of each
// phase of a unit. Returns 0, or 1 after printing what failed.
int PrintChainRingTrace();

}  // namespace ltserve_bench
