#include "kernels/moe_routing.h"

#include <cmath>

#include "kernels/kernel_check.h"

namespace servelab::kernels::cpu {

void TopKSoftmaxRouting(int32_t* expert_ids, float* weights, const float* logits,
                        int32_t num_tokens, int32_t num_experts, int32_t k, bool renormalize) {
  SERVELAB_KERNEL_CHECK(num_tokens >= 0 && k >= 1 && k <= num_experts);
  for (int32_t t = 0; t < num_tokens; ++t) {
    const float* row = logits + int64_t{t} * num_experts;
    int32_t* ids = expert_ids + int64_t{t} * k;
    float* w = weights + int64_t{t} * k;
    float max_logit = row[0];
    for (int32_t e = 1; e < num_experts; ++e) max_logit = std::fmax(max_logit, row[e]);
    float sum = 0;
    for (int32_t e = 0; e < num_experts; ++e) sum += std::exp(row[e] - max_logit);
    // Selection by insertion into the k kept so far: k is small (2 to 8 in served models).
    int32_t kept = 0;
    for (int32_t e = 0; e < num_experts; ++e) {
      if (kept == k && !(row[e] > row[ids[k - 1]])) continue;  // ties keep the lower id
      int32_t at = kept < k ? kept++ : k - 1;
      while (at > 0 && row[e] > row[ids[at - 1]]) {
        ids[at] = ids[at - 1];
        --at;
      }
      ids[at] = e;
    }
    float chosen = 0;
    for (int32_t j = 0; j < k; ++j) {
      w[j] = std::exp(row[ids[j]] - max_logit) / sum;
      chosen += w[j];
    }
    if (renormalize) {
      for (int32_t j = 0; j < k; ++j) w[j] /= chosen;
    }
  }
}

void GroupSlotsByExpert(int32_t* offsets, int32_t* slots, const int32_t* expert_ids,
                        int32_t num_tokens, int32_t num_experts, int32_t k) {
  SERVELAB_KERNEL_CHECK(num_tokens >= 0 && num_experts >= 1 && k >= 1);
  const int64_t n = int64_t{num_tokens} * k;
  for (int32_t e = 0; e <= num_experts; ++e) offsets[e] = 0;
  for (int64_t s = 0; s < n; ++s) {
    SERVELAB_KERNEL_CHECK(expert_ids[s] >= 0 && expert_ids[s] < num_experts);
    ++offsets[expert_ids[s] + 1];
  }
  for (int32_t e = 0; e < num_experts; ++e) offsets[e + 1] += offsets[e];
  // Fill with a moving cursor per expert; offsets[e] ends where offsets[e + 1] began,
  // so a shift afterwards restores the starts.
  for (int64_t s = 0; s < n; ++s) slots[offsets[expert_ids[s]]++] = static_cast<int32_t>(s);
  for (int32_t e = num_experts; e > 0; --e) offsets[e] = offsets[e - 1];
  offsets[0] = 0;
}

}  // namespace servelab::kernels::cpu
