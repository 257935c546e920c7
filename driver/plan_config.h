#pragma once
// The `plan:` section of an experiment: what `servelab plan` searches for. The search
// space is the file's `sweep:` block (every point a candidate deployment), the SLO is
// the `slo:` section, and this says how each target is read and how the arrival rate is
// searched. `servelab run` ignores it.
#include <cstdint>

#include "core/fields.h"

namespace servelab {

// Which statistic of each SLO metric (TTFT, TPOT, E2E) must be within its target.
enum class SloStatistic : uint8_t { kMean, kP50, kP90, kP99 };
inline constexpr EnumName<SloStatistic> kSloStatisticNames[] = {{"mean", SloStatistic::kMean},
                                                                {"p50", SloStatistic::kP50},
                                                                {"p90", SloStatistic::kP90},
                                                                {"p99", SloStatistic::kP99}};

struct PlanConfig {
  // A rate meets the SLO when, over the run's requests, this statistic of every metric
  // with a target in `slo:` is within it (inclusive) ...
  SloStatistic statistic = SloStatistic::kP90;
  // ... and, when > 0, at least this fraction of all requests (rejected ones count as
  // missed) meets every target at once (RunSummary::slo_attainment).
  double attainment = 0;
  // The search for the highest arrival rate (workload.arrival.rate, req/s) that meets the
  // SLO: from min_rate, doubling until a rate misses (or max_rate meets: the answer is
  // then "at least max_rate"), then bisecting geometrically until the bracket's ends are
  // within a factor 1 + tolerance. The answer is the bracket's lower end, a rate that
  // was simulated and met the SLO. Every probe uses the experiment's seed, so the rates
  // see the same requests, scaled in time.
  double min_rate = 0.1;
  double max_rate = 10000;
  double tolerance = 0.01;
  // The peak the deployment must serve (req/s), answered with the cheapest number of
  // copies of one candidate; 0 = not asked (`--target-rate` sets it too).
  double target_rate = 0;
  // A monthly budget (USD), answered with the candidate and copies serving the highest
  // rate within it; 0 = not asked (`--budget`).
  double budget_per_month = 0;
  double hours_per_month = 730;  // 8760 / 12

  template <class V>
  void VisitFields(V& v) {
    v.Enum("statistic", statistic, EnumNames<SloStatistic>(kSloStatisticNames));
    v.Field("attainment", attainment, kUnitInterval);
    v.Field("min_rate", min_rate, Bounds{1e-6, 1e9});
    v.Field("max_rate", max_rate, Bounds{1e-6, 1e9});
    v.Field("tolerance", tolerance, Bounds{1e-6, 1});
    v.Field("target_rate", target_rate, Bounds{0, 1e9});
    v.Field("budget_per_month", budget_per_month, Bounds{0, 1e15});
    v.Field("hours_per_month", hours_per_month, Bounds{1, 744});
  }
};

}  // namespace servelab
