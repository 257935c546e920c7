#include "sim/counted_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>
#include <tuple>

#include "core/op.h"

namespace servelab {
namespace {

struct Rows {
  std::vector<RoutingCount> chunks, decodes;
};

std::tuple<int32_t, int32_t, int32_t, int32_t> MoeShapeOf(const ModelSpec& m) {
  return {m.num_experts, m.num_experts_per_tok, m.hidden_size, m.ExpertWidth()};
}

// The point of {first / per_unit, (first + 1) / per_unit, ...}, `points` points, with the
// least `squares` (the first of equals):
// the expected experts touched is not linear in either parameter, and a few hundred points
// are cheap. (i / per_unit, not i x step: 57 x 0.01 is 0.5700000000000001, 57 / 100 the
// double nearest 0.57, which MODEL.yaml then writes as such.)
template <typename Squares>
double BestOnGrid(int32_t first, int32_t per_unit, int32_t points, Squares squares) {
  double best = std::numeric_limits<double>::infinity();
  double at = static_cast<double>(first) / per_unit;
  for (int32_t i = first; i < first + points; ++i) {
    const double x = static_cast<double>(i) / per_unit;
    if (const double s = squares(x); s < best) {
      best = s;
      at = x;
    }
  }
  return at;
}

// A count's expected experts touched under `routing` minus what it counted.
double Miss(const RoutingCount& c, const ExpertRouting& routing) {
  return routing.Touched(routing.Sequences(c.seqs, c.each)) - c.experts_run;
}

// Least squares of expected experts touched against the counts, each one step.
double Squares(std::span<const RoutingCount> counts, int32_t experts, int32_t per_token,
               const ExpertRoutingOptions& options) {
  const ExpertRouting routing(experts, per_token, 1, options);
  double squares = 0;
  for (const RoutingCount& c : counts) {
    const double miss = Miss(c, routing);
    squares += miss * miss;
  }
  return squares;
}

// Mean |miss| / counted over the rows, in percent.
double MapePct(const Rows& rows, int32_t experts, int32_t per_token, const ExpertRoutingOptions& options) {
  const ExpertRouting routing(experts, per_token, 1, options);
  double sum = 0;
  for (const auto* part : {&rows.chunks, &rows.decodes}) {
    for (const RoutingCount& c : *part) sum += std::abs(Miss(c, routing)) / c.experts_run;
  }
  return 100.0 * sum / static_cast<double>(rows.chunks.size() + rows.decodes.size());
}

}  // namespace

double FitRoutingSkew(int32_t experts, int32_t per_token, std::span<const RoutingCount> decodes) {
  return BestOnGrid(0, 100, 401, [&](double skew) {
    ExpertRoutingOptions o;
    o.routing_skew = skew;
    return Squares(decodes, experts, per_token, o);
  });
}

RoutingLocality FitRoutingLocality(int32_t experts, int32_t per_token, double skew,
                                   std::span<const RoutingCount> chunks) {
  if (chunks.empty()) return {};
  // Counts of one size, (seqs, each), share their expectation: their squares are their
  // mean's, weighted by how many, plus a constant the fit does not see.
  struct Size {
    int64_t seqs = 0, each = 0;
    double sum = 0;
    int64_t count = 0;
  };
  std::map<std::pair<int64_t, int64_t>, Size> by_size;
  for (const RoutingCount& c : chunks) {
    Size& size = by_size[{c.seqs, c.each}];
    size.seqs = c.seqs;
    size.each = c.each;
    size.sum += c.experts_run;
    ++size.count;
  }
  ExpertRoutingOptions skewed;
  skewed.routing_skew = skew;
  const ExpertRouting routing(experts, per_token, 1, skewed);  // Touched: the draws alone
  auto squares = [&](double favourites, double locality) {
    double sum = 0;
    for (const auto& [key, size] : by_size) {
      RoutedTokens step;
      step.draws = static_cast<double>(size.seqs) *
                   (size.each == 1 ? 1.0 : LocalDraws(static_cast<double>(size.each), favourites, locality));
      const double n = static_cast<double>(size.count);
      const double miss = routing.Touched(step) - size.sum / n;
      sum += n * miss * miss;
    }
    return sum;
  };
  // At a favourites F, the localities to 0.01, then to 0.001 within 0.01 of that best
  // (i / per_unit, as BestOnGrid).
  auto best_locality = [&](double favourites) {
    auto at = [&](double l) { return squares(favourites, l); };
    const double coarse = BestOnGrid(0, 100, 101, at);
    const auto thousandths = static_cast<int32_t>(std::lround(coarse * 1000));
    const int32_t lo = std::max(0, thousandths - 10), hi = std::min(1000, thousandths + 10);
    return BestOnGrid(lo, 1000, hi - lo + 1, at);
  };
  // Favourites 1 ... 64 whole, then to 0.1 within 1 of that best, each at its best
  // locality: the expected experts fall as either grows, so the two trade along a valley
  // a joint coarse grid can miss, while the least squares over F at its best locality
  // varies smoothly.
  double best_squares = std::numeric_limits<double>::infinity();
  RoutingLocality best;
  auto try_favourites = [&](int32_t tenths) {
    const double favourites = static_cast<double>(tenths) / 10;
    const double locality = best_locality(favourites);
    if (const double sq = squares(favourites, locality); sq < best_squares) {
      best_squares = sq;
      best = {favourites, locality};
    }
  };
  for (int32_t f = 1; f <= 64; ++f) try_favourites(10 * f);
  const auto whole = static_cast<int32_t>(std::lround(best.favourites));
  best_squares = std::numeric_limits<double>::infinity();  // the finer grid holds it
  for (int32_t tenths = std::max(10, 10 * whole - 10); tenths <= std::min(640, 10 * whole + 10); ++tenths) {
    try_favourites(tenths);
  }
  return best;
}

bool CountedRouting::Matches(const ModelSpec& model) const {
  return model.IsMoe() &&
         MoeShapeOf(model) == std::tuple(num_experts, experts_per_token, hidden_size,
                                         expert_intermediate_size);
}

bool CountedRouting::SameShapeAs(const CountedRouting& o) const {
  return std::tie(num_experts, experts_per_token, hidden_size, expert_intermediate_size) ==
         std::tie(o.num_experts, o.experts_per_token, o.hidden_size, o.expert_intermediate_size);
}

ExpertRoutingOptions CountedRouting::Options() const {
  ExpertRoutingOptions o;
  o.routing_skew = routing_skew;
  o.routing_locality = routing_locality;
  o.routing_favourites = routing_favourites;
  return o;
}

std::vector<CountedRouting> CountedRoutingOf(const std::vector<ProfileTable>& tables,
                                             std::optional<double> skew) {
  std::vector<CountedRouting> out;
  std::vector<Rows> rows;
  for (const ProfileTable& table : tables) {
    for (const ProfileRow& r : table.rows) {
      if (r.op != InfoOf(Op::kMoeMlp).name || r.experts_run <= 0 || r.tokens < 2) continue;
      const bool chunk = r.batch == 1, decode = r.batch == r.tokens;
      if (!chunk && !decode) continue;
      size_t i = 0;
      while (i < out.size() && !out[i].Matches(r.shape)) ++i;
      if (i == out.size()) {
        CountedRouting c;
        std::tie(c.num_experts, c.experts_per_token, c.hidden_size, c.expert_intermediate_size) =
            MoeShapeOf(r.shape);
        out.push_back(c);
        rows.emplace_back();
      }
      const ExpertRouting uniform(r.shape.num_experts, r.shape.num_experts_per_tok, 1, {});
      const double ratio = r.experts_run / uniform.Touched(static_cast<double>(r.tokens));
      (chunk ? out[i].chunk_ratio : out[i].decode_ratio) += ratio;
      (chunk ? rows[i].chunks : rows[i].decodes).push_back(RoutingCount{r.batch, r.tokens / r.batch, r.experts_run});
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    CountedRouting& c = out[i];
    c.chunk_rows = static_cast<int64_t>(rows[i].chunks.size());
    c.decode_rows = static_cast<int64_t>(rows[i].decodes.size());
    const int32_t e = c.num_experts, k = c.experts_per_token;
    if (c.decode_rows > 0) {
      c.decode_ratio /= static_cast<double>(c.decode_rows);
      c.routing_skew = FitRoutingSkew(e, k, rows[i].decodes);
    }
    if (skew) {
      c.routing_skew = *skew;
      c.skew_given = true;
    }
    if (c.chunk_rows > 0) {
      c.chunk_ratio /= static_cast<double>(c.chunk_rows);
      const RoutingLocality fit = FitRoutingLocality(e, k, c.routing_skew, rows[i].chunks);
      c.routing_favourites = fit.favourites;
      c.routing_locality = fit.locality;
    }
    c.touched_mape_pct = MapePct(rows[i], e, k, c.Options());
    c.uniform_touched_mape_pct = MapePct(rows[i], e, k, {});
  }
  return out;
}

}  // namespace servelab
