// How the tensor-core attention kernel (attention.cu) lays out its K, V, query and output tiles
// in shared memory. A header of its own, host-compilable, so that a host test
// (tests/gpu/test_attention_layout.cc) can check the bank-conflict properties the kernel's
// speed rests on without a GPU.
#pragma once

#if defined(__CUDACC__)
#define LTSERVE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define LTSERVE_HOST_DEVICE inline
#endif

namespace ltserve::gpu::attention_layout {

// 16-bit values in a 16-byte chunk: what one cp.async copies and one ldmatrix lane addresses.
constexpr int kChunkHalves = 8;

// Where row `row`, chunk `chunk` of a tile of rows of kRowChunks chunks lives, in halves from
// the tile's start. Shared memory serves a warp's request in 128-byte wavefronts of eight
// 16-byte bank groups, so writers and readers both want the eight chunks that one phase of an
// instruction touches in eight different groups: the copies write a row a quarter-warp (lanes
// 0-7 one row's chunks), ldmatrix reads one chunk of each of eight consecutive rows.
// Where rows fill 128-byte lines exactly, or a power-of-two fraction or multiple of one
// (head_dim 16, 32, 64, 128), rows are unpadded and each line's chunks are XOR-permuted by the
// line's place among eight consecutive lines (CUTLASS's and FlashAttention's layout): a
// quarter-warp's copies still fill exactly one line, and the same chunk of eight consecutive
// rows falls in eight groups. Other widths (48, 80, 96, 112) keep a 16-byte pad a row, which
// keeps ldmatrix conflict-free but makes the copies straddle lines: Nsight Compute counted the
// padded head_dim-64 copies at 10.5 wavefronts a warp instruction against 4 (bench/RESULTS.md).
template <int kRowChunks>
struct SharedTile {
  static_assert(kRowChunks >= 1 && kRowChunks <= 16, "head_dim 8 to 128");
  static constexpr bool kSwizzled = (kRowChunks & (kRowChunks - 1)) == 0;
  static constexpr int kStride = kRowChunks * kChunkHalves + (kSwizzled ? 0 : kChunkHalves);

  // Unsigned, so that the compiler can see through row % 8 of a row known to be 8r + lane % 8.
  LTSERVE_HOST_DEVICE static unsigned Offset(unsigned row, unsigned chunk) {
    if constexpr (kSwizzled) {
      // Rows sharing a line (more than one where a row is under 128 bytes); the XOR's key is
      // the row's place among eight where rows span lines, its line's otherwise.
      constexpr unsigned kRowsPerLine = kRowChunks >= 8 ? 1 : 8 / kRowChunks;
      const unsigned line = row / kRowsPerLine;
      const unsigned position = (row % kRowsPerLine) * kRowChunks + chunk;  // within its line(s)
      return line * kRowsPerLine * kStride + (position ^ (line % 8)) * kChunkHalves;
    } else {
      return row * kStride + chunk * kChunkHalves;
    }
  }
};

}  // namespace ltserve::gpu::attention_layout
