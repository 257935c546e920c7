#pragma once
// The gated MLP activation (SwiGLU): out = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
#include <cstdint>

namespace servelab::kernels::cpu {

//   out:   [num_tokens, d], f32, written
//   input: [num_tokens, 2 * d], f32: each row is gate[d] then up[d] (the packed
//          gate_up projection's layout)
void SiluAndMul(float* out, const float* input, int32_t num_tokens, int32_t d);

}  // namespace servelab::kernels::cpu
