#include "sim/capacity_planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/text.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;

// A probe with a known answer: every rate up to `capacity` meets.
ProbeFn Threshold(double capacity, std::vector<double>* rates = nullptr) {
  return [=](double rate) -> StatusOr<RateProbe> {
    if (rates != nullptr) rates->push_back(rate);
    RateProbe p;
    p.rate = rate;
    p.verdict = rate <= capacity ? SloVerdict{} : SloVerdict{false, "ttft", "too slow"};
    return p;
  };
}

TEST(SearchMaxRateTest, BracketsByDoublingThenBisectsToTheTolerance) {
  PlanConfig plan;
  plan.min_rate = 0.5;
  plan.max_rate = 1000;
  plan.tolerance = 0.01;
  std::vector<double> rates;
  auto s = SearchMaxRate(Threshold(7.3, &rates), plan);
  ASSERT_TRUE(s.ok());
  // 0.5, 1, 2, 4, 8 (misses), then bisection of [4, 8] in log space: log2(8/4) = 1
  // halves to log2(1.01) ~ 0.01436 in 7 probes (2^-7 = 0.0078 < 0.01436 < 2^-6).
  EXPECT_EQ(std::vector<double>(rates.begin(), rates.begin() + 5),
            (std::vector<double>{0.5, 1, 2, 4, 8}));
  EXPECT_EQ(s->probes, 5 + 7);
  EXPECT_LE(s->max_rate, 7.3);
  EXPECT_GE(s->max_rate * 1.01, 7.3);
  ASSERT_TRUE(s->best && s->lowest_miss);
  EXPECT_EQ(s->best->rate, s->max_rate);
  EXPECT_GT(s->lowest_miss->rate, 7.3);
  EXPECT_LE(s->lowest_miss->rate, s->max_rate * 1.01);
  EXPECT_FALSE(s->at_max_rate);
}

TEST(SearchMaxRateTest, EndsAtEitherEndOfTheRange) {
  PlanConfig plan;
  plan.min_rate = 1;
  plan.max_rate = 100;
  auto all = SearchMaxRate(Threshold(1e9), plan);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->at_max_rate);
  EXPECT_EQ(all->max_rate, 100);
  EXPECT_FALSE(all->lowest_miss);
  EXPECT_EQ(all->probes, 1 + 7);  // 1, 2, ..., 64, then 100
  auto none = SearchMaxRate(Threshold(0.5), plan);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->max_rate, 0);
  EXPECT_FALSE(none->best);
  EXPECT_EQ(none->probes, 1);
  EXPECT_EQ(none->lowest_miss->verdict.metric, "ttft");
  plan.min_rate = 200;
  EXPECT_THAT(SearchMaxRate(Threshold(1), plan).status().message(),
              HasSubstr("plan.min_rate (200.000000) is above plan.max_rate"));
  // A probe's error ends the search with it.
  plan.min_rate = 1;
  auto failing = SearchMaxRate([](double) -> StatusOr<RateProbe> { return Internal("boom"); }, plan);
  EXPECT_EQ(failing.status().message(), "boom");
}

TEST(CheckSloTest, EachTargetAtTheChosenStatisticThenAttainment) {
  RunSummary s;
  s.num_finished = 10;
  s.ttft_s = {10, /*mean=*/0.4, /*p50=*/0.3, /*p90=*/0.9, /*p99=*/1.5, 2.0};
  s.tpot_s = {10, 0.05, 0.04, 0.08, 0.12, 0.2};
  s.slo_attainment = 0.85;
  SloConfig slo{1000, 100, 0};
  PlanConfig plan;
  EXPECT_TRUE(CheckSlo(s, slo, plan).meets);  // p90: 0.9 s <= 1 s, 80 ms <= 100 ms
  plan.statistic = SloStatistic::kP99;
  const SloVerdict p99 = CheckSlo(s, slo, plan);
  EXPECT_FALSE(p99.meets);
  EXPECT_EQ(p99.metric, "ttft");
  EXPECT_EQ(p99.detail, "ttft p99 1500.00 ms > 1000.00 ms");
  slo.ttft_ms = 0;  // no TTFT target: TPOT p99 is next
  EXPECT_EQ(CheckSlo(s, slo, plan).detail, "tpot p99 120.00 ms > 100.00 ms");
  plan.statistic = SloStatistic::kMean;
  plan.attainment = 0.9;
  EXPECT_EQ(CheckSlo(s, slo, plan).detail, "attainment 85.00% < 90.00%");
  s.num_finished = 0;
  EXPECT_EQ(CheckSlo(s, slo, plan).metric, "finished");
}

// Three candidates by hand: A serves 10 req/s on 1 GPU at $2/h, B 25 req/s on 2 GPUs at
// $3/h, C cannot run.
std::vector<CandidatePlan> HandGrid() {
  std::vector<CandidatePlan> c(3);
  c[0].gpus = 1;
  c[0].usd_per_hour = 2;
  c[0].max_rate.mean = 10;
  c[1].gpus = 2;
  c[1].usd_per_hour = 3;
  c[1].max_rate.mean = 25;
  c[2].gpus = 1;
  c[2].usd_per_hour = 0.5;
  c[2].status = InvalidArgument("does not fit");
  return c;
}

TEST(DeploymentTest, CheapestForATargetRateByHand) {
  const auto grid = HandGrid();
  // 20 req/s: A needs 2 copies ($4/h), B 1 ($3/h) -> B, $3 x 730 = $2190 a month.
  auto d = CheapestFor(grid, 20, 730);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->candidate, 1u);
  EXPECT_EQ(d->copies, 1);
  EXPECT_EQ(d->rate, 25);
  EXPECT_DOUBLE_EQ(d->usd_per_month, 2190);
  // 30 req/s: A needs 3 ($6/h), B 2 ($6/h): a tie in cost goes to fewer GPUs (A: 3, B: 4).
  d = CheapestFor(grid, 30, 730);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->candidate, 0u);
  EXPECT_EQ(d->copies, 3);
  // 5 req/s: one copy of A ($2/h) beats one of B.
  EXPECT_EQ(CheapestFor(grid, 5, 730)->candidate, 0u);
  // Nothing with a rate: no answer.
  std::vector<CandidatePlan> empty(1);
  EXPECT_FALSE(CheapestFor(empty, 5, 730));
}

TEST(DeploymentTest, MostRateWithinABudgetByHand) {
  const auto grid = HandGrid();
  // $4,380 a month = $6/h: A x 3 = 30 req/s, B x 2 = 50 req/s -> B.
  auto d = MostWithin(grid, 4380, 730);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->candidate, 1u);
  EXPECT_EQ(d->copies, 2);
  EXPECT_EQ(d->rate, 50);
  // $2,000: A x 1 ($1,460) = 10 req/s; B x 0.
  d = MostWithin(grid, 2000, 730);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->candidate, 0u);
  EXPECT_EQ(d->copies, 1);
  EXPECT_FALSE(MostWithin(grid, 1000, 730));
}

// M/D/1 (one server: max_num_seqs 1; one iteration per request, a constant S): the
// Pollaczek-Khinchine mean wait is rho S / (2 (1 - rho)), so a target of 2 S on the mean
// TTFT (wait + S) holds up to rho = 2/3, a rate of 2 / (3 S). The search over simulated
// runs finds it within the sampling error of 100,000 requests (under 1% over five
// seeds) plus its own tolerance.
TEST(PlanCandidateTest, FindsTheMD1RateForAMeanWaitTarget) {
  const double service_s = 0.010;
  ExperimentConfig c;
  c.name = "md1";
  c.seed = 3;
  c.model = *FindModel("llama-2-7b");
  c.hardware.gpu = *FindGpu("a100-80gb");
  c.cost_model = NamedParams{"constant", {Param{"step_ms", FormatDouble(service_s * 1e3), ""}},
                             "cost_model", "", ""};
  c.scheduler.max_num_seqs = 1;
  c.workload.num_requests = 100'000;
  c.workload.input_tokens = LengthDistConfig::Fixed(16);
  c.workload.output_tokens = LengthDistConfig::Fixed(1);
  c.slo.ttft_ms = 2 * service_s * 1e3;
  c.plan.statistic = SloStatistic::kMean;
  c.plan.min_rate = 1;
  c.plan.max_rate = 1000;
  c.plan.tolerance = 0.005;
  const CandidatePlan plan = PlanCandidate(c);
  ASSERT_TRUE(plan.status.ok()) << plan.status.message();
  const double expected = 2.0 / (3.0 * service_s);  // 66.67 req/s
  EXPECT_NEAR(plan.max_rate.mean, expected, 0.025 * expected);
  EXPECT_EQ(plan.lowest_miss->metric, "ttft");
  EXPECT_GT(plan.lowest_miss->rate, plan.max_rate.mean);
  ASSERT_TRUE(plan.at_max);
  EXPECT_EQ(plan.at_max->rate, plan.max_rate.mean);
  EXPECT_LE(plan.at_max->ttft_s, 2 * service_s);  // the statistic is the mean
  // The form another rank sends it in gives it back whole.
  auto back = CandidatePlan::FromJson(plan.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ToJson().dump(), plan.ToJson().dump());
  EXPECT_EQ(back->max_rate.mean, plan.max_rate.mean);
  EXPECT_EQ(plan.gpus, 1);
  EXPECT_DOUBLE_EQ(plan.usd_per_hour, 1.5);
}

TEST(PlanCandidateTest, ACandidateThatCannotRunSaysWhy) {
  ExperimentConfig c;
  c.model = *FindModel("llama-2-70b");
  c.hardware.gpu = *FindGpu("a100-80gb");
  c.workload.num_requests = 10;
  c.slo.ttft_ms = 1000;
  const CandidatePlan plan = PlanCandidate(c);
  EXPECT_TRUE(plan.status.IsBadInput());
  EXPECT_THAT(plan.status.message(), HasSubstr("does not fit"));
  EXPECT_EQ(plan.probes, 0);
  auto back = CandidatePlan::FromJson(plan.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->status.message(), plan.status.message());
  EXPECT_TRUE(back->status.IsBadInput());
  EXPECT_FALSE(CandidatePlan::FromJson(nlohmann::ordered_json::object()).ok());
  c.model = *FindModel("llama-2-7b");
  c.workload.has_trace = true;
  EXPECT_THAT(PlanCandidate(c).status.message(), HasSubstr("a trace has its own arrival times"));
}

}  // namespace
}  // namespace servelab
