// CheckPickleLengths: a length that the rest of the record cannot hold is refused, with the
// record, the offset and both sizes in the message; every well-formed pickle passes, and what
// the walk does not know is left to libtorch.
#include <gtest/gtest.h>

#include <string>

#include "torch/pickle_lengths.h"

namespace ltserve::torchscript {
namespace {

Status Check(const std::string& pickle) {
  return CheckPickleLengths("data.pkl", reinterpret_cast<const std::uint8_t*>(pickle.data()),
                            pickle.size());
}

void ExpectRefused(const std::string& pickle, const std::string& fragment) {
  Status status = Check(pickle);
  ASSERT_FALSE(status.ok()) << "accepted a malformed pickle";
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("'data.pkl'"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

// What CPython's pickle.dumps({'w': [1.5, b'ab'], 'n': 70000}, protocol=2) writes: BINUNICODE,
// GLOBAL, BINPUT, BINFLOAT, BININT, TUPLE2, REDUCE.
const std::string kProtocol2(
    "\x80\x02}q\x00(X\x01\x00\x00\x00wq\x01]q\x02(G?\xf8\x00\x00\x00\x00\x00\x00"
    "c_codecs\nencode\nq\x03X\x02\x00\x00\x00"
    "abq\x04X\x06\x00\x00\x00latin1q\x05\x86q\x06Rq\x07"
    "eX\x01\x00\x00\x00nq\x08Jp\x11\x01\x00u.",
    89);

TEST(PickleLengths, WellFormedProtocol2PicklePasses) {
  ASSERT_EQ(kProtocol2.back(), '.');
  EXPECT_TRUE(Check(kProtocol2).ok()) << Check(kProtocol2).message();
}

TEST(PickleLengths, WellFormedProtocol4FramedPicklePasses) {
  // pickle.dumps(('ab', b'c'), protocol=4): a FRAME of 12 bytes, SHORT_BINUNICODE,
  // SHORT_BINBYTES, MEMOIZE.
  const std::string pickle(
      "\x80\x04\x95\x0c\x00\x00\x00\x00\x00\x00\x00\x8c\x02"
      "ab\x94"
      "C\x01"
      "c\x94\x86\x94.",
      23);
  EXPECT_TRUE(Check(pickle).ok()) << Check(pickle).message();
}

TEST(PickleLengths, BinUnicodeLongerThanTheRecordIsRefused) {
  // The fuzz target's finding: a 4-byte length of 4,160,749,576 with 4 bytes after it.
  ExpectRefused(std::string("\x80\x02X\x08\x00\x00\xf8wxyz", 11),
                "declares 4160749576 bytes but only 4 remain");
}

TEST(PickleLengths, EightByteLengthsCannotWrapAround) {
  // BINUNICODE8 of 2^64 - 1: `at + length` would wrap; the check compares with what is left.
  ExpectRefused(std::string("\x8d\xff\xff\xff\xff\xff\xff\xff\xff" "ab", 11),
                "declares 18446744073709551615 bytes but only 2 remain");
}

TEST(PickleLengths, EachCountedOpcodeIsChecked) {
  // SHORT_BINSTRING, SHORT_BINBYTES, SHORT_BINUNICODE, LONG1 (1-byte counts); BINSTRING,
  // BINBYTES, LONG4 (4-byte); BINBYTES8, BYTEARRAY8 (8-byte); each one byte short.
  const std::string one_byte = "UC\x8c\x8a";
  for (char opcode : one_byte) {
    ExpectRefused(std::string(1, opcode) + "\x03" + "ab", "declares 3 bytes but only 2 remain");
    EXPECT_TRUE(Check(std::string(1, opcode) + "\x02" + "ab.").ok()) << int(opcode);
  }
  for (char opcode : std::string("TB\x8b")) {
    ExpectRefused(std::string(1, opcode) + std::string("\x03\x00\x00\x00", 4) + "ab",
                  "declares 3 bytes");
  }
  for (char opcode : std::string("\x8e\x96")) {
    ExpectRefused(std::string(1, opcode) + std::string("\x03\x00\x00\x00\x00\x00\x00\x00", 8) +
                      "ab",
                  "declares 3 bytes");
  }
}

TEST(PickleLengths, FrameLargerThanTheRecordIsRefused) {
  ExpectRefused(std::string("\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00N.", 13),
                "declares 16 bytes but only 2 remain");
}

TEST(PickleLengths, LengthCutOffByTheEndIsRefused) {
  ExpectRefused(std::string("\x80\x02X\x01\x00", 5), "its length runs past the end");
}

TEST(PickleLengths, FixedArgumentCutOffByTheEndIsRefused) {
  ExpectRefused(std::string("\x80\x02G\x00\x00\x00", 6), "its argument runs past the end");
  ExpectRefused(std::string("\x80", 1), "opcode 0x80");
}

TEST(PickleLengths, GlobalWithoutItsSecondLineIsRefused) {
  ExpectRefused("\x80\x02" "c__torch__.m\nLinear", "no terminating newline");
}

TEST(PickleLengths, OffsetOfTheBadOpcodeIsInTheMessage) {
  // Two good strings, then a bad one at byte 15.
  const std::string pickle = std::string("\x80\x02X\x02\x00\x00\x00" "abX\x01\x00\x00\x00" "c", 15) +
                             std::string("X\x09\x00\x00\x00" "ab", 7);
  ExpectRefused(pickle, "at byte 15 (opcode 0x58)");
}

TEST(PickleLengths, MemoIndexBeyondTheRecordIsRefused) {
  // As the fuzz target's second finding: a LONG_BINPUT index in the hundreds of millions,
  // which libtorch answered with a 6 GB memo table.
  ExpectRefused(std::string("\x80\x02N" "r\x02\x00\x58\x16" "N.", 10),
                "memo index 374865922 is beyond what a 10-byte record can number");
  // Memo entries as a pickler numbers them pass, up to the record's size.
  EXPECT_TRUE(Check(std::string("\x80\x02N" "r\x00\x00\x00\x00" "Nr\x01\x00\x00\x00.", 15)).ok());
  EXPECT_TRUE(Check(std::string("N" "r\x07\x00\x00\x00" ".", 7)).ok());
}

TEST(PickleLengths, BytesAfterStopAreNotRead) {
  EXPECT_TRUE(Check(std::string("N.X\xff\xff\xff\xff", 7)).ok());
}

TEST(PickleLengths, UnknownOpcodeStopsTheWalkAndIsLeftToLibtorch) {
  // 0xff is no opcode: the walk cannot know how long its argument is, so it does not guess.
  EXPECT_TRUE(Check(std::string("\x80\x02\xffX\xff\xff\xff\xff", 8)).ok());
}

TEST(PickleLengths, EmptyRecordPasses) { EXPECT_TRUE(Check("").ok()); }

}  // namespace
}  // namespace ltserve::torchscript
