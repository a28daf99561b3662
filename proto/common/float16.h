// Host-side conversions between fp32 and the two 16-bit float formats, for request decoding,
// the CPU executor's mixed-precision I/O and tests. Round-to-nearest-even, NaN preserved.
#pragma once

#include <cstdint>
#include <cstring>

namespace ltserve {

inline std::uint16_t FloatToBf16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  }
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

inline float Bf16ToFloat(std::uint16_t value) {
  const std::uint32_t bits = static_cast<std::uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// IEEE binary16. _Float16 is native in gcc 12 on x86-64 and does the rounding for us.
inline std::uint16_t FloatToFp16(float value) {
  const _Float16 half = static_cast<_Float16>(value);
  std::uint16_t bits;
  std::memcpy(&bits, &half, sizeof(bits));
  return bits;
}

inline float Fp16ToFloat(std::uint16_t value) {
  _Float16 half;
  std::memcpy(&half, &value, sizeof(half));
  return static_cast<float>(half);
}

}  // namespace ltserve
