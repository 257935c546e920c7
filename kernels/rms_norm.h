#pragma once
// RMSNorm (Llama): y = x / sqrt(mean(x^2) + eps) * weight, per token, f32 accumulation.
#include <cstdint>

namespace servelab::kernels::cpu {

//   out:    [num_tokens, hidden], f32, written; may be the same array as x (in place)
//   x:      [num_tokens, hidden], f32
//   weight: [hidden], f32
void RmsNorm(float* out, const float* x, const float* weight, int32_t num_tokens, int32_t hidden,
             float eps);

// The residual stream step between sublayers, in place (vLLM's fused_add_rms_norm):
//   residual += x;  x = RmsNorm(residual)
//   x, residual: [num_tokens, hidden], f32, both read and written
//   weight:      [hidden], f32
void FusedAddRmsNorm(float* x, float* residual, const float* weight, int32_t num_tokens,
                     int32_t hidden, float eps);

}  // namespace servelab::kernels::cpu
