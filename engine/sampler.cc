#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "core/status.h"

namespace servelab {

double SamplingUniform(uint64_t seed, int64_t request_id, int32_t token_index) {
  uint64_t state = DeriveSeed(seed, static_cast<uint64_t>(request_id));
  state ^= static_cast<uint64_t>(token_index) * 0x9E3779B97F4A7C15ull;
  const uint64_t bits = SplitMix64(state);
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

int32_t Sampler::Sample(std::span<const float> logits, const SamplingParams& params,
                        int64_t request_id, int32_t token_index) {
  SERVELAB_CHECK(!logits.empty());
  if (params.temperature <= 0.0f) {
    // First maximum: ties go to the lowest id, so greedy is deterministic.
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  const auto vocab = static_cast<int32_t>(logits.size());
  candidates_.clear();
  for (int32_t i = 0; i < vocab; ++i) candidates_.emplace_back(logits[i], i);
  // Most likely first; equal logits by id, so the order is total and deterministic.
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  size_t keep = candidates_.size();
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < keep) {
    keep = static_cast<size_t>(params.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep),
                      candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  // Softmax at the temperature over the kept candidates, in double.
  const double max_logit = candidates_[0].first;
  std::vector<double>& probs = probs_;
  probs.resize(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp((candidates_[i].first - max_logit) / params.temperature);
    total += probs[i];
  }
  if (params.top_p < 1.0f) {
    double cumulative = 0;
    size_t cut = keep;
    for (size_t i = 0; i < keep; ++i) {
      cumulative += probs[i] / total;
      if (cumulative >= params.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    total = 0;
    for (size_t i = 0; i < keep; ++i) total += probs[i];
  }
  const double u = SamplingUniform(params.seed, request_id, token_index) * total;
  double cumulative = 0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += probs[i];
    if (u < cumulative) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

}  // namespace servelab
