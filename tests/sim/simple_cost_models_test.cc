#include "sim/simple_cost_models.h"

#include <gtest/gtest.h>

#include <deque>

namespace servelab {
namespace {

// A plan of seqs given as (cached tokens, new tokens); Requests live in `requests`.
StepPlan MakePlan(std::deque<Request>& requests,
                  std::initializer_list<std::pair<int32_t, int32_t>> seqs) {
  StepPlan plan;
  for (const auto& [cached, n] : seqs) {
    Request& r = requests.emplace_back();
    r.prompt_len = cached + n;
    plan.seqs.push_back(ScheduledRequest{&r, n, cached, true});
  }
  return plan;
}

TEST(ConstantCostModelTest, EveryStepTakesStepMs) {
  ConstantCostModelOptions config;
  config.step_ms = 12.5;
  const ConstantCostModel model(config);
  std::deque<Request> requests;
  EXPECT_EQ(model.StepTime(MakePlan(requests, {{0, 1}})), 12'500'000);
  EXPECT_EQ(model.StepTime(MakePlan(requests, {{0, 4096}, {100, 1}})), 12'500'000);
  EXPECT_EQ(model.Name(), "constant");
}

TEST(LinearCostModelTest, ExactValues) {
  LinearCostModelOptions config;
  config.base_ms = 5.0;
  config.per_token_ms = 0.05;
  config.per_context_token_ms = 0.001;
  const LinearCostModel model(config);
  std::deque<Request> requests;
  // Seqs (cached, new): (0, 100), (50, 1), (200, 1):
  // new tokens 102; contexts 100 + 51 + 201 = 352.
  // 5 + 0.05 * 102 + 0.001 * 352 = 5 + 5.1 + 0.352 = 10.452 ms.
  EXPECT_EQ(model.StepTime(MakePlan(requests, {{0, 100}, {50, 1}, {200, 1}})), 10'452'000);
  EXPECT_EQ(model.Name(), "linear");
}

TEST(LinearCostModelTest, PaddingCountsOneToken) {
  LinearCostModelOptions config;
  config.base_ms = 1.0;
  config.per_token_ms = 0.5;
  config.per_context_token_ms = 0.0;
  const LinearCostModel model(config);
  std::deque<Request> requests;
  StepPlan plan = MakePlan(requests, {{30, 1}, {40, 0}});
  plan.seqs[1].is_padding = true;  // carried, finished: costs one decode token
  EXPECT_EQ(model.StepTime(plan), 2'000'000);  // 1 + 0.5 * 2
}

TEST(LinearCostModelTest, RoundsToTheNearestNanosecond) {
  LinearCostModelOptions config;
  config.base_ms = 0.0;
  config.per_token_ms = 1.0 / 3.0;
  config.per_context_token_ms = 0.0;
  const LinearCostModel model(config);
  std::deque<Request> requests;
  EXPECT_EQ(model.StepTime(MakePlan(requests, {{0, 1}})), 333'333);
  EXPECT_EQ(model.StepTime(MakePlan(requests, {{0, 2}})), 666'667);
}

}  // namespace
}  // namespace servelab
