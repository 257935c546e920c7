#include "kernels/silu_and_mul.h"

#include <cmath>

#include "kernels/kernel_check.h"

namespace servelab::kernels::cpu {

void SiluAndMul(float* out, const float* input, int32_t num_tokens, int32_t d) {
  SERVELAB_KERNEL_CHECK(num_tokens >= 0 && d > 0);
  for (int32_t t = 0; t < num_tokens; ++t) {
    const float* gate = input + int64_t{t} * 2 * d;  // [d]
    const float* up = gate + d;                      // [d]
    float* row = out + int64_t{t} * d;               // [d]
    for (int32_t j = 0; j < d; ++j) {
      const float g = gate[j];
      row[j] = g / (1.0f + std::exp(-g)) * up[j];
    }
  }
}

}  // namespace servelab::kernels::cpu
