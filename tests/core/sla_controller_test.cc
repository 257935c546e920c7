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

TEST(SlaControllerTest, MissingTheTargetHalvesAndHoldingItGrowsBackAdditively) {
  SlaController sla(Config(), 64, 2048);
  EXPECT_EQ(sla.NumSeqsLimit(), 64);
  for (int i = 0; i < 5; ++i) sla.OnStep(80 * kNsPerMs, 10);  // all above 50 ms
  EXPECT_EQ(sla.NumAdjustments(), 1);
  EXPECT_EQ(sla.LastObserved(), 80 * kNsPerMs);
  EXPECT_EQ(sla.NumSeqsLimit(), 32);
  EXPECT_EQ(sla.TokenBudget(), 1024);
  for (int i = 0; i < 20; ++i) sla.OnStep(80 * kNsPerMs, 10);
  EXPECT_EQ(sla.NumSeqsLimit(), 4) << "floored at min_num_seqs";
  EXPECT_EQ(sla.TokenBudget(), 64);
  // Ten fast steps fill the window: the p95 drops below target, growth is additive.
  for (int i = 0; i < 10; ++i) sla.OnStep(20 * kNsPerMs, 10);
  EXPECT_EQ(sla.LastObserved(), 20 * kNsPerMs);
  EXPECT_EQ(sla.NumSeqsLimit(), 4 + 2);
  EXPECT_EQ(sla.TokenBudget(), 64 + 100);
  for (int i = 0; i < 500; ++i) sla.OnStep(20 * kNsPerMs, 10);
  EXPECT_EQ(sla.NumSeqsLimit(), 64) << "never past the configured maximum";
  EXPECT_EQ(sla.TokenBudget(), 2048);
}

TEST(SlaControllerTest, P95IsNearestRankOverTheWindow) {
  SlaController sla(Config(), 64, 2048);
  // Window of 10: nine fast steps and one slow one -> p95 (rank 10) is the slow one.
  for (int i = 0; i < 9; ++i) sla.OnStep(10 * kNsPerMs, 1);
  sla.OnStep(90 * kNsPerMs, 1);
  EXPECT_EQ(sla.LastObserved(), 90 * kNsPerMs);
  // Steps without decodes are not samples of TPOT.
  SlaController other(Config(), 64, 2048);
  for (int i = 0; i < 5; ++i) other.OnStep(90 * kNsPerMs, 0);
  EXPECT_EQ(other.NumAdjustments(), 0);
}

TEST(SlaControllerTest, TtftMetricUsesFirstTokens) {
  SlaControlConfig c = Config();
  c.metric = SlaMetric::kTtftP95;
  SlaController sla(c, 64, 2048);
  sla.OnFirstToken(500 * kNsPerMs);
  for (int i = 0; i < 5; ++i) sla.OnStep(1 * kNsPerMs, 8);
  EXPECT_EQ(sla.LastObserved(), 500 * kNsPerMs);
  EXPECT_EQ(sla.NumSeqsLimit(), 32);
}

}  // namespace
}  // namespace servelab
