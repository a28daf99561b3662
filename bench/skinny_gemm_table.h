// The split-K and streamed kernels against cuBLASLt one GEMM at a time, with the L2 emptied before each
// timed run (as the executor's tuner times them): every candidate configuration per layer shape
// and row count, so that what the tuner chose, and by how much, can be read off.
#pragma once

namespace ltserve_bench {

// Prints a markdown table for the MLP's and BERT-base's layer shapes at 1, 8, 32 and 128 rows,
// bf16 (the streamed and staged-weights kernels' candidates beside the split-K kernel's), then
// BERT-base's four GEMMs of a layer at 128 rows as one graph of each kind, then the MLP's three
// layers as one graph at 1 to 32 rows, each layer cuBLASLt, split-K or streamed. `copy_tbps`:
// the copy bandwidth measured in the run, for the weight-streaming floor. Returns 0, or 1
// after printing what failed.
int PrintSkinnyGemmTable(double copy_tbps);

// One launch of each few-row kernel configuration on a 4096 x 4096 layer at 1 and 8 rows
// (split-K at 8-block clusters, every streamed candidate) between cudaProfilerStart and Stop,
// each named on stderr, for Nsight Compute.
int ProfileFewRowGemms();

// One launch each of cuBLASLt's first heuristic algorithm and of the fastest split-K and
// staged-weights configurations (timed first, outside the profiled range) on BERT-base's QKV and FFN down
// projections at 128 rows, for Nsight Compute's warp-state and memory sections: why the
// split-K kernel trails cuBLASLt at 128 rows.
int ProfileWideGemms();

}  // namespace ltserve_bench
