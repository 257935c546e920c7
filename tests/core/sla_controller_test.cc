#include "core/sla_controller.h"

#include <gtest/gtest.h>

namespace servelab {
namespace {

SlaControlConfig Config() {
  SlaControlConfig c;
  c.metric = SlaMetric::kTpotP95;
  c.target_ms = 50;
  c.window = 10;
  c.interval_steps = 5;
  c.decrease = 0.5;
  c.increase_seqs = 2;
  c.increase_tokens = 100;
  c.min_num_seqs = 4;
  c.min_batched_tokens = 64;
  return c;
}

void Steps(SlaController& sla, int n, int64_t ms, int32_t decodes = 8) {
  for (int i = 0; i < n; ++i) sla.OnStep(ms * kNsPerMs, decodes);
}

TEST(SlaControllerTest, MissingTheTargetHalvesAndHoldingItGrowsBackAdditively) {
  SlaController sla(Config(), 64, 2048);
  EXPECT_EQ(sla.NumSeqsLimit(), 64);
  Steps(sla, 5, 80);
  EXPECT_EQ(sla.NumAdjustments(), 1);
  EXPECT_EQ(sla.LastObserved(), 80 * kNsPerMs);
  EXPECT_EQ(sla.NumSeqsLimit(), 32);
  EXPECT_EQ(sla.TokenBudget(), 1024);
  Steps(sla, 20, 80);
  EXPECT_EQ(sla.NumSeqsLimit(), 4) << "floored at min_num_seqs";
  EXPECT_EQ(sla.TokenBudget(), 64);
  // Ten fast steps fill the window: the estimate drops below target, growth is additive.
  Steps(sla, 10, 20);
  EXPECT_EQ(sla.LastObserved(), 20 * kNsPerMs);
  EXPECT_EQ(sla.NumSeqsLimit(), 4 + 2 + 2) << "two adjustments at or below target";
  EXPECT_EQ(sla.TokenBudget(), 64 + 100 + 100);
  Steps(sla, 500, 20);
  EXPECT_EQ(sla.NumSeqsLimit(), 64) << "never past the configured maximum";
  EXPECT_EQ(sla.TokenBudget(), 2048);
}

TEST(SlaControllerTest, TpotEstimateIsTheWindowedMeanOfDecodeSteps) {
  SlaController sla(Config(), 64, 2048);
  // Window 10: nine 40 ms steps and one 140 ms step average exactly 50 ms: held.
  Steps(sla, 9, 40);
  Steps(sla, 1, 140);
  EXPECT_EQ(sla.LastObserved(), 50 * kNsPerMs);
  EXPECT_EQ(sla.NumSeqsLimit(), 64);
  // Steps without decodes are not samples of TPOT: no sample, no adjustment.
  SlaController idle(Config(), 64, 2048);
  Steps(idle, 5, 900, /*decodes=*/0);
  EXPECT_EQ(idle.NumAdjustments(), 0);
}

TEST(SlaControllerTest, TtftMetricIsTheNearestRankP95OfFirstTokens) {
  SlaControlConfig c = Config();
  c.metric = SlaMetric::kTtftP95;
  SlaController sla(c, 64, 2048);
  for (int i = 0; i < 9; ++i) sla.OnFirstToken(10 * kNsPerMs);
  sla.OnFirstToken(500 * kNsPerMs);  // rank ceil(0.95 x 10) = 10: the slowest
  Steps(sla, 5, 1);
  EXPECT_EQ(sla.LastObserved(), 500 * kNsPerMs);
  EXPECT_EQ(sla.NumSeqsLimit(), 32);
}

}  // namespace
}  // namespace servelab
