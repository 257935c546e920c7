#pragma once
// The tables of `servelab plan`: plan.csv (one row per candidate, grid order) and
// plan.md. Deterministic functions of the candidates and their searches.
#include <optional>
#include <string>
#include <vector>

#include "driver/sweep_config.h"
#include "sim/capacity_planner.h"

namespace servelab {

// One row per candidate: the axis values as written, then candidate (its name), status
// (ok | failed), gpus, replicates, max_rate (req/s, the mean over replicates; 0 when even
// plan.min_rate misses), max_rate_ci_low and _high (its 95% interval; the mean itself for
// one replicate), at_max_rate (true when plan.max_rate met: the capacity is at least
// that), rate_per_gpu, and at replicate 0's max rate: output_tok_s_per_gpu, output_tok_s_per_user (1 / mean TPOT: the decode
// speed one user sees), ttft_s, tpot_s and e2e_s (the plan's statistic), slo_attainment;
// then usd_per_hour, usd_per_million_tokens (output tokens at max_rate),
// kv_cache_gib_per_gpu (memory left for the KV cache: the headroom), limiting_slo (the
// target the lowest missing rate missed: ttft, tpot, e2e, attainment, finished; empty
// when none missed), limiting_detail, probes (simulations replicate 0's search ran), message (why a failed
// candidate was not searched).
std::string PlanCsv(const Sweep& candidates, const std::vector<CandidatePlan>& plans);

// plan.md: what was searched, a table of the candidates, the best by rate per GPU and by
// cost per token, and the answers to the target rate and the budget when asked.
std::string PlanMarkdown(const Sweep& candidates, const std::vector<CandidatePlan>& plans,
                         const ExperimentConfig& base, const std::optional<Deployment>& cheapest,
                         const std::optional<Deployment>& within_budget);

// "2 x policy-fcfs_tp-1 (2 GPUs) serve 31.25 req/s for $2,920.00 a month".
std::string DescribeDeployment(const Sweep& candidates, const std::vector<CandidatePlan>& plans,
                               const Deployment& d);

}  // namespace servelab
