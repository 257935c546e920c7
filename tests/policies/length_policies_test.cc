#include "policies/length_policies.h"

#include <gtest/gtest.h>

#include "policies/registry.h"
#include "tests/policies/policy_test_util.h"

namespace servelab {
namespace {

using testing::DrainOrder;
using testing::MakePolicy;
using testing::MakeRequest;
using testing::SchedulerHarness;

LengthPolicyOptions Rule(LengthRule rule, int64_t starvation_iters = 0, bool preemptive = false) {
  LengthPolicyOptions o;
  o.rule = rule;
  o.starvation_iters = starvation_iters;
  o.preemptive = preemptive;
  return o;
}

void Step(Policy& policy, int times = 1) {
  for (int i = 0; i < times; ++i) policy.OnStepDone(StepPlan{}, StepResult{}, 0);
}

TEST(LengthPoliciesTest, SjfOracleAdmitsShortestFirstFcfsOnTies) {
  LengthPolicy sjf(Rule(LengthRule::kSjf), 1);
  Request r[] = {MakeRequest(0, 0, 50), MakeRequest(1, 1, 10), MakeRequest(2, 2, 30),
                 MakeRequest(3, 3, 10)};
  for (Request& x : r) sjf.Enqueue(x, x.arrival);
  EXPECT_EQ(sjf.Name(), "sjf");
  ASSERT_EQ(sjf.Peek(4), &r[1]);
  ASSERT_EQ(sjf.Peek(4), &r[1]) << "Peek must not consume";
  EXPECT_EQ(sjf.NumWaiting(), 4u);
  EXPECT_EQ(DrainOrder(sjf), (std::vector<int64_t>{1, 3, 2, 0}));
  EXPECT_EQ(sjf.Peek(5), nullptr);
}

TEST(LengthPoliciesTest, LofAdmitsLongestFirstFcfsOnTies) {
  LengthPolicy lof(Rule(LengthRule::kLof), 1);
  Request r[] = {MakeRequest(0, 0, 10), MakeRequest(1, 1, 50), MakeRequest(2, 2, 30),
                 MakeRequest(3, 3, 50)};
  for (Request& x : r) lof.Enqueue(x, x.arrival);
  EXPECT_EQ(lof.Name(), "lof");
  EXPECT_EQ(DrainOrder(lof), (std::vector<int64_t>{1, 3, 2, 0}));
}

// A (100 tokens) has generated 50 when preempted; C (55) arrives meanwhile. SRPT ranks
// A by its remaining 50 and admits it first; SJF ranks by totals and admits C first.
TEST(LengthPoliciesTest, SrptRanksAPreemptedRequestByWhatRemains) {
  for (LengthRule rule : {LengthRule::kSrpt, LengthRule::kSjf}) {
    LengthPolicy policy(Rule(rule), 1);
    Request a = MakeRequest(0, 0, 100);
    Request c = MakeRequest(1, 1, 55);
    policy.Enqueue(a, 0);
    policy.Admitted(a, 0);
    a.state = RequestState::kRunning;
    a.num_generated = 50;
    policy.Enqueue(c, 1);
    a.state = RequestState::kPreempted;
    policy.Enqueue(a, 2);
    EXPECT_EQ(policy.PredictedRemaining(a), 50.0);
    EXPECT_EQ(policy.Predicted(a), 100.0) << "keeps its predicted total";
    EXPECT_EQ(DrainOrder(policy), rule == LengthRule::kSrpt ? (std::vector<int64_t>{0, 1})
                                                            : (std::vector<int64_t>{1, 0}));
  }
}

TEST(LengthPoliciesTest, PredictedRemainingHasAFloorOfOne) {
  LengthPolicy srpt(Rule(LengthRule::kSrpt), 1);  // oracle: predicts the true 10
  Request r = MakeRequest(0, 0, 10);
  srpt.Enqueue(r, 0);
  r.num_generated = 3;
  EXPECT_EQ(srpt.PredictedRemaining(r), 7.0);
  r.num_generated = 10;  // as an under-prediction would leave it
  EXPECT_EQ(srpt.PredictedRemaining(r), 1.0);
}

// A request's prediction depends on (seed, request) only: sjf and srpt built from the
// registry with the same seed assign it the same value, and it survives preemption.
TEST(LengthPoliciesTest, NoisyPredictionIsSharedAcrossPoliciesAndKeptOnPreemption) {
  auto sjf = MakePolicy("sjf", {{"predictor", "noisy"}, {"sigma", "0.7"}}, 77);
  auto srpt = MakePolicy("srpt", {{"predictor", "noisy"}, {"sigma", "0.7"}}, 77);
  ASSERT_TRUE(sjf.ok() && srpt.ok());
  Request x = MakeRequest(12, 0, 300);
  Request y = MakeRequest(12, 0, 300);
  (*sjf)->Enqueue(x, 0);
  (*srpt)->Enqueue(y, 0);
  const auto& sjf_policy = static_cast<const LengthPolicy&>(**sjf);
  const auto& srpt_policy = static_cast<const LengthPolicy&>(**srpt);
  EXPECT_EQ(sjf_policy.Predicted(x), srpt_policy.Predicted(y));
  EXPECT_NE(sjf_policy.Predicted(x), 300.0);
  const double predicted = sjf_policy.Predicted(x);
  (*sjf)->Admitted(x, 0);
  x.state = RequestState::kPreempted;
  x.num_generated = 20;
  (*sjf)->Enqueue(x, 1);
  EXPECT_EQ(sjf_policy.Predicted(x), predicted);
}

// starvation_iters = 3: L1 (1000 tokens) and L2 (500, enqueued one iteration later) are
// passed over by a stream of short requests; each is promoted after waiting through 3
// iterations, and promoted requests go FIFO (L1 before the shorter L2).
TEST(LengthPoliciesTest, StarvationGuardPromotesAfterNIterationsFifo) {
  LengthPolicy sjf(Rule(LengthRule::kSjf, /*starvation_iters=*/3), 1);
  Request l1 = MakeRequest(100, 0, 1000);
  Request l2 = MakeRequest(101, 0, 500);
  std::deque<Request> shorts;
  auto add_short = [&] {
    shorts.push_back(MakeRequest(static_cast<int64_t>(shorts.size()), 0, 5));
    sjf.Enqueue(shorts.back(), 0);
  };
  sjf.Enqueue(l1, 0);
  add_short();
  EXPECT_EQ(sjf.Peek(0)->id, 0);
  sjf.Admitted(shorts.back(), 0);
  Step(sjf);  // iteration 1 done: L1 passed over once
  sjf.Enqueue(l2, 0);
  for (int i = 0; i < 2; ++i) {
    add_short();
    ASSERT_EQ(sjf.Peek(0), &shorts.back()) << i;
    sjf.Admitted(shorts.back(), 0);
    Step(sjf);
  }
  add_short();  // L1 has waited through 3 iterations, L2 through 2
  EXPECT_EQ(sjf.Peek(0), &l1);
  EXPECT_FALSE(sjf.IsPromoted(l2));
  Step(sjf);  // L2's third
  EXPECT_TRUE(sjf.IsPromoted(l2));
  EXPECT_EQ(DrainOrder(sjf), (std::vector<int64_t>{100, 101, 3}));
}

TEST(LengthPoliciesTest, StarvationCountRestartsOnReEnqueueAndIsOffByDefault) {
  LengthPolicy guarded(Rule(LengthRule::kSrpt, 2), 1);
  Request long_one = MakeRequest(0, 0, 1000);
  Request short_one = MakeRequest(1, 0, 5);
  guarded.Enqueue(long_one, 0);
  Step(guarded, 2);
  ASSERT_TRUE(guarded.IsPromoted(long_one));
  guarded.Admitted(long_one, 0);
  EXPECT_FALSE(guarded.IsPromoted(long_one));
  long_one.state = RequestState::kPreempted;
  guarded.Enqueue(long_one, 0);
  guarded.Enqueue(short_one, 0);
  Step(guarded);
  EXPECT_EQ(guarded.Peek(0), &short_one) << "one iteration since re-enqueue: not starved";
  Step(guarded);
  EXPECT_EQ(guarded.Peek(0), &long_one);

  LengthPolicy unguarded(Rule(LengthRule::kSjf), 1);
  Request l = MakeRequest(0, 0, 1000);
  Request s = MakeRequest(1, 0, 5);
  unguarded.Enqueue(l, 0);
  unguarded.Enqueue(s, 0);
  Step(unguarded, 1000);
  EXPECT_EQ(unguarded.Peek(0), &s);
}

TEST(LengthPoliciesTest, ShouldPreemptForComparesPredictedRemaining) {
  auto sjf = MakePolicy("sjf");
  auto sjf_on = MakePolicy("sjf", {{"preemptive", "true"}});
  auto srpt = MakePolicy("srpt");
  auto srpt_off = MakePolicy("srpt", {{"preemptive", "false"}});
  ASSERT_TRUE(sjf.ok() && sjf_on.ok() && srpt.ok() && srpt_off.ok());
  Request w10 = MakeRequest(0, 0, 10), w14 = MakeRequest(1, 0, 14), w16 = MakeRequest(2, 0, 16),
          w20 = MakeRequest(3, 0, 20), running = MakeRequest(4, 0, 30);
  // Each policy predicts (oracle: the true lengths) when a request is enqueued there.
  for (Policy* p : {sjf->get(), sjf_on->get(), srpt->get(), srpt_off->get()}) {
    for (Request* w : {&w10, &w14, &w16, &w20, &running}) p->Enqueue(*w, 0);
  }
  running.num_generated = 10;  // remaining 20
  for (Policy* p : {sjf->get(), srpt_off->get()}) {
    EXPECT_FALSE(p->ShouldPreemptFor(w10, running));
  }
  for (Policy* p : {sjf_on->get(), srpt->get()}) {
    EXPECT_TRUE(p->ShouldPreemptFor(w10, running));
    EXPECT_FALSE(p->ShouldPreemptFor(w20, running)) << "equal: no";
    running.num_generated = 15;  // remaining 15
    EXPECT_TRUE(p->ShouldPreemptFor(w14, running));
    EXPECT_FALSE(p->ShouldPreemptFor(w16, running));
    running.num_generated = 10;
  }
}

TEST(LengthPoliciesTest, VictimIsTheLongestRemainingLatestArrival) {
  LengthPolicy srpt(Rule(LengthRule::kSrpt), 1);
  Request r[] = {MakeRequest(0, 0, 10), MakeRequest(1, 1, 40), MakeRequest(2, 2, 60),
                 MakeRequest(3, 3, 5)};
  for (Request& x : r) srpt.Enqueue(x, 0);
  DrainOrder(srpt);
  r[2].num_generated = 20;  // remaining 40, ties with r[1]; arrived later
  std::vector<Request*> running = {&r[0], &r[1], &r[2], &r[3]};
  EXPECT_EQ(srpt.PickVictim(running, 0), &r[2]);
  r[2].num_generated = 21;
  EXPECT_EQ(srpt.PickVictim(running, 0), &r[1]);

  LengthPolicy lof(Rule(LengthRule::kLof), 1);
  std::vector<Request*> by_arrival = {&r[3], &r[0], &r[2], &r[1]};
  EXPECT_EQ(lof.PickVictim(by_arrival, 0), &r[3]);
}

TEST(LengthPoliciesTest, RegistryParameterErrors) {
  auto unknown = MakePolicy("sjf", {{"starvation_iter", "5"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "exp.yaml:4: scheduler.policy: unknown parameter 'starvation_iter' for 'sjf' (did you "
            "mean 'starvation_iters'?). Its parameters are: predictor, starvation_iters, "
            "preemptive");
  auto wrong_kind = MakePolicy("srpt", {{"predictor", "bucket"}, {"sigma", "0.3"}});
  ASSERT_FALSE(wrong_kind.ok());
  EXPECT_EQ(wrong_kind.status().message(),
            "exp.yaml:5: scheduler.policy: unknown parameter 'sigma' for 'srpt'. Its "
            "parameters are: predictor, p, starvation_iters, preemptive");
  auto typo = MakePolicy("sjf", {{"predictor", "noisey"}});
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().message(),
            "exp.yaml:4: scheduler.policy.predictor: 'noisey' is not one of: oracle, noisy, "
            "bucket (did you mean 'noisy'?)");
  auto bad_p = MakePolicy("sjf", {{"predictor", "bucket"}, {"p", "1.5"}});
  ASSERT_FALSE(bad_p.ok());
  EXPECT_EQ(bad_p.status().message(),
            "exp.yaml:5: scheduler.policy.p: value 1.5 out of range: must be in [0, 1]");
  auto lof = MakePolicy("lof", {{"predictor", "oracle"}});
  ASSERT_FALSE(lof.ok());
  EXPECT_EQ(lof.status().message(),
            "exp.yaml:4: scheduler.policy: unknown parameter 'predictor' for 'lof'; it takes "
            "no parameters");
  for (const char* name : {"sjf", "srpt", "lof"}) {
    auto made = MakePolicy(name);
    ASSERT_TRUE(made.ok()) << name;
    EXPECT_EQ((*made)->Name(), name);
  }
}

// max_num_seqs = 1: one request runs at a time, so finishing order is admission order.
// Outputs 8, 2, 5, 1 (all at t = 0): SJF runs 3 (1 step), 1 (2), 2 (5), 0 (8).
TEST(LengthPoliciesSchedulerTest, SjfRunsShortestFirstInRealSteps) {
  SchedulerHarness h(std::make_unique<LengthPolicy>(Rule(LengthRule::kSjf), 1), 4, 100, 64, 1);
  for (int32_t out : {8, 2, 5, 1}) h.Add(4, out);
  std::vector<std::pair<int64_t, int>> finished;  // (id, step)
  for (int step = 1; step <= 16; ++step) {
    h.Plan();
    for (int64_t id : h.Commit()) finished.push_back({id, step});
  }
  EXPECT_EQ(finished, (std::vector<std::pair<int64_t, int>>{{3, 1}, {1, 3}, {2, 8}, {0, 16}}));
  EXPECT_FALSE(h.Sched().HasWork());
}

TEST(LengthPoliciesSchedulerTest, LofRunsLongestFirstInRealSteps) {
  SchedulerHarness h(std::make_unique<LengthPolicy>(Rule(LengthRule::kLof), 1), 4, 100, 64, 1);
  for (int32_t out : {3, 1, 2}) h.Add(4, out);
  std::vector<int64_t> order;
  while (h.Sched().HasWork()) {
    h.Plan();
    for (int64_t id : h.Commit()) order.push_back(id);
  }
  EXPECT_EQ(order, (std::vector<int64_t>{0, 2, 1}));
}

// Four 2-token blocks. A (7 output tokens: 8 cached at most, all 4 blocks) runs alone,
// then B (3 tokens) joins; at step 4 A needs a fifth block: SRPT preempts A (remaining
// 7 - 3 = 4 > B's 3 - 2 = 1) where FCFS would preempt B.
TEST(LengthPoliciesSchedulerTest, SrptPreemptsTheLongestRemaining) {
  SchedulerHarness h(std::make_unique<LengthPolicy>(Rule(LengthRule::kSrpt), 1), 2, 4, 64, 8);
  Request& a = h.Add(2, 7);
  EXPECT_EQ(h.Plan(), std::vector<int64_t>{0});
  h.Commit();
  Request& b = h.Add(2, 3);
  EXPECT_EQ(h.Plan(), (std::vector<int64_t>{0, 1}));
  h.Commit();
  EXPECT_EQ(h.Plan(), (std::vector<int64_t>{0, 1}));
  h.Commit();
  EXPECT_EQ(h.Plan(), std::vector<int64_t>{1});
  EXPECT_EQ(a.state, RequestState::kPreempted);
  EXPECT_EQ(h.Commit(), std::vector<int64_t>{1});
  EXPECT_EQ(b.state, RequestState::kFinished);
  EXPECT_EQ(h.Plan(), std::vector<int64_t>{0});
  EXPECT_EQ(h.LastPlan().seqs[0].num_new_tokens, 5);  // prompt 2 + generated 3
  EXPECT_EQ(static_cast<const LengthPolicy&>(h.Sched().GetPolicy()).PredictedRemaining(a), 4.0);
}

// max_num_seqs = 1. A (10 tokens) runs; B (2 tokens) arrives. SRPT (preemptive by
// default): B's remaining 2 < A's 9, so B displaces A at once. SJF (not preemptive by
// default): B waits.
TEST(LengthPoliciesSchedulerTest, SrptDisplacesALongerRunningRequestSjfDoesNot) {
  for (LengthRule rule : {LengthRule::kSrpt, LengthRule::kSjf}) {
    const bool srpt = rule == LengthRule::kSrpt;
    SchedulerHarness h(std::make_unique<LengthPolicy>(Rule(rule, 0, srpt), 1), 4, 100, 64, 1);
    Request& a = h.Add(4, 10);
    EXPECT_EQ(h.Plan(), std::vector<int64_t>{0});
    h.Commit();
    h.Add(4, 2);
    EXPECT_EQ(h.Plan(), std::vector<int64_t>{srpt ? 1 : 0});
    EXPECT_EQ(a.num_preemptions, srpt ? 1 : 0);
  }
}

}  // namespace
}  // namespace servelab
