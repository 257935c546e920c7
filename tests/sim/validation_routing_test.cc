// A validation's routing rows and fits, on hand-built steps: the decode batches' ranges,
// the means over their steps, and the routing recovered from counts a known router
// would make.
#include "sim/validation_routing.h"

#include <gtest/gtest.h>

#include <vector>

#include "sim/expert_routing.h"

namespace servelab {
namespace {

StepComparison Step(int32_t seqs, int32_t tokens, ExpertsRun measured, ExpertsRun predicted) {
  StepComparison s;
  s.seqs = seqs;
  s.tokens = tokens;
  s.decode_only = tokens == seqs;
  s.measured_s = s.predicted_s = 1e-3;
  s.experts_measured = measured;
  s.experts_predicted = predicted;
  return s;
}

TEST(RoutingRowsTest, DecodeBatchesInPowerOfTwoRangesThenTheMixedSteps) {
  std::vector<StepComparison> steps = {
      Step(3, 3, {5, 1}, {4, 2}),       // decode_3-4
      Step(1, 1, {2, 2}, {2, 2}),       // decode_1
      Step(1, 40, {6, 0}, {7, 0.5}),    // mixed: a lone chunk
      Step(4, 4, {7, 0}, {6, 1}),       // decode_3-4
      Step(2, 2, {3.5, 3}, {3.75, 3}),  // decode_2
      Step(8, 8, {8, 0}, {8, 0}),       // decode_5-8
      Step(2, 60, {8, 0}, {8, 0.25}),   // mixed: a chunk beside a decode
  };
  StepComparison uncounted = Step(9, 9, {}, {});
  uncounted.experts_measured.reset();
  steps.push_back(uncounted);  // not in any row

  const std::vector<RoutingRow> rows = RoutingRows(steps);
  ASSERT_EQ(rows.size(), 5u);
  const char* names[] = {"decode_1", "decode_2", "decode_3-4", "decode_5-8", "mixed"};
  const int64_t counts[] = {1, 1, 2, 1, 2};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].steps, names[i]);
    EXPECT_EQ(rows[i].count, counts[i]);
  }
  // Means over each row's steps, each side on its own.
  EXPECT_DOUBLE_EQ(rows[2].engine.run, 6.0);  // (5 + 7) / 2
  EXPECT_DOUBLE_EQ(rows[2].engine.single_row, 0.5);
  EXPECT_DOUBLE_EQ(rows[2].sim.run, 5.0);
  EXPECT_DOUBLE_EQ(rows[2].sim.single_row, 1.5);
  EXPECT_DOUBLE_EQ(rows[4].engine.run, 7.0);
  EXPECT_DOUBLE_EQ(rows[4].sim.run, 7.5);
  EXPECT_DOUBLE_EQ(rows[4].sim.single_row, 0.375);
  EXPECT_DOUBLE_EQ(rows[1].sim.run, 3.75);
}

TEST(RoutingRowsTest, NoCountsNoRows) {
  StepComparison dense = Step(4, 4, {}, {});
  dense.experts_measured.reset();
  dense.experts_predicted.reset();
  EXPECT_TRUE(RoutingRows(std::vector<StepComparison>{dense}).empty());
}

// A run of `model`'s whose engine counts what `engine_router` expects and whose simulator
// expects uniform routing: decode batches of 2..12 sequences and lone chunks of 16..256.
LoadValidation RoutedRun(const ExpertRouting& engine_router) {
  LoadValidation v;
  v.sim_config.model.num_experts = engine_router.experts();
  v.sim_config.model.num_experts_per_tok = engine_router.per_token();
  const ExpertRouting uniform(engine_router.experts(), engine_router.per_token(), 1, {});
  auto run = [](const ExpertRouting& r, const RoutedTokens& t) {
    return ExpertsRun{r.Touched(t), r.BusiestGpuSingleRowExperts(t)};
  };
  for (int32_t seqs = 2; seqs <= 12; ++seqs) {
    v.steps.push_back(Step(seqs, seqs, run(engine_router, engine_router.Sequences(seqs, 1)),
                           run(uniform, uniform.Sequences(seqs, 1))));
  }
  for (int32_t chunk = 16; chunk <= 256; chunk *= 2) {
    v.steps.push_back(Step(1, chunk, run(engine_router, engine_router.Sequences(1, chunk)),
                           run(uniform, uniform.Sequences(1, chunk))));
  }
  return v;
}

TEST(FitRoutingTest, RecoversTheEnginesRouterAndTheSimulatorsOwn) {
  ExpertRoutingOptions options;
  options.routing_skew = 0.5;
  options.routing_locality = 0.9;
  options.routing_favourites = 3;
  const LoadValidation v = RoutedRun(ExpertRouting(16, 2, 1, options));
  const std::optional<RoutingFit> fit = FitRouting(v);
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->decode_steps, 11);
  EXPECT_EQ(fit->chunk_steps, 5);
  EXPECT_NEAR(fit->skew_engine, 0.5, 0.01);
  EXPECT_NEAR(fit->locality_engine.locality, 0.9, 0.005);
  EXPECT_NEAR(fit->locality_engine.favourites, 3.0, 0.15);
  // The simulator's uniform, independent routing, recovered as such.
  EXPECT_NEAR(fit->skew_sim, 0.0, 0.01);
  EXPECT_NEAR(fit->locality_sim.locality, 0.0, 0.005);
}

TEST(FitRoutingTest, NoneForADenseModelOrWithoutCounts) {
  LoadValidation dense = RoutedRun(ExpertRouting(8, 2, 1, {}));
  dense.sim_config.model.num_experts = 0;
  dense.sim_config.model.num_experts_per_tok = 0;
  EXPECT_FALSE(FitRouting(dense).has_value());

  LoadValidation uncounted = RoutedRun(ExpertRouting(8, 2, 1, {}));
  for (StepComparison& s : uncounted.steps) s.experts_measured.reset();
  EXPECT_FALSE(FitRouting(uncounted).has_value());
}

}  // namespace
}  // namespace servelab
