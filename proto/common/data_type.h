// Tensor element types as the protocol names them ("FP32", "BF16", ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ltserve {

enum class DataType : std::uint8_t {
  kInvalid,
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kFp32,
  kFp64,
  kBf16,
};

// Bytes per element; 0 for kInvalid.
std::size_t ElementSize(DataType type);
// KServe v2 name: "FP32"; "INVALID" for kInvalid.
std::string_view WireName(DataType type);
// Inverse of WireName; kInvalid for an unknown name.
DataType DataTypeFromWireName(std::string_view name);

}  // namespace ltserve
