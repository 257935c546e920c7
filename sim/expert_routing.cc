#include "sim/expert_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "sim/cost_model.h"

namespace servelab {

double ExpectedExpertsTouched(int32_t experts, int32_t per_token, double tokens) {
  if (experts <= 0 || tokens <= 0) return 0;
  const double e = experts;
  return e * (1.0 - std::pow(1.0 - per_token / e, tokens));
}

RoutingSkew SkewedRouting(int32_t experts, int32_t per_token, double s, int32_t ep) {
  RoutingSkew r;
  std::vector<double> p(static_cast<size_t>(experts));
  double sum = 0;
  for (int32_t i = 0; i < experts; ++i) sum += p[static_cast<size_t>(i)] = std::pow(i + 1.0, -s);
  for (int32_t i = 0; i < experts; ++i) {
    r.pick_probability.push_back(per_token * p[static_cast<size_t>(i)] / sum);
  }
  // A token picks per_token distinct experts: no expert above probability 1, the excess
  // spread over the rest in proportion, so that the probabilities still sum to per_token.
  std::vector<double>& q = r.pick_probability;
  for (int32_t round = 0; round < experts; ++round) {
    double capped = 0, rest = 0;
    for (const double x : q) (x >= 1.0 ? capped : rest) += x >= 1.0 ? 1.0 : x;
    if (std::none_of(q.begin(), q.end(), [](double x) { return x > 1.0; })) break;
    const double scale = rest > 0 ? (per_token - capped) / rest : 0.0;
    for (double& x : q) x = x >= 1.0 ? 1.0 : x * scale;
  }
  std::vector<double> gpu(static_cast<size_t>(std::max(1, ep)), 0.0);
  for (int32_t i = 0; i < experts; ++i) gpu[static_cast<size_t>(i % std::max(1, ep))] += q[static_cast<size_t>(i)];
  r.busiest_gpu_share =
      std::max(1.0, *std::max_element(gpu.begin(), gpu.end()) * static_cast<double>(gpu.size()) / per_token);
  return r;
}

double ExpertImbalance(int32_t ep, double rows) {
  if (ep <= 1 || rows <= 0) return 1.0;
  const double e = ep;
  const double normal = 1.0 + std::sqrt(2.0 * std::log(e) * (1.0 - 1.0 / e) * e / rows);
  const double whole_rows = std::ceil(rows / e) * e / rows;  // the busiest has a whole row
  return std::min(e, std::max(normal, whole_rows));
}

StatusOr<ExpertRoutingOptions> ReadExpertRoutingOptions(ParamReader& params,
                                                        const ExpertRoutingOptions& defaults) {
  ExpertRoutingOptions o = defaults;
  o.expert_imbalance = params.GetDouble("expert_imbalance", o.expert_imbalance, Bounds{0, 64});
  o.routing_skew = params.GetDouble("routing_skew", o.routing_skew, Bounds{0, 4});
  o.routing_locality = params.GetDouble("routing_locality", o.routing_locality, Bounds{0, 1});
  o.routing_favourites = params.GetDouble("routing_favourites", o.routing_favourites, Bounds{1, 1024});
  if (o.expert_imbalance > 0 && o.expert_imbalance < 1) {
    return InvalidArgument(params.Where("expert_imbalance") +
                           ": the busiest GPU carries at least the mean load: 0 "
                           "(derived from uniform routing) or >= 1");
  }
  // A locality given alone would route with favourites it did not choose (1, or a
  // MODEL.yaml's); and before the favourites form it meant n^(1 - locality) draws.
  if (params.Error().ok() && params.Has("routing_locality") && o.routing_locality > 0 &&
      !params.Has("routing_favourites")) {
    return InvalidArgument(params.Where("routing_locality") +
                           ": give routing_favourites beside it: a chunk's token routes, with "
                           "probability routing_locality, as one of its sequence's "
                           "routing_favourites shared draws (1 or more; 1 with locality 1: the "
                           "chunk as one token)");
  }
  return o;
}

double LocalDraws(double tokens, double favourites, double locality) {
  if (!(tokens > 0)) return 0;
  if (!(locality > 0)) return tokens;
  // 1 - (1 - p/F)^n as -expm1(n log1p(-p/F)): exact for a small p/F, and 1 at p = F = 1.
  const double shared_used = -std::expm1(tokens * std::log1p(-locality / favourites));
  return favourites * shared_used + (1.0 - locality) * tokens;
}

double LocalSingleDraws(double tokens, double favourites, double locality) {
  if (!(tokens > 1) || !(locality > 0)) return std::max(tokens, 0.0);
  // (1 - p/F)^(n - 1) as exp((n - 1) log1p(-p/F)): 0 at p = F = 1.
  const double used_once = tokens * locality * std::exp((tokens - 1.0) * std::log1p(-locality / favourites));
  return (1.0 - locality) * tokens + used_once;
}

int32_t FusedMoeBlockRows(double tokens, int32_t experts) { return tokens <= experts ? 16 : 64; }

ExpertRouting::ExpertRouting(int32_t experts, int32_t per_token, int32_t ep,
                             const ExpertRoutingOptions& options)
    : experts_(experts),
      per_token_(per_token),
      ep_(std::max(1, ep)),
      expert_imbalance_(options.expert_imbalance),
      locality_(options.routing_locality),
      favourites_(options.routing_favourites) {
  SERVELAB_CHECK(favourites_ >= 1.0 && locality_ >= 0.0 && locality_ <= 1.0);
  if (options.routing_skew > 0) {
    const RoutingSkew skew = SkewedRouting(experts, per_token, options.routing_skew, ep_);
    pick_probability_ = skew.pick_probability;
    for (const double q : skew.pick_probability) {
      log_not_picked_.push_back(q >= 1.0 ? -std::numeric_limits<double>::infinity() : std::log1p(-q));
    }
    skew_imbalance_ = skew.busiest_gpu_share;
  }
}

ExpertsRun ExpertRouting::Expected(const StepPlan& plan) const {
  RoutedTokens step;
  for (const ScheduledRequest& seq : plan.seqs) Add(step, CostedNewTokens(seq));
  return ExpertsRun{Touched(step), BusiestGpuSingleRowExperts(step)};
}

void ExpertRouting::Add(RoutedTokens& step, int32_t new_tokens) const {
  step += Sequences(1, new_tokens);
}

RoutedTokens ExpertRouting::Sequences(int64_t seqs, int64_t each) const {
  RoutedTokens step;
  if (seqs <= 0 || each <= 0) return step;
  const double n = static_cast<double>(seqs), m = static_cast<double>(each);
  step.tokens = n * m;
  if (each == 1 || locality_ <= 0) {
    step.draws = step.single_draws = step.tokens;
  } else {
    step.draws = n * LocalDraws(m, favourites_, locality_);
    step.single_draws = n * LocalSingleDraws(m, favourites_, locality_);
  }
  return step;
}

double ExpertRouting::Touched(const RoutedTokens& step) const {
  if (log_not_picked_.empty()) return ExpectedExpertsTouched(experts_, per_token_, step.draws);
  // Expert i is touched unless each of the draws passes it over: 1 - (1 - q_i)^D.
  double touched = 0;
  for (const double l : log_not_picked_) touched += 1.0 - std::exp(step.draws * l);
  return touched;
}

double ExpertRouting::Imbalance(double picks) const {
  // Configured, or the larger of the skew's and the random draw's.
  return expert_imbalance_ > 0 ? expert_imbalance_
                               : std::max(skew_imbalance_, ExpertImbalance(ep_, picks));
}

double ExpertRouting::BusiestGpuRows(const RoutedTokens& step) const {
  const double rows = step.tokens * per_token_;
  return ep_ > 1 ? rows / ep_ * Imbalance(step.draws * per_token_) : rows;
}

double ExpertRouting::ExpertTiles(double q, double draws, double tile) {
  if (!(q > 0) || !(draws > 0) || !std::isfinite(draws)) return 0;
  if (q >= 1.0) return std::ceil(draws / tile);  // every draw: X = D
  const double mean = draws * q;
  const double sd = std::sqrt(draws * q * (1.0 - q));
  const double last = std::min(draws, std::ceil(mean + 10.0 * sd + 10.0));
  if (last <= 512) {
    // Few rows: the sum over the binomial's pmf, by its recurrence from P(X = 0), to 10
    // standard deviations past the mean.
    double pmf = std::exp(draws * std::log1p(-q));
    double tiles = 0;
    for (double x = 1; x <= last; ++x) {
      pmf *= (draws - x + 1.0) / x * q / (1.0 - q);
      tiles += pmf * std::ceil(x / tile);
    }
    return tiles;
  }
  // E[ceil(X / tile)] = sum over j >= 0 of P(X > j tile): P(X > 0) = 1 - (1 - q)^T, the
  // rest from the normal approximation of the binomial with a continuity correction; the
  // terms more than 8 standard deviations below the mean are 1, those above it 0.
  const double touched = -std::expm1(draws * std::log1p(-q));
  const double first = std::max(1.0, std::floor((mean - 8.0 * sd) / tile));
  double tiles = touched + (first - 1.0);
  for (double j = first;; ++j) {
    const double x = j * tile;
    tiles += 0.5 * std::erfc((x + 0.5 - mean) / (sd * std::sqrt(2.0)));
    if (x > mean + 8.0 * sd) break;
  }
  return tiles;
}

double ExpertRouting::BusiestGpuSingleRowExperts(const RoutedTokens& step) const {
  const double singles = step.single_draws, others = step.draws - step.single_draws;
  if (experts_ <= 0 || !(singles > 0)) return 0;
  auto one_row = [singles, others](double q) {
    if (q >= 1.0) return singles == 1.0 && others <= 0 ? 1.0 : 0.0;
    return singles * q * std::exp((singles - 1.0 + others) * std::log1p(-q));
  };
  double single = 0;
  if (pick_probability_.empty()) {
    single = experts_ * one_row(static_cast<double>(per_token_) / experts_);
  } else {
    for (const double q : pick_probability_) single += one_row(q);
  }
  return single / ep_;
}

double ExpertRouting::BusiestGpuPaddedRows(const RoutedTokens& step, int32_t tile) const {
  if (tile <= 1 || experts_ <= 0) return BusiestGpuRows(step);
  if (!(step.draws > 0)) return 0;
  // Each draw the step's mean rows, so a tile holds tile / (T / D) draws' rows.
  const double t = step.draws == step.tokens ? tile : tile * step.draws / step.tokens;
  double tiles = 0;
  if (pick_probability_.empty()) {
    tiles = experts_ * ExpertTiles(static_cast<double>(per_token_) / experts_, step.draws, t);
  } else {
    for (const double q : pick_probability_) tiles += ExpertTiles(q, step.draws, t);
  }
  const double padded = tiles * tile;
  if (ep_ == 1) return padded;
  // Its share, and the rows its imbalance adds (each into an expert already touched).
  const double rows = step.tokens * per_token_;
  return padded / ep_ + (Imbalance(step.draws * per_token_) - 1.0) * rows / ep_;
}

}  // namespace servelab
