#include "common/data_type.h"

#include <array>
#include <utility>

namespace ltserve {
namespace {

struct TypeInfo {
  DataType type;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<TypeInfo, 13> kTypes{{
    {DataType::kBool, "BOOL", 1},
    {DataType::kUint8, "UINT8", 1},
    {DataType::kUint16, "UINT16", 2},
    {DataType::kUint32, "UINT32", 4},
    {DataType::kUint64, "UINT64", 8},
    {DataType::kInt8, "INT8", 1},
    {DataType::kInt16, "INT16", 2},
    {DataType::kInt32, "INT32", 4},
    {DataType::kInt64, "INT64", 8},
    {DataType::kFp16, "FP16", 2},
    {DataType::kFp32, "FP32", 4},
    {DataType::kFp64, "FP64", 8},
    {DataType::kBf16, "BF16", 2},
}};

}  // namespace

std::size_t ElementSize(DataType type) {
  for (const auto& info : kTypes) {
    if (info.type == type) return info.size;
  }
  return 0;
}

std::string_view WireName(DataType type) {
  for (const auto& info : kTypes) {
    if (info.type == type) return info.name;
  }
  return "INVALID";
}

DataType DataTypeFromWireName(std::string_view name) {
  for (const auto& info : kTypes) {
    if (info.name == name) return info.type;
  }
  return DataType::kInvalid;
}

}  // namespace ltserve
