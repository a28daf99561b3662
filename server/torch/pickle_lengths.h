// A pre-check of the pickles inside a TorchScript archive (data.pkl, constants.pkl, the
// debug_pkl source maps) before libtorch reads them.
//
// Why: libtorch's Unpickler takes a string's or a byte array's length from the pickle and
// allocates it before reading a single byte, without comparing it with what the record holds.
// A model file of 3 KB whose BINUNICODE length reads 4,160,749,576 made the loader touch 4 GB
// (the loader fuzz target found it). A length longer than the rest of its record cannot be
// valid, so the loader refuses it here, with the record and the offset in the message.
//
// Pure C++, no torch types: the walk follows the pickle protocol's opcode table (protocols 0-5).
// It stops at STOP and at an opcode it does not know, leaving those to libtorch, which refuses
// what it cannot read; it never refuses a pickle that libtorch would read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace ltserve::torchscript {

// OK when every length-prefixed argument (strings, bytes, LONG1/LONG4, FRAME) fits in what is
// left of `pickle`, no argument runs past its end, and no LONG_BINPUT memo index exceeds the
// record's size (libtorch sizes its memo table to the index: a second finding of the fuzz
// target, a 6 GB table). `record` names the pickle in the error.
Status CheckPickleLengths(std::string_view record, const std::uint8_t* pickle, std::size_t size);

}  // namespace ltserve::torchscript
