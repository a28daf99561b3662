// Small bridges between ltserve's plain types and ATen's, shared by the libtorch-backed targets
// (server/torch, server/cpu). Includes ATen: never include this next to spdlog, gRPC or protobuf.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "common/data_type.h"

namespace ltserve::aten {

// The ATen element type of a wire type; nullopt for types ATen has no equivalent of.
inline std::optional<at::ScalarType> ToScalarType(DataType type) {
  switch (type) {
    case DataType::kBool: return at::kBool;
    case DataType::kUint8: return at::kByte;
    case DataType::kUint16: return at::kUInt16;
    case DataType::kUint32: return at::kUInt32;
    case DataType::kUint64: return at::kUInt64;
    case DataType::kInt8: return at::kChar;
    case DataType::kInt16: return at::kShort;
    case DataType::kInt32: return at::kInt;
    case DataType::kInt64: return at::kLong;
    case DataType::kFp16: return at::kHalf;
    case DataType::kFp32: return at::kFloat;
    case DataType::kFp64: return at::kDouble;
    case DataType::kBf16: return at::kBFloat16;
    case DataType::kInvalid: break;
  }
  return std::nullopt;
}

// c10::Error's what() carries a C++ backtrace, which is noise in a message that reaches users.
inline std::string ExceptionMessage(const std::exception& error) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    return c10_error->what_without_backtrace();
  }
  return error.what();
}

// Elements per sample of configured dims (batch excluded).
inline std::int64_t ElementCount(const std::vector<std::int64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), std::int64_t{1}, std::multiplies<>());
}

// "[3, 37]" for messages.
inline std::string DimsToString(const std::vector<std::int64_t>& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(dims[i]);
  }
  return text + "]";
}

}  // namespace ltserve::aten
