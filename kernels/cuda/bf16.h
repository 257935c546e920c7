#pragma once
// Host-side f32 <-> bf16 conversion for tests and loaders (round to nearest even; NaN stays
// NaN). Plain host code: no device needed.
#include <cuda_bf16.h>

#include <cstddef>
#include <vector>

namespace servelab::kernels::cuda {

void F32ToBf16(__nv_bfloat16* out, const float* in, size_t n);
void Bf16ToF32(float* out, const __nv_bfloat16* in, size_t n);

std::vector<__nv_bfloat16> ToBf16(const std::vector<float>& in);
std::vector<float> ToF32(const std::vector<__nv_bfloat16>& in);
// Each value rounded through bf16 and back: the f32 inputs a CPU twin should see.
std::vector<float> RoundToBf16(const std::vector<float>& in);

}  // namespace servelab::kernels::cuda
