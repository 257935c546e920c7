#pragma once
// Rotary position embedding, Llama / GPT-NeoX "rotate_half" style: within each head, dims
// i and i + head_dim/2 form one pair rotated by angle position * inv_freq[i]:
//   x'[i]            = x[i] * cos - x[i + head_dim/2] * sin
//   x'[i + head_dim/2] = x[i + head_dim/2] * cos + x[i] * sin
// inv_freq is computed once per model on the host (RopeInvFreq) and handed to the kernel.
#include <cstdint>
#include <optional>
#include <vector>

namespace servelab::kernels {

// config.json "rope_scaling" with rope_type "llama3" (Llama 3.1+). Wavelengths
// (2*pi / inv_freq) shorter than original_max_position_embeddings / high_freq_factor keep
// their frequency; longer than original_max_position_embeddings / low_freq_factor are
// divided by factor; in between, the frequency interpolates linearly in
// original_max_position_embeddings / wavelength between the two.
struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int32_t original_max_position_embeddings = 8192;
};

// inv_freq[i] = rope_theta^(-2i / head_dim) for i in [0, head_dim/2), then the llama3
// adjustment when `llama3` is given. Computed in f64, returned as f32 (the kernels' dtype).
// REQUIRES: head_dim even and > 0; rope_theta > 0; for llama3: factor > 0,
// high_freq_factor > low_freq_factor > 0, original_max_position_embeddings > 0 (CHECKed).
std::vector<float> RopeInvFreq(int32_t head_dim, double rope_theta,
                               const std::optional<Llama3RopeScaling>& llama3 = std::nullopt);

}  // namespace servelab::kernels

namespace servelab::kernels::cpu {

// Rotates q and k in place at each token's position.
//   q:         [num_tokens, num_heads, head_dim], f32, read and written
//   k:         [num_tokens, num_kv_heads, head_dim], f32, read and written
//   positions: [num_tokens], int32, >= 0 (position in the sequence, not in the batch)
//   inv_freq:  [head_dim / 2], f32, from RopeInvFreq
// The CPU twin evaluates angles and their cos/sin in f64 (exact reference); the rotation
// itself is f32.
void ApplyRope(float* q, float* k, const int32_t* positions, const float* inv_freq,
               int32_t num_tokens, int32_t num_heads, int32_t num_kv_heads, int32_t head_dim);

}  // namespace servelab::kernels::cpu
