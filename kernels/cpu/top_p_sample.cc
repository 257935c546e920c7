#include "kernels/top_p_sample.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernel_check.h"

namespace servelab::kernels::cpu {
namespace {

// One row's scratch, reused across rows: keys and weights by token id, ids by rank.
struct RowScratch {
  std::vector<uint32_t> keys;
  std::vector<uint64_t> weights;
  std::vector<int32_t> by_rank;
};

// Sum of the weights of the prefix {key >= lambda}.
uint64_t PrefixMass(const RowScratch& s, uint32_t lambda) {
  uint64_t mass = 0;
  for (size_t i = 0; i < s.keys.size(); ++i) {
    if (s.keys[i] >= lambda) mass += s.weights[i];
  }
  return mass;
}

int32_t SampleRow(const float* logits, float temperature, int32_t top_k, float top_p, double u,
                  int32_t vocab, RowScratch& s) {
  float max_logit = -INFINITY;
  for (int32_t i = 0; i < vocab; ++i) {
    SERVELAB_KERNEL_CHECK_MSG(!std::isnan(logits[i]), "logit %d is NaN", i);
    max_logit = std::max(max_logit, logits[i]);
  }
  SERVELAB_KERNEL_CHECK_MSG(std::isfinite(max_logit), "max logit %g", max_logit);
  s.keys.resize(vocab);
  s.weights.resize(vocab);
  s.by_rank.resize(vocab);
  for (int32_t i = 0; i < vocab; ++i) {
    s.keys[i] = TopPOrderKey(logits[i]);
    s.weights[i] = TopPWeight(logits[i], max_logit, temperature);
    s.by_rank[i] = i;
  }
  // Most likely first. Order within a tie group is irrelevant: only group keys are used.
  std::sort(s.by_rank.begin(), s.by_rank.end(),
            [&](int32_t a, int32_t b) { return s.keys[a] > s.keys[b]; });

  // Top-k: every token at or above the top_k-th largest logit (ties at the threshold kept).
  const bool top_k_cuts = top_k > 0 && top_k < vocab;
  uint32_t lambda = s.keys[s.by_rank[top_k_cuts ? top_k - 1 : vocab - 1]];

  // Top-p: the first rank whose running mass reaches the target closes the set; its whole
  // tie group is in, since the prefix is {key >= its key}. The running mass reaches M_k
  // within K_k, so the walk never leaves it.
  if (top_p < 1.0f) {
    const uint64_t target = TopPTargetMass(top_p, PrefixMass(s, lambda));
    uint64_t running = 0;
    for (const int32_t i : s.by_rank) {
      running += s.weights[i];
      if (running >= target) {
        lambda = s.keys[i];
        break;
      }
    }
  }

  // Inverse CDF in id order over the kept set.
  const uint64_t draw = TopPDrawPoint(u, PrefixMass(s, lambda));
  uint64_t running = 0;
  for (int32_t i = 0; i < vocab; ++i) {
    if (s.keys[i] < lambda) continue;
    running += s.weights[i];
    if (running > draw) return i;
  }
  SERVELAB_KERNEL_CHECK_MSG(false, "draw %llu beyond the kept mass %llu",
                            static_cast<unsigned long long>(draw),
                            static_cast<unsigned long long>(running));
  return 0;
}

}  // namespace

void TopPSample(int32_t* token_ids, const float* logits, const float* temperatures,
                const int32_t* top_ks, const float* top_ps, const double* uniforms,
                int32_t num_rows, int32_t vocab_size) {
  SERVELAB_KERNEL_CHECK(num_rows >= 0 && vocab_size > 0 && vocab_size <= kTopPMaxVocab);
  RowScratch scratch;
  for (int32_t t = 0; t < num_rows; ++t) {
    const float temperature = temperatures[t], top_p = top_ps[t];
    const double u = uniforms[t];
    SERVELAB_KERNEL_CHECK_MSG(std::isfinite(temperature) && temperature > 0.0f,
                              "row %d temperature %g", t, temperature);
    SERVELAB_KERNEL_CHECK_MSG(top_p > 0.0f && top_p <= 1.0f, "row %d top_p %g", t, top_p);
    SERVELAB_KERNEL_CHECK_MSG(top_ks[t] >= 0, "row %d top_k %d", t, top_ks[t]);
    SERVELAB_KERNEL_CHECK_MSG(u >= 0.0 && u < 1.0, "row %d uniform %g", t, u);
    token_ids[t] = SampleRow(logits + int64_t{t} * vocab_size, temperature, top_ks[t], top_p, u,
                             vocab_size, scratch);
  }
}

}  // namespace servelab::kernels::cpu
