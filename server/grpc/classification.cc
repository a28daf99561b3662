#include "grpc/classification.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace ltserve {
namespace {

template <typename T>
T Load(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

float HalfToFloat(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: value = mantissa * 2^-24.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  std::uint32_t bits = 0;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf or NaN
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

// The element as a sort key, and its text as Triton writes it (std::to_string of the value:
// integers as integers, floating point with six decimals).
double Key(const std::byte* p, DataType dtype) {
  switch (dtype) {
    case DataType::kUint8: return Load<std::uint8_t>(p);
    case DataType::kUint16: return Load<std::uint16_t>(p);
    case DataType::kUint32: return Load<std::uint32_t>(p);
    case DataType::kUint64: return static_cast<double>(Load<std::uint64_t>(p));
    case DataType::kInt8: return Load<std::int8_t>(p);
    case DataType::kInt16: return Load<std::int16_t>(p);
    case DataType::kInt32: return Load<std::int32_t>(p);
    case DataType::kInt64: return static_cast<double>(Load<std::int64_t>(p));
    case DataType::kFp16: return HalfToFloat(Load<std::uint16_t>(p));
    case DataType::kBf16:
      return std::bit_cast<float>(static_cast<std::uint32_t>(Load<std::uint16_t>(p)) << 16);
    case DataType::kFp32: return Load<float>(p);
    case DataType::kFp64: return Load<double>(p);
    case DataType::kBool:
    case DataType::kInvalid: break;
  }
  return 0;
}

std::string Text(const std::byte* p, DataType dtype) {
  switch (dtype) {
    case DataType::kUint8: return std::to_string(Load<std::uint8_t>(p));
    case DataType::kUint16: return std::to_string(Load<std::uint16_t>(p));
    case DataType::kUint32: return std::to_string(Load<std::uint32_t>(p));
    case DataType::kUint64: return std::to_string(Load<std::uint64_t>(p));
    case DataType::kInt8: return std::to_string(Load<std::int8_t>(p));
    case DataType::kInt16: return std::to_string(Load<std::int16_t>(p));
    case DataType::kInt32: return std::to_string(Load<std::int32_t>(p));
    case DataType::kInt64: return std::to_string(Load<std::int64_t>(p));
    default: return std::to_string(Key(p, dtype));
  }
}

void AppendBytesElement(const std::string& element, std::string* out) {
  const auto length = static_cast<std::uint32_t>(element.size());
  for (int shift = 0; shift < 32; shift += 8) {
    out->push_back(static_cast<char>((length >> shift) & 0xffu));
  }
  out->append(element);
}

}  // namespace

Result<Classification> Classify(std::span<const std::byte> bytes, DataType dtype,
                                const std::vector<std::int64_t>& shape, bool batched,
                                std::uint32_t k, const std::string& output_name,
                                const std::vector<std::string>& labels) {
  if (dtype == DataType::kBool || dtype == DataType::kInvalid) {
    return InvalidArgument("output '" + output_name + "' is " + std::string(WireName(dtype)) +
                           "; classification needs a numeric output");
  }
  const std::int64_t batch = batched && !shape.empty() ? shape[0] : 1;
  const std::int64_t elements =
      std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
  const std::int64_t classes = batch > 0 ? elements / batch : 0;
  if (k == 0 || static_cast<std::int64_t>(k) > classes) {
    return InvalidArgument("output '" + output_name + "' has " + std::to_string(classes) +
                           " classes per batch entry; classification asks for " +
                           std::to_string(k));
  }
  const std::size_t size = ElementSize(dtype);
  if (bytes.size() != static_cast<std::size_t>(elements) * size) {
    return Internal("output '" + output_name + "' has " + std::to_string(bytes.size()) +
                    " bytes for " + std::to_string(elements) + " elements");
  }
  Classification result;
  if (batched) result.shape.push_back(batch);
  result.shape.push_back(k);
  std::vector<std::int64_t> order(static_cast<std::size_t>(classes));
  std::vector<double> keys(static_cast<std::size_t>(classes));
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::byte* row = bytes.data() + static_cast<std::size_t>(b * classes) * size;
    for (std::int64_t c = 0; c < classes; ++c) {
      const double key = Key(row + static_cast<std::size_t>(c) * size, dtype);
      // NaN last, so that the order stays a strict weak ordering.
      keys[static_cast<std::size_t>(c)] =
          std::isnan(key) ? -std::numeric_limits<double>::infinity() : key;
    }
    std::iota(order.begin(), order.end(), std::int64_t{0});
    // Ties go to the lower index, so that the answer does not depend on the sort.
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](std::int64_t x, std::int64_t y) {
                        const double kx = keys[static_cast<std::size_t>(x)];
                        const double ky = keys[static_cast<std::size_t>(y)];
                        return kx > ky || (kx == ky && x < y);
                      });
    for (std::uint32_t i = 0; i < k; ++i) {
      const std::int64_t c = order[i];
      std::string element = Text(row + static_cast<std::size_t>(c) * size, dtype) + ":" +
                            std::to_string(c);
      if (!labels.empty() && static_cast<std::size_t>(c) < labels.size()) {
        element += ":" + labels[static_cast<std::size_t>(c)];
      }
      AppendBytesElement(element, &result.bytes);
    }
  }
  return result;
}

}  // namespace ltserve
