#include "sim/after_prefill.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace servelab {

double AfterPrefill::SlowdownAt(int64_t seqs) const {
  if (batches.empty()) return 0;
  if (seqs <= batches.front()) return slowdown.front();
  if (seqs >= batches.back()) return slowdown.back();
  const size_t hi = static_cast<size_t>(std::upper_bound(batches.begin(), batches.end(), seqs) - batches.begin());
  const size_t lo = hi - 1;
  const double t = std::log(static_cast<double>(seqs) / static_cast<double>(batches[lo])) /
                   std::log(static_cast<double>(batches[hi]) / static_cast<double>(batches[lo]));
  return slowdown[lo] + t * (slowdown[hi] - slowdown[lo]);
}

double AfterPrefill::Factor(int32_t steps_since_prefill, int64_t seqs) const {
  if (steps_since_prefill <= 0) return 1;
  const double s = SlowdownAt(seqs);
  if (s <= 0) return 1;
  return 1 + s * std::exp(-static_cast<double>(steps_since_prefill - 1) / decay_steps);
}

std::string AfterPrefill::Said() const {
  std::string said;
  for (size_t i = 0; i < batches.size() && i < slowdown.size(); ++i) {
    char at[64];
    std::snprintf(at, sizeof at, "%s%.1f%% at %lld", i > 0 ? ", " : "", 100 * slowdown[i],
                  static_cast<long long>(batches[i]));
    said += at;
  }
  char decay[64];
  std::snprintf(decay, sizeof decay, " sequences, decaying over %.2f steps", decay_steps);
  return said + decay;
}

namespace {

// What makes a step row the same configuration as a kStepAfterPrefill row.
using Configuration = std::tuple<std::string, std::vector<int64_t>, int64_t, int64_t, int64_t, int32_t>;
Configuration ConfigurationOf(const ProfileRow& r) {
  const ModelSpec& m = r.shape;
  // The shape as the servelab layout writes it.
  std::vector<int64_t> shape = {m.hidden_size,       m.num_attention_heads, m.num_key_value_heads,
                                m.HeadDim(),         m.intermediate_size,   m.vocab_size,
                                m.num_hidden_layers, m.num_experts,         m.num_experts_per_tok,
                                m.moe_intermediate_size, m.shared_expert_intermediate_size};
  return {r.device, std::move(shape), r.tokens, r.batch, r.context, r.tp};
}

struct Ratio {
  int64_t batch = 0;
  int32_t k = 0;
  double excess = 0;  // measured / settled - 1
};

}  // namespace

StatusOr<std::optional<AfterPrefill>> FitAfterPrefill(std::span<const ProfileTable> tables) {
  std::vector<Ratio> ratios;
  AfterPrefill fit;
  for (const ProfileTable& table : tables) {
    std::map<Configuration, const ProfileRow*> settled;
    for (const ProfileRow& r : table.rows) {
      if (r.op == "step") settled.emplace(ConfigurationOf(r), &r);
    }
    for (const ProfileRow& r : table.rows) {
      if (r.op != kStepAfterPrefill || !(r.median_ms > 0)) continue;
      const auto it = settled.find(ConfigurationOf(r));
      if (it == settled.end()) {
        return InvalidArgument(table.path + ":" + std::to_string(r.line) + ": a " + kStepAfterPrefill +
                               " row of " + std::to_string(r.batch) + " sequences at context " +
                               std::to_string(r.context) + " and no step row of that decode to compare it with");
      }
      const double excess = r.median_ms / it->second->median_ms - 1;
      if (!std::isfinite(excess) || excess > kMaxAfterPrefillSlowdown) {
        return InvalidArgument(table.path + ":" + std::to_string(r.line) + ": a " + kStepAfterPrefill + " row " +
                               std::to_string(r.median_ms) + " ms against its settled step's " +
                               std::to_string(it->second->median_ms) + " ms (line " +
                               std::to_string(it->second->line) + "): more than " +
                               std::to_string(static_cast<int>(kMaxAfterPrefillSlowdown) + 1) + " times it");
      }
      ratios.push_back(Ratio{r.batch, r.after_prefill, excess});
      fit.prefill_tokens_min = fit.rows == 0 ? r.prefill_before : std::min(fit.prefill_tokens_min, r.prefill_before);
      fit.prefill_tokens_max = std::max(fit.prefill_tokens_max, r.prefill_before);
      ++fit.rows;
    }
  }
  if (ratios.empty()) return std::optional<AfterPrefill>();
  std::set<int32_t> places;
  for (const Ratio& r : ratios) places.insert(r.k);
  if (places.size() < 3) {
    return InvalidArgument(std::to_string(ratios.size()) + " " + kStepAfterPrefill + " rows at " +
                           std::to_string(places.size()) + " distinct places after the chunk: too few to tell "
                           "a slowdown from its decay (at least 3 places: profile --after-prefill-steps 3 or more)");
  }
  std::vector<int64_t> batches;
  for (const Ratio& r : ratios) batches.push_back(r.batch);
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  if (batches.size() > kMaxAfterPrefillBatches) {
    return InvalidArgument(std::string(kStepAfterPrefill) + " rows at " + std::to_string(batches.size()) +
                           " batch sizes, more than " + std::to_string(kMaxAfterPrefillBatches));
  }
  const auto index_of = [&](int64_t batch) {
    return static_cast<size_t>(std::lower_bound(batches.begin(), batches.end(), batch) - batches.begin());
  };
  // The decay on a log grid; for each, each batch size's least-squares slowdown >= 0
  // (closed form).
  double best_sse = std::numeric_limits<double>::infinity();
  constexpr int kGrid = 97;  // 0.25 to 64 steps, 12 points an octave
  std::vector<double> ye(batches.size()), ee(batches.size()), slowdown(batches.size());
  for (int i = 0; i < kGrid; ++i) {
    const double decay = 0.25 * std::exp2(i / 12.0);
    std::fill(ye.begin(), ye.end(), 0.0);
    std::fill(ee.begin(), ee.end(), 0.0);
    for (const Ratio& r : ratios) {
      const double e = std::exp(-(r.k - 1) / decay);
      ye[index_of(r.batch)] += r.excess * e;
      ee[index_of(r.batch)] += e * e;
    }
    for (size_t b = 0; b < batches.size(); ++b) {
      slowdown[b] = std::clamp(ee[b] > 0 ? ye[b] / ee[b] : 0.0, 0.0, kMaxAfterPrefillSlowdown);
    }
    double sse = 0;
    for (const Ratio& r : ratios) {
      const double d = r.excess - slowdown[index_of(r.batch)] * std::exp(-(r.k - 1) / decay);
      sse += d * d;
    }
    if (i == 0 || sse < best_sse) {  // (the ratios are finite: so is every sse)
      best_sse = sse;
      fit.slowdown = slowdown;
      fit.decay_steps = decay;
    }
  }
  fit.batches = batches;
  double abs_sum = 0, sum = 0;
  for (const Ratio& r : ratios) {
    const double rel = fit.Factor(r.k, r.batch) / (1 + r.excess) - 1;
    abs_sum += std::abs(rel);
    sum += rel;
  }
  fit.mape_pct = 100 * abs_sum / static_cast<double>(ratios.size());
  fit.bias_pct = 100 * sum / static_cast<double>(ratios.size());
  return std::optional<AfterPrefill>(fit);
}

}  // namespace servelab
