#include "torch/pickle_lengths.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace ltserve::torchscript {
namespace {

// How an opcode's argument is laid out in the stream.
enum class Argument : std::uint8_t {
  kUnknown,    // not a pickle opcode: the walk stops and libtorch decides
  kNone,       // no argument
  kFixed,      // `bytes` bytes
  kLine,       // up to and including a newline
  kTwoLines,   // two newline-terminated lines (GLOBAL, INST)
  kCounted,    // a little-endian count of `bytes` bytes, then that many bytes
  kFrameSize,  // FRAME: an 8-byte size of the frame that follows (checked, not skipped)
};

struct OpcodeArgument {
  Argument kind = Argument::kUnknown;
  std::uint8_t bytes = 0;
};

// The pickle protocol's opcodes (CPython's Lib/pickletools.py lists the same table).
constexpr OpcodeArgument ArgumentOf(std::uint8_t opcode) {
  switch (opcode) {
    // No argument.
    case '(': case '.': case '0': case '1': case '2': case 'N': case 'Q': case 'R': case 'a':
    case 'b': case 'd': case '}': case 'e': case 'l': case ']': case 'o': case 's': case 't':
    case ')': case 'u': case 0x81: case 0x85: case 0x86: case 0x87: case 0x88: case 0x89:
    case 0x8f: case 0x90: case 0x91: case 0x92: case 0x93: case 0x94: case 0x97: case 0x98:
      return {Argument::kNone, 0};
    // Fixed-size arguments.
    case 'K': case 'h': case 'q': case 0x80: case 0x82:  // BININT1 BINGET BINPUT PROTO EXT1
      return {Argument::kFixed, 1};
    case 'M': case 0x83:  // BININT2 EXT2
      return {Argument::kFixed, 2};
    case 'J': case 'j': case 'r': case 0x84:  // BININT LONG_BINGET LONG_BINPUT EXT4
      return {Argument::kFixed, 4};
    case 'G':  // BINFLOAT
      return {Argument::kFixed, 8};
    // Newline-terminated text.
    case 'F': case 'I': case 'L': case 'P': case 'S': case 'V': case 'g': case 'p':
      return {Argument::kLine, 0};
    case 'c': case 'i':  // GLOBAL INST
      return {Argument::kTwoLines, 0};
    // A count, then that many bytes.
    case 'U': case 'C': case 0x8c: case 0x8a:  // SHORT_BINSTRING SHORT_BINBYTES SHORT_BINUNICODE LONG1
      return {Argument::kCounted, 1};
    case 'T': case 'B': case 'X': case 0x8b:  // BINSTRING BINBYTES BINUNICODE LONG4
      return {Argument::kCounted, 4};
    case 0x8d: case 0x8e: case 0x96:  // BINUNICODE8 BINBYTES8 BYTEARRAY8
      return {Argument::kCounted, 8};
    case 0x95:  // FRAME
      return {Argument::kFrameSize, 8};
    default:
      return {};
  }
}

std::uint64_t LittleEndian(const std::uint8_t* bytes, int count) {
  std::uint64_t value = 0;
  for (int i = count - 1; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

Status Refuse(std::string_view record, std::size_t offset, std::uint8_t opcode,
              const std::string& what) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", opcode);
  return InvalidArgument("pickle '" + std::string(record) + "' is malformed at byte " +
                         std::to_string(offset) + " (opcode " + hex + "): " + what);
}

}  // namespace

Status CheckPickleLengths(std::string_view record, const std::uint8_t* pickle, std::size_t size) {
  std::size_t at = 0;
  while (at < size) {
    const std::size_t opcode_at = at;
    const std::uint8_t opcode = pickle[at++];
    const OpcodeArgument argument = ArgumentOf(opcode);
    const std::size_t left = size - at;
    switch (argument.kind) {
      case Argument::kUnknown:
        return Status::Ok();
      case Argument::kNone:
        if (opcode == '.') return Status::Ok();  // STOP: what follows is not read
        break;
      case Argument::kFixed:
        if (left < argument.bytes) {
          return Refuse(record, opcode_at, opcode, "its argument runs past the end");
        }
        if (opcode == 'r') {
          // LONG_BINPUT: libtorch sizes its memo table to the index + 1. A pickler numbers its
          // memo entries from 0, one per PUT of at least two bytes, so an index beyond the
          // record's size is no pickler's.
          const std::uint64_t index = LittleEndian(pickle + at, 4);
          if (index > size) {
            return Refuse(record, opcode_at, opcode,
                          "memo index " + std::to_string(index) + " is beyond what a " +
                              std::to_string(size) + "-byte record can number");
          }
        }
        at += argument.bytes;
        break;
      case Argument::kLine:
      case Argument::kTwoLines: {
        for (int line = 0; line < (argument.kind == Argument::kLine ? 1 : 2); ++line) {
          const void* newline = std::memchr(pickle + at, '\n', size - at);
          if (newline == nullptr) {
            return Refuse(record, opcode_at, opcode, "its text has no terminating newline");
          }
          at = static_cast<const std::uint8_t*>(newline) - pickle + 1;
        }
        break;
      }
      case Argument::kCounted:
      case Argument::kFrameSize: {
        if (left < argument.bytes) {
          return Refuse(record, opcode_at, opcode, "its length runs past the end");
        }
        const std::uint64_t length = LittleEndian(pickle + at, argument.bytes);
        at += argument.bytes;
        if (length > size - at) {
          return Refuse(record, opcode_at, opcode,
                        "it declares " + std::to_string(length) + " bytes but only " +
                            std::to_string(size - at) + " remain in the record");
        }
        if (argument.kind == Argument::kCounted) at += static_cast<std::size_t>(length);
        break;
      }
    }
  }
  return Status::Ok();
}

}  // namespace ltserve::torchscript
