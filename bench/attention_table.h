// The attention kernel alone (attention.h), BERT-base's heads (12 × 64, bf16) over batches
// of sequences, each against the bytes it must move at the copy bandwidth measured in the run:
// the baseline any change to the kernel is measured against.
#pragma once

namespace ltserve_bench {

// Prints a markdown table at 1, 8, 32 and 128 sequences of 128 tokens and a mixed batch, or
// with `profile` launches the kernel once per batch (for Nsight Compute) and prints nothing.
// Returns 0, or 1 after printing what failed.
int PrintAttentionTable(double copy_tbps, bool profile);

}  // namespace ltserve_bench
