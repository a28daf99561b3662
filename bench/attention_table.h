// The tensor-core attention kernel alone, both of its schedules (attention.h) on the same
// inputs, alternating: BERT-base's attention (12 heads of 64, bf16) over batches of sequences,
// each against the bytes it must move at the copy bandwidth measured in the run.
#pragma once

namespace ltserve_bench {

// Prints a markdown table at 1, 8, 32 and 128 sequences of 128 tokens and a mixed batch, or
// with `profile` launches each schedule once per batch (for Nsight Compute) and prints nothing.
// Returns 0, or 1 after printing what failed.
int PrintAttentionTable(double copy_tbps, bool profile);

}  // namespace ltserve_bench
