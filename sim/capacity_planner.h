#pragma once
// Capacity planning on the simulator (`servelab plan`): for one candidate deployment
// (an experiment), the highest arrival rate at which it still meets the SLO, found by
// bracketing and bisection over simulated runs; and, over many candidates, the cheapest
// number of copies of one that serves a target rate, or the most rate a budget buys.
//
// Scaling by copies assumes a perfect split of the traffic between them (each copy sees
// rate / copies): the plan's replicas inside a candidate (cluster.replicas, with its
// router) are simulated; copies of a candidate are not.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/confidence.h"
#include "core/status.h"
#include "driver/experiment_config.h"
#include "driver/metrics.h"

namespace servelab {

// Whether one run meets the SLO: `slo`'s targets (0 = none) read through `plan`
// (statistic, attainment). `metric` names the first target missed, in the order ttft,
// tpot, e2e, attainment; `detail` says by how much ("ttft p90 1520.31 ms > 1000 ms").
struct SloVerdict {
  bool meets = true;
  std::string metric;
  std::string detail;
};
SloVerdict CheckSlo(const RunSummary& summary, const SloConfig& slo, const PlanConfig& plan);

// The statistic `plan` names, of one distribution.
double Statistic(const Distribution& d, SloStatistic statistic);

struct RateProbe {
  double rate = 0;  // req/s
  SloVerdict verdict;
  RunSummary summary;
};

// The outcome of the search (PlanConfig describes it).
struct RateSearch {
  double max_rate = 0;      // the highest rate probed that met; 0 when min_rate missed
  bool at_max_rate = false; // plan.max_rate itself met: the capacity is at least that
  std::optional<RateProbe> best;        // the probe at max_rate; absent when none met
  std::optional<RateProbe> lowest_miss; // the lowest rate probed that missed: it names
                                        // the limiting target; absent when none missed
  int32_t probes = 0;
};

using ProbeFn = std::function<StatusOr<RateProbe>(double rate)>;

// Bracket and bisect with `probe` (any monotone test: a simulation, or a formula in
// tests). At most 64 doublings and 64 bisections, so it always ends. Errors from
// `probe`, and a min_rate above max_rate, are returned.
StatusOr<RateSearch> SearchMaxRate(const ProbeFn& probe, const PlanConfig& plan);

// One simulated run of `config` with workload.arrival.rate = `rate`, checked against
// config.slo and config.plan. The workload must be synthetic with a rate (not a trace,
// not a burst): InvalidArgument naming the key otherwise.
StatusOr<RateProbe> ProbeRate(const ExperimentConfig& config, double rate);

// What the run at a candidate's max rate gave (replicate 0's), the figures a plan shows.
struct ProbeFigures {
  double rate = 0;               // req/s
  double output_throughput = 0;  // tok/s over all the candidate's GPUs
  double tpot_mean_s = 0;
  double ttft_s = 0, tpot_s = 0, e2e_s = 0;  // at the plan's statistic
  double slo_attainment = 0;
};

// The lowest rate that missed (replicate 0's search): it names the limiting target.
struct RateMiss {
  double rate = 0;
  std::string metric;  // SloVerdict::metric
  std::string detail;
};

// One candidate: whether it can run at all (the memory check, the checks every run
// makes), then the search, once per replicate (config.replicates, each with its own
// seed's requests). Plain data with a JSON form, so a candidate can be searched on
// another MPI rank.
struct CandidatePlan {
  Status status;                    // not ok: the candidate was not searched (why)
  int64_t gpus = 0;                 // replicas x tensor_parallel x pipeline_parallel
  double usd_per_hour = 0;          // gpus x the GPU's price
  double kv_cache_gib_per_gpu = 0;  // memory left for the KV cache on each GPU (headroom)
  std::vector<double> replicate_max_rates;  // one per replicate
  Estimate max_rate;                // their mean and 95% interval (no interval for one)
  // Replicate 0's search:
  bool at_max_rate = false;         // plan.max_rate met
  int32_t probes = 0;
  std::optional<ProbeFigures> at_max;   // absent when no rate met
  std::optional<RateMiss> lowest_miss;  // absent when no rate missed

  nlohmann::ordered_json ToJson() const;
  static StatusOr<CandidatePlan> FromJson(const nlohmann::ordered_json& json);
};
CandidatePlan PlanCandidate(const ExperimentConfig& config);

// `copies` of candidate `candidate` (an index into the span): they serve `rate` req/s
// for `usd_per_month`.
struct Deployment {
  size_t candidate = 0;
  int64_t copies = 0;
  double rate = 0;
  double usd_per_month = 0;
};

// The cheapest deployment serving `target_rate`: per searched candidate with a mean max
// rate > 0, ceil(target_rate / max_rate.mean) copies; ties go to fewer GPUs, then the earlier
// candidate. Absent when no candidate has a rate.
std::optional<Deployment> CheapestFor(std::span<const CandidatePlan> candidates,
                                      double target_rate, double hours_per_month);
// The deployment serving the highest rate within `budget_per_month`: per candidate,
// floor(budget / monthly cost of one copy) copies; ties go to the cheaper, then the
// earlier. Absent when no copy of any candidate fits the budget.
std::optional<Deployment> MostWithin(std::span<const CandidatePlan> candidates,
                                     double budget_per_month, double hours_per_month);

}  // namespace servelab
