// ToFloat32 / FromFloat32: element conversion between stored dtypes and float32.
#include <cstring>

#include "engine/float16.h"
#include "engine/safetensors.h"

namespace servelab {

void ToFloat32(const TensorView& view, std::span<float> out) {
  SERVELAB_CHECK(static_cast<int64_t>(out.size()) == view.NumElements());
  SERVELAB_CHECK(view.bytes == out.size() * ElementBytes(view.dtype));
  if (view.dtype == DType::kFp32) {
    if (!out.empty()) std::memcpy(out.data(), view.data, view.bytes);
    return;
  }
  const bool half = view.dtype == DType::kFp16;
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, view.data + 2 * i, 2);  // data need not be 2-byte aligned
    out[i] = half ? HalfToFloat(bits) : Bf16ToFloat(bits);
  }
}

std::vector<float> ToFloat32(const TensorView& view) {
  std::vector<float> out(static_cast<size_t>(view.NumElements()));
  ToFloat32(view, out);
  return out;
}

void FromFloat32(std::span<const float> values, DType dtype, std::span<std::byte> out) {
  SERVELAB_CHECK(out.size() == values.size() * ElementBytes(dtype));
  if (dtype == DType::kFp32) {
    if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
    return;
  }
  const bool half = dtype == DType::kFp16;
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits = half ? FloatToHalf(values[i]) : FloatToBf16(values[i]);
    std::memcpy(out.data() + 2 * i, &bits, 2);
  }
}

}  // namespace servelab
