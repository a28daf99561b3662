// The attention kernel's shared-memory tile layout (gpu/attention_layout.h): host arithmetic,
// so these run everywhere. What the kernel's speed and correctness rest on: every (row, chunk)
// has a slot of its own inside the tile; ldmatrix's eight rows of one chunk (and the output
// staging's eight rows, the same pattern) meet no bank conflict at any head_dim; and at the
// swizzled widths each quarter-warp of a copy fills exactly one 128-byte line.
#include <gtest/gtest.h>

#include <set>

#include "gpu/attention_layout.h"

namespace ltserve::gpu::attention_layout {
namespace {

constexpr unsigned kRows = 64;        // a key stage's rows, and the output tile's
constexpr unsigned kGroupBytes = 16;  // a bank group: four 4-byte banks
constexpr unsigned kLineBytes = 128;  // one wavefront: eight bank groups

unsigned Bytes(unsigned halves) { return 2 * halves; }

template <int kRowChunks>
void ExpectEverySlotOwnAndInside() {
  using Tile = SharedTile<kRowChunks>;
  std::set<unsigned> slots;
  for (unsigned row = 0; row < kRows; ++row) {
    for (unsigned chunk = 0; chunk < kRowChunks; ++chunk) {
      const unsigned offset = Tile::Offset(row, chunk);
      EXPECT_EQ(offset % kChunkHalves, 0u) << "row " << row << " chunk " << chunk;
      EXPECT_LE(offset + kChunkHalves, kRows * Tile::kStride) << "row " << row << " chunk " << chunk;
      EXPECT_TRUE(slots.insert(offset).second) << "row " << row << " chunk " << chunk << " shares a slot";
    }
  }
}

template <int kRowChunks>
void ExpectEightRowsOfAChunkInEightGroups() {
  using Tile = SharedTile<kRowChunks>;
  for (unsigned row0 = 0; row0 < kRows; row0 += 8) {
    for (unsigned chunk = 0; chunk < kRowChunks; ++chunk) {
      std::set<unsigned> groups;
      for (unsigned row = row0; row < row0 + 8; ++row) {
        groups.insert(Bytes(Tile::Offset(row, chunk)) / kGroupBytes % (kLineBytes / kGroupBytes));
      }
      EXPECT_EQ(groups.size(), 8u) << "rows " << row0 << "-" << row0 + 7 << ", chunk " << chunk;
    }
  }
}

// The copy loops hand lane e of a warp instruction chunk e % kRowChunks of row e / kRowChunks.
template <int kRowChunks>
void ExpectEachQuarterWarpCopyToFillOneLine() {
  using Tile = SharedTile<kRowChunks>;
  static_assert(Tile::kSwizzled);
  for (unsigned first = 0; first < kRows * kRowChunks; first += 8) {
    std::set<unsigned> lines;
    std::set<unsigned> groups;
    for (unsigned e = first; e < first + 8; ++e) {
      const unsigned byte = Bytes(Tile::Offset(e / kRowChunks, e % kRowChunks));
      lines.insert(byte / kLineBytes);
      groups.insert(byte / kGroupBytes % (kLineBytes / kGroupBytes));
    }
    EXPECT_EQ(lines.size(), 1u) << "copies " << first << "-" << first + 7;
    EXPECT_EQ(groups.size(), 8u) << "copies " << first << "-" << first + 7;
  }
}

TEST(AttentionLayout, SwizzledWidthsAreUnpadded) {
  EXPECT_EQ(SharedTile<2>::kStride, 16);
  EXPECT_EQ(SharedTile<4>::kStride, 32);
  EXPECT_EQ(SharedTile<8>::kStride, 64);
  EXPECT_EQ(SharedTile<16>::kStride, 128);
  EXPECT_EQ(SharedTile<6>::kStride, 56);  // head_dim 48 keeps its 16-byte pad
  EXPECT_FALSE(SharedTile<10>::kSwizzled);
}

TEST(AttentionLayout, EverySlotIsItsOwnAndInsideTheTile) {
  ExpectEverySlotOwnAndInside<1>();
  ExpectEverySlotOwnAndInside<2>();
  ExpectEverySlotOwnAndInside<4>();
  ExpectEverySlotOwnAndInside<6>();
  ExpectEverySlotOwnAndInside<8>();
  ExpectEverySlotOwnAndInside<10>();
  ExpectEverySlotOwnAndInside<12>();
  ExpectEverySlotOwnAndInside<14>();
  ExpectEverySlotOwnAndInside<16>();
}

TEST(AttentionLayout, LdmatrixReadsMeetNoBankConflictAtAnyHeadDim) {
  ExpectEightRowsOfAChunkInEightGroups<2>();
  ExpectEightRowsOfAChunkInEightGroups<4>();
  ExpectEightRowsOfAChunkInEightGroups<6>();
  ExpectEightRowsOfAChunkInEightGroups<8>();
  ExpectEightRowsOfAChunkInEightGroups<10>();
  ExpectEightRowsOfAChunkInEightGroups<12>();
  ExpectEightRowsOfAChunkInEightGroups<14>();
  ExpectEightRowsOfAChunkInEightGroups<16>();
}

TEST(AttentionLayout, SwizzledCopiesFillOneLineAQuarterWarp) {
  ExpectEachQuarterWarpCopyToFillOneLine<2>();
  ExpectEachQuarterWarpCopyToFillOneLine<4>();
  ExpectEachQuarterWarpCopyToFillOneLine<8>();
  ExpectEachQuarterWarpCopyToFillOneLine<16>();
}

}  // namespace
}  // namespace ltserve::gpu::attention_layout
