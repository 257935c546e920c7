// Replicates and their confidence intervals on the simulator: seeds, and coverage of a
// mean known from queueing theory.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "core/confidence.h"
#include "core/text.h"
#include "driver/experiment.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"
#include "sim/sim_backend.h"

namespace servelab {
namespace {

TEST(ReplicateTest, ReplicateZeroIsTheExperimentAndTheOthersDiffer) {
  EXPECT_EQ(ReplicateSeed(42, 0), 42);
  std::set<int64_t> seeds;
  for (int32_t r = 0; r < 1000; ++r) {
    const int64_t s = ReplicateSeed(42, r);
    EXPECT_GE(s, 0);
    seeds.insert(s);
  }
  EXPECT_EQ(seeds.size(), 1000u);
  EXPECT_NE(ReplicateSeed(42, 1), ReplicateSeed(43, 1));
  ExperimentConfig c;
  c.seed = 7;
  c.replicates = 5;
  const ExperimentConfig r2 = ReplicateOf(c, 2);
  EXPECT_EQ(r2.seed, ReplicateSeed(7, 2));
  EXPECT_EQ(r2.replicates, 1);
}

// M/D/1 at rho = 0.3 (one server, a constant 10 ms per request): the mean sojourn is
// S + rho S / (2 (1 - rho)) = 12.142857 ms. Over 200 experiments of 5 replicates of
// 3,000 requests, the 95% interval of the replicates' mean E2E holds it in 95% of the
// experiments. The binomial standard deviation over 200 is 1.5%; the window [90%, 99%]
// is 3.2 of them below (a chance failure about once in 1,000 runs of this test), and
// the bias of starting empty is under 0.1% of the interval's width.
TEST(ReplicateTest, IntervalsCoverTheMD1MeanSojourn) {
  const double service_s = 0.010, rho = 0.3;
  ExperimentConfig c;
  c.model = *FindModel("llama-2-7b");
  c.hardware.gpu = *FindGpu("a100-80gb");
  c.cost_model = NamedParams{"constant", {Param{"step_ms", FormatDouble(service_s * 1e3), ""}},
                             "cost_model", "", ""};
  c.scheduler.max_num_seqs = 1;
  c.workload.num_requests = 3000;
  c.workload.arrival.rate = rho / service_s;
  c.workload.input_tokens = LengthDistConfig::Fixed(16);
  c.workload.output_tokens = LengthDistConfig::Fixed(1);
  const double truth = service_s + rho * service_s / (2 * (1 - rho));
  constexpr int kExperiments = 200;
  int covered = 0;
  for (int e = 0; e < kExperiments; ++e) {
    c.seed = 1000 + e;
    std::vector<double> means;
    for (int32_t r = 0; r < 5; ++r) {
      auto outcome = RunSimulation(ReplicateOf(c, r));
      ASSERT_TRUE(outcome.ok()) << outcome.status().message();
      means.push_back(outcome->summary.e2e_s.mean);
    }
    covered += MeanWithInterval(means).Excludes(truth) ? 0 : 1;
  }
  const double coverage = covered / double(kExperiments);
  EXPECT_GE(coverage, 0.90);
  EXPECT_LE(coverage, 0.99);
}

}  // namespace
}  // namespace servelab
