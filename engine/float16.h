#pragma once
// IEEE 754 binary16 (F16) and bfloat16 (BF16) <-> float32, bit-exact and portable.
//
// Decoding is exact for every pattern: F16 subnormals, infinities and NaNs (sign and
// payload kept) all have float32 images. Encoding rounds to nearest, ties to even, as
// PyTorch's .half() / .bfloat16() do; F16 overflows to infinity from 65520 up, NaN stays
// NaN (quiet).
#include <bit>
#include <cstdint>

namespace servelab {

float HalfToFloat(uint16_t bits);
uint16_t FloatToHalf(float value);

inline float Bf16ToFloat(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}
uint16_t FloatToBf16(float value);

}  // namespace servelab
