#include "kernels/cuda/bf16.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace servelab::kernels::cuda {
namespace {

// Bit-level conversion so the result does not depend on which host intrinsics the header
// provides: round to nearest even on the upper 16 bits; NaN kept quiet.
__nv_bfloat16 FromFloat(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  uint16_t out;
  if (std::isnan(f)) {
    out = static_cast<uint16_t>((bits >> 16) | 0x0040u);
  } else {
    const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
    out = static_cast<uint16_t>((bits + rounding) >> 16);
  }
  __nv_bfloat16_raw raw;
  raw.x = out;
  return __nv_bfloat16(raw);
}

float ToFloat(__nv_bfloat16 b) {
  const __nv_bfloat16_raw raw(b);
  const uint32_t bits = uint32_t{raw.x} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

void F32ToBf16(__nv_bfloat16* out, const float* in, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = FromFloat(in[i]);
}

void Bf16ToF32(float* out, const __nv_bfloat16* in, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = ToFloat(in[i]);
}

std::vector<__nv_bfloat16> ToBf16(const std::vector<float>& in) {
  std::vector<__nv_bfloat16> out(in.size());
  F32ToBf16(out.data(), in.data(), in.size());
  return out;
}

std::vector<float> ToF32(const std::vector<__nv_bfloat16>& in) {
  std::vector<float> out(in.size());
  Bf16ToF32(out.data(), in.data(), in.size());
  return out;
}

std::vector<float> RoundToBf16(const std::vector<float>& in) { return ToF32(ToBf16(in)); }

}  // namespace servelab::kernels::cuda
