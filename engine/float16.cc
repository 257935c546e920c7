#include "engine/float16.h"

namespace servelab {

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa x 2^-24, exact in float32 (mantissa < 2^10).
    const float magnitude = static_cast<float>(mantissa) * 0x1.0p-24f;
    return std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) | sign);
  }
  if (exponent == 0x1f) {
    // Infinity (mantissa 0) or NaN: the payload moves to the top of float32's mantissa.
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  return std::bit_cast<float>(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
}

uint16_t FloatToHalf(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // infinity or NaN
    if (magnitude == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  // 65520 is halfway between 65504 (the largest half, odd mantissa) and 2^16: ties go up.
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;
  if (magnitude >= 0x38800000u) {  // >= 2^-14: a normal half
    const uint32_t exponent = (magnitude >> 23) - (127 - 15);
    const uint32_t mantissa = magnitude & 0x7fffffu;
    uint32_t half = (exponent << 10) | (mantissa >> 13);
    const uint32_t rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // carries into exponent
    return static_cast<uint16_t>(sign | half);
  }
  // 2^-25 is halfway between 0 and the smallest subnormal 2^-24: ties to even (zero).
  if (magnitude <= 0x33000000u) return sign;
  // Subnormal half: round(value x 2^24). value = m x 2^(e - 150) with the implicit bit
  // in m, so value x 2^24 = m >> (126 - e); e in [102, 112] gives shifts in [14, 24].
  const uint32_t e = magnitude >> 23;
  const uint32_t m = (magnitude & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;
  uint32_t half = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u))) ++half;  // may become 2^-14
  return static_cast<uint16_t>(sign | half);
}

uint16_t FloatToBf16(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);  // overflow lands on infinity
  return static_cast<uint16_t>(rounded >> 16);
}

}  // namespace servelab
