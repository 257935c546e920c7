#pragma once
// Token sampling from one row of logits: greedy, temperature, top-k, top-p (nucleus).
//
// Seeded per request AND per token: the uniform draw for a request's n-th output token
// is a hash of (seed, request id, n), so a request preempted and recomputed, or batched
// differently, samples exactly the same tokens.
#include <cstdint>
#include <span>
#include <vector>

namespace servelab {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy (argmax; ties to the lowest token id)
  int32_t top_k = 0;         // keep the k most likely tokens; 0 = all
  float top_p = 1.0f;        // keep the smallest set whose probability reaches p; 1 = all
  uint64_t seed = 0;
};

// A uniform in [0, 1) determined by (seed, request_id, token_index) alone.
double SamplingUniform(uint64_t seed, int64_t request_id, int32_t token_index);

class Sampler {
 public:
  // REQUIRES: !logits.empty(); logits are finite or -inf (masked).
  int32_t Sample(std::span<const float> logits, const SamplingParams& params, int64_t request_id,
                 int32_t token_index);

 private:
  std::vector<std::pair<float, int32_t>> candidates_;  // reused: no allocation per token
  std::vector<double> probs_;
};

}  // namespace servelab
