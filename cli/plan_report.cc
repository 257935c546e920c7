#include "cli/plan_report.h"

#include <cmath>
#include <cstdio>

#include "cli/sweep_report.h"
#include "core/text.h"

namespace servelab {
namespace {

// Figures of a searched candidate at its max rate.
struct Figures {
  double rate_per_gpu = 0, tok_per_gpu = 0, tok_per_user = 0, usd_per_mtok = 0;
};

Figures FiguresOf(const CandidatePlan& c) {
  Figures f;
  if (!c.at_max || c.gpus <= 0) return f;
  const ProbeFigures& s = *c.at_max;
  f.rate_per_gpu = c.max_rate.mean / static_cast<double>(c.gpus);
  f.tok_per_gpu = s.output_throughput / static_cast<double>(c.gpus);
  f.tok_per_user = s.tpot_mean_s > 0 ? 1.0 / s.tpot_mean_s : 0;
  f.usd_per_mtok = s.output_throughput > 0 ? c.usd_per_hour / (s.output_throughput * 3600) * 1e6 : 0;
  return f;
}

// "$2,920.00" (usd >= 0, below 1e16).
std::string Money(double usd) {
  const auto cents = static_cast<int64_t>(std::llround(usd * 100));
  char frac[8];
  std::snprintf(frac, sizeof frac, ".%02d", static_cast<int>(cents % 100));
  return "$" + WithCommas(cents / 100) + frac;
}

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::string PlanCsv(const Sweep& candidates, const std::vector<CandidatePlan>& plans) {
  std::string out;
  for (const auto& axis : candidates.axes) out += CsvQuote(axis.key) + ",";
  out += "candidate,status,gpus,replicates,max_rate,max_rate_ci_low,max_rate_ci_high,at_max_rate,rate_per_gpu,output_tok_s_per_gpu,"
         "output_tok_s_per_user,ttft_s,tpot_s,e2e_s,slo_attainment,usd_per_hour,"
         "usd_per_million_tokens,kv_cache_gib_per_gpu,limiting_slo,limiting_detail,probes,"
         "message\n";
  for (size_t p = 0; p < candidates.points.size(); ++p) {
    const SweepPoint& point = candidates.points[p];
    const CandidatePlan& c = plans[p];
    for (size_t a = 0; a < candidates.axes.size(); ++a) {
      out += CsvQuote(candidates.axes[a].values[point.index[a]]) + ",";
    }
    out += CsvQuote(point.folder) + (c.status.ok() ? ",ok," : ",failed,");
    out += std::to_string(c.gpus) + "," + std::to_string(point.config.replicates) + ",";
    if (!c.status.ok()) {
      out += ",,,,,,,,,,," + CsvNumber(c.usd_per_hour) + ",,,,,," + CsvQuote(c.status.message()) + "\n";
      continue;
    }
    const Figures f = FiguresOf(c);
    out += CsvNumber(c.max_rate.mean) + "," + CsvNumber(c.max_rate.low()) + "," +
           CsvNumber(c.max_rate.high()) + (c.at_max_rate ? ",true," : ",false,");
    if (c.at_max) {
      const ProbeFigures& r = *c.at_max;
      out += CsvNumber(f.rate_per_gpu) + "," + CsvNumber(f.tok_per_gpu) + "," +
             CsvNumber(f.tok_per_user) + "," + CsvNumber(r.ttft_s) + "," + CsvNumber(r.tpot_s) +
             "," + CsvNumber(r.e2e_s) + "," + CsvNumber(r.slo_attainment) + ",";
    } else {
      out += "0,,,,,,,";
    }
    out += CsvNumber(c.usd_per_hour) + ",";
    out += (c.at_max ? CsvNumber(f.usd_per_mtok) : std::string()) + ",";
    out += CsvNumber(c.kv_cache_gib_per_gpu) + ",";
    if (c.lowest_miss) {
      out += c.lowest_miss->metric + "," + CsvQuote(c.lowest_miss->detail);
    } else {
      out += ",";
    }
    out += "," + std::to_string(c.probes) + ",\n";
  }
  return out;
}

std::string DescribeDeployment(const Sweep& candidates, const std::vector<CandidatePlan>& plans,
                               const Deployment& d) {
  const int64_t gpus = d.copies * plans[d.candidate].gpus;
  return std::to_string(d.copies) + " x " + candidates.points[d.candidate].folder + " (" +
         std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs") + ") serve " + Fixed(d.rate, 2) +
         " req/s for " + Money(d.usd_per_month) + " a month";
}

std::string PlanMarkdown(const Sweep& candidates, const std::vector<CandidatePlan>& plans,
                         const ExperimentConfig& base, const std::optional<Deployment>& cheapest,
                         const std::optional<Deployment>& within_budget) {
  const PlanConfig& plan = base.plan;
  const std::string stat(NameOf(EnumNames<SloStatistic>(kSloStatisticNames), plan.statistic));
  std::string out = "# Capacity plan: " + base.name + "\n\n";
  std::string targets;
  const auto add = [&](const char* name, double ms) {
    if (ms > 0) targets += std::string(targets.empty() ? "" : ", ") + name + " " + stat + " <= " + Fixed(ms, 1) + " ms";
  };
  add("TTFT", base.slo.ttft_ms);
  add("TPOT", base.slo.tpot_ms);
  add("E2E", base.slo.e2e_ms);
  if (plan.attainment > 0) {
    targets += std::string(targets.empty() ? "" : ", ") + "attainment >= " + Fixed(plan.attainment * 100, 1) + "%";
  }
  out += "SLO: " + targets + ". Each candidate's highest arrival rate meeting it, searched from " +
         Fixed(plan.min_rate, 3) + " to " + Fixed(plan.max_rate, 1) + " req/s (doubling, then " +
         "geometric bisection to within " + Fixed(plan.tolerance * 100, 2) + "%), every probe a " +
         "simulation of the same requests.\n\n";
  out += "| candidate | GPUs | max req/s | req/s per GPU | tok/s per GPU | tok/s per user | $/hour | "
         "$/M tokens | KV GiB/GPU | limited by |\n";
  out += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  std::optional<size_t> best_rate, best_cost;
  for (size_t i = 0; i < plans.size(); ++i) {
    const CandidatePlan& c = plans[i];
    const std::string& name = candidates.points[i].folder;
    if (!c.status.ok()) {
      out += "| " + name + " | " + std::to_string(c.gpus) + " | cannot run | | | | " +
             Fixed(c.usd_per_hour, 2) + " | | | " + c.status.message() + " |\n";
      continue;
    }
    const Figures f = FiguresOf(c);
    out += "| " + name + " | " + std::to_string(c.gpus) + " | " + (c.at_max_rate ? ">= " : "") +
           Fixed(c.max_rate.mean, 2) +
           (c.max_rate.n >= 2 ? " ± " + Fixed(c.max_rate.half_width, 2) : std::string()) + " | " +
           Fixed(f.rate_per_gpu, 2) + " | " + Fixed(f.tok_per_gpu, 1) + " | " +
           Fixed(f.tok_per_user, 1) + " | " + Fixed(c.usd_per_hour, 2) + " | " +
           (c.at_max ? Fixed(f.usd_per_mtok, 3) : std::string()) + " | " +
           Fixed(c.kv_cache_gib_per_gpu, 2) + " | " +
           (c.lowest_miss ? c.lowest_miss->detail + " at " + Fixed(c.lowest_miss->rate, 2) + " req/s"
                          : std::string("none up to max_rate")) +
           " |\n";
    if (c.max_rate.mean <= 0) continue;
    if (!best_rate || f.rate_per_gpu > FiguresOf(plans[*best_rate]).rate_per_gpu) best_rate = i;
    if (c.at_max && f.usd_per_mtok > 0 &&
        (!best_cost || f.usd_per_mtok < FiguresOf(plans[*best_cost]).usd_per_mtok)) {
      best_cost = i;
    }
  }
  out += "\n";
  if (best_rate) {
    out += "Most requests per GPU: " + candidates.points[*best_rate].folder + " (" +
           Fixed(FiguresOf(plans[*best_rate]).rate_per_gpu, 2) + " req/s per GPU).\n";
  }
  if (best_cost) {
    out += "Cheapest per output token: " + candidates.points[*best_cost].folder + " (" +
           Money(FiguresOf(plans[*best_cost]).usd_per_mtok) + " per million).\n";
  }
  const double hours = plan.hours_per_month;
  if (plan.target_rate > 0) {
    out += "\nFor a peak of " + Fixed(plan.target_rate, 2) + " req/s: " +
           (cheapest ? DescribeDeployment(candidates, plans, *cheapest)
                     : std::string("no candidate serves any rate")) +
           " (" + Fixed(hours, 0) + " hours a month; copies split the traffic evenly).\n";
  }
  if (plan.budget_per_month > 0) {
    out += "\nWithin " + Money(plan.budget_per_month) + " a month: " +
           (within_budget ? DescribeDeployment(candidates, plans, *within_budget)
                          : std::string("no copy of any candidate fits")) +
           ".\n";
  }
  return out;
}

}  // namespace servelab
