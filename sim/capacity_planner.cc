#include "sim/capacity_planner.h"

#include <cmath>
#include <cstdio>

#include "driver/experiment.h"
#include "sim/sim_backend.h"

namespace servelab {
namespace {

std::string Ms(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f ms", seconds * 1e3);
  return buf;
}

constexpr int kMaxSteps = 64;  // doublings, then bisections: 2^64 spans any rate range

}  // namespace

double Statistic(const Distribution& d, SloStatistic statistic) {
  switch (statistic) {
    case SloStatistic::kMean: return d.mean;
    case SloStatistic::kP50: return d.p50;
    case SloStatistic::kP90: return d.p90;
    case SloStatistic::kP99: return d.p99;
  }
  return d.mean;
}

SloVerdict CheckSlo(const RunSummary& summary, const SloConfig& slo, const PlanConfig& plan) {
  if (summary.num_finished == 0) return {false, "finished", "no request finished"};
  const std::string stat(NameOf(EnumNames<SloStatistic>(kSloStatisticNames), plan.statistic));
  const struct {
    const char* metric;
    double target_ms;
    const Distribution& d;
  } targets[] = {{"ttft", slo.ttft_ms, summary.ttft_s},
                 {"tpot", slo.tpot_ms, summary.tpot_s},
                 {"e2e", slo.e2e_ms, summary.e2e_s}};
  for (const auto& t : targets) {
    if (t.target_ms <= 0) continue;
    const double value = Statistic(t.d, plan.statistic);
    if (value > t.target_ms * 1e-3) {
      return {false, t.metric,
              std::string(t.metric) + " " + stat + " " + Ms(value) + " > " + Ms(t.target_ms * 1e-3)};
    }
  }
  if (plan.attainment > 0 && summary.slo_attainment < plan.attainment) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "attainment %.2f%% < %.2f%%", summary.slo_attainment * 100,
                  plan.attainment * 100);
    return {false, "attainment", buf};
  }
  return {};
}

StatusOr<RateSearch> SearchMaxRate(const ProbeFn& probe, const PlanConfig& plan) {
  if (plan.min_rate > plan.max_rate) {
    return InvalidArgument("plan.min_rate (" + std::to_string(plan.min_rate) +
                           ") is above plan.max_rate (" + std::to_string(plan.max_rate) + ")");
  }
  RateSearch s;
  auto at = [&](double rate) -> StatusOr<RateProbe> {
    ++s.probes;
    return probe(rate);
  };
  auto first = at(plan.min_rate);
  if (!first.ok()) return first.status();
  if (!first->verdict.meets) {
    s.lowest_miss = std::move(first).value();
    return s;
  }
  double lo = plan.min_rate;
  s.best = std::move(first).value();
  std::optional<double> hi;
  // Probes `rate`: the bracket's low end moves up to it when it meets, the high end down
  // to it when it misses.
  auto narrow = [&](double rate) -> Status {
    auto p = at(rate);
    if (!p.ok()) return p.status();
    if (p->verdict.meets) {
      lo = rate;
      s.best = std::move(p).value();
    } else {
      hi = rate;
      s.lowest_miss = std::move(p).value();
    }
    return Status::Ok();
  };
  // Bracket: double until a rate misses, or max_rate meets.
  for (int i = 0; i < kMaxSteps && !hi; ++i) {
    if (lo >= plan.max_rate) {
      s.at_max_rate = true;
      break;
    }
    SERVELAB_RETURN_IF_ERROR(narrow(std::min(lo * 2, plan.max_rate)));
  }
  // Bisect in log space: the bracket's ratio halves (in its logarithm) each probe.
  for (int i = 0; i < kMaxSteps && hi && *hi > lo * (1 + plan.tolerance); ++i) {
    SERVELAB_RETURN_IF_ERROR(narrow(std::sqrt(lo * *hi)));
  }
  s.max_rate = lo;
  return s;
}

StatusOr<RateProbe> ProbeRate(const ExperimentConfig& config, double rate) {
  if (config.workload.has_trace) {
    return InvalidArgument(config.Where("workload.trace") +
                           ": a plan varies workload.arrival.rate, and a trace has its own "
                           "arrival times; describe its shape with arrival and length "
                           "distributions instead");
  }
  if (config.workload.arrival.process == ArrivalProcess::kBurst) {
    return InvalidArgument(config.Where("workload.arrival.process") +
                           ": a plan varies the arrival rate; a burst has none (use poisson, "
                           "gamma or constant)");
  }
  ExperimentConfig probe = config;
  probe.workload.arrival.rate = rate;
  auto outcome = RunSimulation(probe);
  if (!outcome.ok()) return outcome.status();
  RateProbe p;
  p.rate = rate;
  p.verdict = CheckSlo(outcome->summary, config.slo, config.plan);
  p.summary = std::move(outcome->summary);
  return p;
}

CandidatePlan PlanCandidate(const ExperimentConfig& config) {
  CandidatePlan c;
  const HardwareConfig& hw = config.hardware;
  c.gpus = int64_t{config.cluster.replicas} * hw.tensor_parallel * hw.pipeline_parallel;
  c.usd_per_hour = static_cast<double>(c.gpus) * hw.gpu.price_per_hour;
  if (config.backend != BackendKind::kSim) {
    c.status = InvalidArgument(config.Where("backend") +
                               ": a plan runs on the simulator (backend: sim)");
    return c;
  }
  auto replica = SimReplicaOf(config);
  if (!replica.ok()) {
    c.status = replica.status();
    return c;
  }
  c.kv_cache_gib_per_gpu = replica->memory.kv_cache / double(int64_t{1} << 30);
  for (int32_t r = 0; r < config.replicates; ++r) {
    const ExperimentConfig replicate = ReplicateOf(config, r);
    auto search =
        SearchMaxRate([&](double rate) { return ProbeRate(replicate, rate); }, config.plan);
    if (!search.ok()) {
      c.status = search.status();
      return c;
    }
    c.replicate_max_rates.push_back(search->max_rate);
    if (r != 0) continue;
    c.at_max_rate = search->at_max_rate;
    c.probes = search->probes;
    if (search->best) {
      const RunSummary& s = search->best->summary;
      const SloStatistic stat = config.plan.statistic;
      c.at_max = ProbeFigures{search->best->rate, s.output_throughput, s.tpot_s.mean,
                              Statistic(s.ttft_s, stat), Statistic(s.tpot_s, stat),
                              Statistic(s.e2e_s, stat), s.slo_attainment};
    }
    if (search->lowest_miss) {
      const RateProbe& m = *search->lowest_miss;
      c.lowest_miss = RateMiss{m.rate, m.verdict.metric, m.verdict.detail};
    }
  }
  c.max_rate = MeanWithInterval(c.replicate_max_rates);
  return c;
}

nlohmann::ordered_json CandidatePlan::ToJson() const {
  nlohmann::ordered_json j;
  j["code"] = static_cast<int>(status.code());
  j["message"] = status.message();
  j["gpus"] = gpus;
  j["usd_per_hour"] = usd_per_hour;
  j["kv_cache_gib_per_gpu"] = kv_cache_gib_per_gpu;
  j["replicate_max_rates"] = replicate_max_rates;
  j["at_max_rate"] = at_max_rate;
  j["probes"] = probes;
  if (at_max) {
    const ProbeFigures& f = *at_max;
    j["at_max"] = {{"rate", f.rate},     {"output_throughput", f.output_throughput},
                   {"tpot_mean_s", f.tpot_mean_s}, {"ttft_s", f.ttft_s},
                   {"tpot_s", f.tpot_s}, {"e2e_s", f.e2e_s},
                   {"slo_attainment", f.slo_attainment}};
  }
  if (lowest_miss) {
    j["lowest_miss"] = {{"rate", lowest_miss->rate},
                        {"metric", lowest_miss->metric},
                        {"detail", lowest_miss->detail}};
  }
  return j;
}

StatusOr<CandidatePlan> CandidatePlan::FromJson(const nlohmann::ordered_json& j) {
  try {
    CandidatePlan c;
    const int code = j.at("code").get<int>();
    if (code < 0 || code > static_cast<int>(StatusCode::kInternal)) {
      return Internal("a candidate's plan has an unknown status code");
    }
    c.status = Status(static_cast<StatusCode>(code), j.at("message").get<std::string>());
    c.gpus = j.at("gpus").get<int64_t>();
    c.usd_per_hour = j.at("usd_per_hour").get<double>();
    c.kv_cache_gib_per_gpu = j.at("kv_cache_gib_per_gpu").get<double>();
    c.replicate_max_rates = j.at("replicate_max_rates").get<std::vector<double>>();
    c.at_max_rate = j.at("at_max_rate").get<bool>();
    c.probes = j.at("probes").get<int32_t>();
    if (j.contains("at_max")) {
      const auto& f = j.at("at_max");
      c.at_max = ProbeFigures{f.at("rate").get<double>(), f.at("output_throughput").get<double>(),
                              f.at("tpot_mean_s").get<double>(), f.at("ttft_s").get<double>(),
                              f.at("tpot_s").get<double>(), f.at("e2e_s").get<double>(),
                              f.at("slo_attainment").get<double>()};
    }
    if (j.contains("lowest_miss")) {
      const auto& m = j.at("lowest_miss");
      c.lowest_miss = RateMiss{m.at("rate").get<double>(), m.at("metric").get<std::string>(),
                               m.at("detail").get<std::string>()};
    }
    c.max_rate = MeanWithInterval(c.replicate_max_rates);
    return c;
  } catch (const nlohmann::json::exception& e) {
    return Internal(std::string("a candidate's plan is not in servelab's form: ") + e.what());
  }
}

std::optional<Deployment> CheapestFor(std::span<const CandidatePlan> candidates,
                                      double target_rate, double hours_per_month) {
  std::optional<Deployment> best;
  int64_t best_gpus = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const CandidatePlan& c = candidates[i];
    const double rate = c.max_rate.mean;
    if (!c.status.ok() || rate <= 0) continue;
    const double needed = std::max(1.0, std::ceil(target_rate / rate));
    if (needed > 1e12) continue;  // not a deployment
    const auto copies = static_cast<int64_t>(needed);
    const Deployment d{i, copies, needed * rate, needed * c.usd_per_hour * hours_per_month};
    const int64_t gpus = copies * c.gpus;
    if (!best || d.usd_per_month < best->usd_per_month ||
        (d.usd_per_month == best->usd_per_month && gpus < best_gpus)) {
      best = d;
      best_gpus = gpus;
    }
  }
  return best;
}

std::optional<Deployment> MostWithin(std::span<const CandidatePlan> candidates,
                                     double budget_per_month, double hours_per_month) {
  std::optional<Deployment> best;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const CandidatePlan& c = candidates[i];
    const double monthly = c.usd_per_hour * hours_per_month;
    if (!c.status.ok() || c.max_rate.mean <= 0 || monthly <= 0) continue;
    const double copies = std::min(std::floor(budget_per_month / monthly), 1e12);
    if (copies < 1) continue;
    const Deployment d{i, static_cast<int64_t>(copies), copies * c.max_rate.mean, copies * monthly};
    if (!best || d.rate > best->rate || (d.rate == best->rate && d.usd_per_month < best->usd_per_month)) {
      best = d;
    }
  }
  return best;
}

}  // namespace servelab
