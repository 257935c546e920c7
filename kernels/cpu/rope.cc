#include "kernels/rope.h"

#include <cmath>
#include <numbers>

#include "kernels/kernel_check.h"

namespace servelab::kernels {

std::vector<float> RopeInvFreq(int32_t head_dim, double rope_theta,
                               const std::optional<Llama3RopeScaling>& llama3) {
  SERVELAB_KERNEL_CHECK(head_dim > 0 && head_dim % 2 == 0);
  SERVELAB_KERNEL_CHECK(rope_theta > 0.0);
  if (llama3) {
    SERVELAB_KERNEL_CHECK(llama3->factor > 0.0);
    SERVELAB_KERNEL_CHECK(llama3->low_freq_factor > 0.0);
    SERVELAB_KERNEL_CHECK(llama3->high_freq_factor > llama3->low_freq_factor);
    SERVELAB_KERNEL_CHECK(llama3->original_max_position_embeddings > 0);
  }
  const int32_t half = head_dim / 2;
  std::vector<float> inv_freq(half);
  for (int32_t i = 0; i < half; ++i) {
    double freq = 1.0 / std::pow(rope_theta, 2.0 * i / head_dim);
    if (llama3) {
      const double original_len = llama3->original_max_position_embeddings;
      const double wavelen = 2.0 * std::numbers::pi / freq;
      const double short_wavelen = original_len / llama3->high_freq_factor;  // kept as is
      const double long_wavelen = original_len / llama3->low_freq_factor;    // fully scaled
      if (wavelen > long_wavelen) {
        freq /= llama3->factor;
      } else if (wavelen >= short_wavelen) {
        // 0 at long_wavelen, 1 at short_wavelen.
        const double smooth = (original_len / wavelen - llama3->low_freq_factor) /
                              (llama3->high_freq_factor - llama3->low_freq_factor);
        freq = (1.0 - smooth) * freq / llama3->factor + smooth * freq;
      }
    }
    inv_freq[i] = static_cast<float>(freq);
  }
  return inv_freq;
}

}  // namespace servelab::kernels

namespace servelab::kernels::cpu {
namespace {

// Rotates the pairs (i, i + half) of one head by the angles whose cos/sin are given.
void RotateHead(float* x, const float* cos, const float* sin, int32_t half) {
  for (int32_t i = 0; i < half; ++i) {
    const float x0 = x[i];
    const float x1 = x[i + half];
    x[i] = x0 * cos[i] - x1 * sin[i];
    x[i + half] = x1 * cos[i] + x0 * sin[i];
  }
}

}  // namespace

void ApplyRope(float* q, float* k, const int32_t* positions, const float* inv_freq,
               int32_t num_tokens, int32_t num_heads, int32_t num_kv_heads, int32_t head_dim) {
  SERVELAB_KERNEL_CHECK(num_tokens >= 0 && num_heads > 0 && num_kv_heads > 0);
  SERVELAB_KERNEL_CHECK(head_dim > 0 && head_dim % 2 == 0);
  const int32_t half = head_dim / 2;
  std::vector<float> cos(half), sin(half);  // [half], this token's angles
  for (int32_t t = 0; t < num_tokens; ++t) {
    const int32_t pos = positions[t];
    SERVELAB_KERNEL_CHECK_MSG(pos >= 0, "token %d: position %d", t, pos);
    for (int32_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos) * static_cast<double>(inv_freq[i]);
      cos[i] = static_cast<float>(std::cos(angle));
      sin[i] = static_cast<float>(std::sin(angle));
    }
    float* q_row = q + int64_t{t} * num_heads * head_dim;
    for (int32_t h = 0; h < num_heads; ++h) {
      RotateHead(q_row + h * head_dim, cos.data(), sin.data(), half);
    }
    float* k_row = k + int64_t{t} * num_kv_heads * head_dim;
    for (int32_t h = 0; h < num_kv_heads; ++h) {
      RotateHead(k_row + h * head_dim, cos.data(), sin.data(), half);
    }
  }
}

}  // namespace servelab::kernels::cpu
