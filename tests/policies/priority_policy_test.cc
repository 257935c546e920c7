#include "policies/priority_policy.h"

#include <gtest/gtest.h>

#include "policies/registry.h"
#include "tests/policies/policy_test_util.h"

namespace servelab {
namespace {

using testing::DrainOrder;
using testing::MakePolicy;
using testing::MakeRequest;
using testing::SchedulerHarness;

constexpr TimeNs kSec = kNsPerSec;

TEST(PriorityPolicyTest, SmallestClassFirstFcfsWithinAClass) {
  PriorityPolicy policy({});
  Request a = MakeRequest(0, 0, 5, /*priority=*/2);
  Request b = MakeRequest(1, 1, 5, 0);
  Request c = MakeRequest(2, 2, 5, 1);
  Request d = MakeRequest(3, 3, 5, 0);
  Request e = MakeRequest(4, 4, 5, 2);
  for (Request* r : {&a, &b, &c, &d, &e}) policy.Enqueue(*r, r->arrival);
  EXPECT_EQ(policy.NumWaiting(), 5u);
  ASSERT_EQ(policy.Peek(5), &b);
  ASSERT_EQ(policy.Peek(5), &b) << "Peek must not consume";
  EXPECT_EQ(policy.NumWaiting(), 5u);
  EXPECT_EQ(DrainOrder(policy, 5), (std::vector<int64_t>{1, 3, 2, 0, 4}));
  EXPECT_EQ(policy.NumWaiting(), 0u);
  EXPECT_EQ(policy.Peek(6), nullptr);
}

TEST(PriorityPolicyTest, APreemptedRequestRejoinsItsClassByArrival) {
  PriorityPolicy policy({});
  Request b = MakeRequest(1, 1, 5, 0);
  Request low = MakeRequest(2, 2, 5, 1);
  policy.Enqueue(b, 1);
  policy.Enqueue(low, 2);
  policy.Admitted(*policy.Peek(2), 2);  // b runs
  Request d = MakeRequest(3, 3, 5, 0);
  policy.Enqueue(d, 3);
  b.state = RequestState::kPreempted;
  policy.Enqueue(b, 4);
  EXPECT_EQ(DrainOrder(policy, 4), (std::vector<int64_t>{1, 3, 2}));
}

// aging_s = 10: a class-3 request that arrived at 0 has effective class 3 - floor(t/10).
// A class-0 request arriving at 25 s wins until t = 30 s, when the old one reaches class 0
// too and wins the tie by its earlier arrival. The newer one ages as well (one class at
// 35 s, 45 s, ...), so with arrivals 2.5 intervals apart the lead alternates at each tick.
TEST(PriorityPolicyTest, AgingPromotesALowClassOneStepPerAgingInterval) {
  PriorityPolicy policy({.preemptive = false, .aging_s = 10.0});
  Request low = MakeRequest(0, 0, 5, 3);
  Request high = MakeRequest(1, 25 * kSec, 5, 0);
  policy.Enqueue(low, 0);
  EXPECT_EQ(policy.EffectiveClass(low, 9 * kSec), 3);
  EXPECT_EQ(policy.EffectiveClass(low, 10 * kSec), 2);
  EXPECT_EQ(policy.EffectiveClass(low, 29 * kSec), 1);
  policy.Enqueue(high, 25 * kSec);
  EXPECT_EQ(policy.Peek(25 * kSec), &high);
  EXPECT_EQ(policy.Peek(30 * kSec - 1), &high);
  EXPECT_EQ(policy.Peek(30 * kSec), &low);
  EXPECT_EQ(policy.Peek(35 * kSec), &high);  // 3 - 3 = 0 vs 0 - 1 = -1
  EXPECT_EQ(policy.Peek(40 * kSec), &low);   // -1 vs -1: earlier arrival
  EXPECT_EQ(policy.EffectiveClass(low, 45 * kSec), -1);
  EXPECT_EQ(policy.EffectiveClass(high, 45 * kSec), -2);
  EXPECT_EQ(DrainOrder(policy, 40 * kSec), (std::vector<int64_t>{0, 1}));
}

TEST(PriorityPolicyTest, WithoutAgingALowClassWaitsForever) {
  PriorityPolicy policy({});
  Request low = MakeRequest(0, 0, 5, 3);
  Request high = MakeRequest(1, 1000 * kSec, 5, 0);
  policy.Enqueue(low, 0);
  policy.Enqueue(high, 1000 * kSec);
  EXPECT_EQ(policy.Peek(1'000'000 * kSec), &high);
}

TEST(PriorityPolicyTest, ShouldPreemptForTruthTable) {
  PriorityPolicy off({});
  PriorityPolicy on({.preemptive = true});
  const Request c0 = MakeRequest(0, 5, 5, 0);
  const Request c1 = MakeRequest(1, 0, 5, 1);
  const Request c1_earlier = MakeRequest(2, -1, 5, 1);
  const Request c2 = MakeRequest(3, 0, 5, 2);
  EXPECT_FALSE(off.ShouldPreemptFor(c0, c1));
  EXPECT_TRUE(on.ShouldPreemptFor(c0, c1));
  EXPECT_TRUE(on.ShouldPreemptFor(c0, c2));
  EXPECT_FALSE(on.ShouldPreemptFor(c1_earlier, c1)) << "same class: never";
  EXPECT_FALSE(on.ShouldPreemptFor(c2, c1));
  EXPECT_FALSE(on.ShouldPreemptFor(c1, c0));
}

// With aging, both sides are compared at the latest time the policy saw (here Peek's).
TEST(PriorityPolicyTest, PreemptionComparesEffectiveClassesAtTheLatestTime) {
  PriorityPolicy policy({.preemptive = true, .aging_s = 10.0});
  Request waiting = MakeRequest(0, 0, 5, 2);
  const Request running = MakeRequest(1, 15 * kSec, 5, 1);
  policy.Enqueue(waiting, 0);
  ASSERT_EQ(policy.Peek(15 * kSec), &waiting);
  EXPECT_FALSE(policy.ShouldPreemptFor(waiting, running));  // 2 - 1 = 1 vs 1
  ASSERT_EQ(policy.Peek(20 * kSec), &waiting);
  EXPECT_TRUE(policy.ShouldPreemptFor(waiting, running));   // 2 - 2 = 0 vs 1
  // The running request ages too: at 35 s it is at 1 - 2 = -1, the waiting one at -1.
  ASSERT_EQ(policy.Peek(35 * kSec), &waiting);
  EXPECT_FALSE(policy.ShouldPreemptFor(waiting, running));
}

TEST(PriorityPolicyTest, VictimIsTheLeastUrgentClassLatestArrival) {
  PriorityPolicy policy({});
  Request a = MakeRequest(0, 0, 5, 0);
  Request b = MakeRequest(1, 1, 5, 2);
  Request c = MakeRequest(2, 3, 5, 2);
  Request d = MakeRequest(3, 5, 5, 1);
  std::vector<Request*> running = {&a, &b, &c, &d};
  EXPECT_EQ(policy.PickVictim(running, 10), &c);
  std::vector<Request*> no_low = {&a, &d};
  EXPECT_EQ(policy.PickVictim(no_low, 10), &d);
  std::vector<Request*> alone = {&a};
  EXPECT_EQ(policy.PickVictim(alone, 10), &a);
}

TEST(PriorityPolicyTest, VictimUsesEffectiveClassesUnderAging) {
  PriorityPolicy policy({.preemptive = false, .aging_s = 10.0});
  Request old_low = MakeRequest(0, 0, 5, 1);          // at 30 s: 1 - 3 = -2
  Request new_high = MakeRequest(1, 29 * kSec, 5, 0);  // at 30 s: 0
  std::vector<Request*> running = {&old_low, &new_high};
  EXPECT_EQ(policy.PickVictim(running, 30 * kSec), &new_high);
}

// Thousands waiting in a few classes: order is still exact (classes, then arrival).
TEST(PriorityPolicyTest, ManyWaitersInFewClasses) {
  PriorityPolicy policy({});
  std::deque<Request> requests;
  for (int i = 0; i < 3000; ++i) {
    requests.push_back(MakeRequest(i, i, 5, (i * 7) % 3));
    policy.Enqueue(requests.back(), i);
  }
  std::vector<int64_t> order = DrainOrder(policy, 3000);
  ASSERT_EQ(order.size(), 3000u);
  for (size_t k = 1; k < order.size(); ++k) {
    const Request& prev = requests[order[k - 1]];
    const Request& cur = requests[order[k]];
    ASSERT_TRUE(prev.priority < cur.priority ||
                (prev.priority == cur.priority && prev.arrival < cur.arrival))
        << k;
  }
}

TEST(PriorityPolicyTest, RegistryBuildsItAndRejectsUnknownParameters) {
  auto ok = MakePolicy("priority", {{"preemptive", "true"}, {"aging_s", "2.5"}});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ((*ok)->Name(), "priority");

  auto typo = MakePolicy("priority", {{"aging", "3"}});
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().message(),
            "exp.yaml:4: scheduler.policy: unknown parameter 'aging' for 'priority' (did you "
            "mean 'aging_s'?). Its parameters are: preemptive, aging_s");

  auto negative = MakePolicy("priority", {{"aging_s", "-1"}});
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().message(),
            "exp.yaml:4: scheduler.policy.aging_s: value -1 out of range: must be >= 0");
}

// Budget 4 tokens, 4-token prompts, one output token: each step admits exactly one
// request, so the plans spell out the admission order 1, 3 (class 0), 2 (class 1), 0.
TEST(PriorityPolicySchedulerTest, AdmitsOneClassAtATimeInRealSteps) {
  SchedulerHarness h(std::make_unique<PriorityPolicy>(PriorityPolicyOptions{}), 4, 100, 4, 8);
  h.Add(4, 1, /*priority=*/2);
  h.Add(4, 1, 0);
  h.Add(4, 1, 1);
  h.Add(4, 1, 0);
  for (int64_t expected : {1, 3, 2, 0}) {
    EXPECT_EQ(h.Plan(), std::vector<int64_t>{expected});
    EXPECT_EQ(h.Commit(), std::vector<int64_t>{expected});
  }
  EXPECT_FALSE(h.Sched().HasWork());
}

// Four 2-token blocks. A (class 1) runs alone, then B (class 0) joins; at step 4 A needs
// a fifth block. FCFS would preempt B (latest admitted); priority preempts A itself.
TEST(PriorityPolicySchedulerTest, MemoryPressurePreemptsTheLeastUrgentClass) {
  SchedulerHarness h(std::make_unique<PriorityPolicy>(PriorityPolicyOptions{}), 2, 4, 64, 8);
  Request& a = h.Add(2, 7, /*priority=*/1);  // 8 tokens cached at most: all 4 blocks
  EXPECT_EQ(h.Plan(), std::vector<int64_t>{0});  // A: prefill 2 tokens, 1 block
  h.Commit();
  Request& b = h.Add(2, 3, /*priority=*/0);
  EXPECT_EQ(h.Plan(), (std::vector<int64_t>{0, 1}));  // A grows to 2 blocks, B takes 1
  h.Commit();
  EXPECT_EQ(h.Plan(), (std::vector<int64_t>{0, 1}));  // B grows to 2 blocks: 4 used
  h.Commit();
  EXPECT_EQ(h.Plan(), std::vector<int64_t>{1});
  EXPECT_EQ(a.state, RequestState::kPreempted);
  EXPECT_EQ(h.Commit(), std::vector<int64_t>{1});  // B's third token
  EXPECT_EQ(b.state, RequestState::kFinished);
  // A re-prefills prompt (2) + generated (3) tokens and samples its 4th.
  EXPECT_EQ(h.Plan(), std::vector<int64_t>{0});
  EXPECT_EQ(h.LastPlan().seqs[0].num_new_tokens, 5);
}

// max_num_seqs = 1. A (class 1) runs; B (class 0) arrives. Preemptive: at the next step
// B displaces A, finishes, and A re-prefills its prompt and its one token. Not
// preemptive: B waits for A.
TEST(PriorityPolicySchedulerTest, PreemptiveDisplacesALessUrgentRunningRequest) {
  for (bool preemptive : {true, false}) {
    SchedulerHarness h(std::make_unique<PriorityPolicy>(PriorityPolicyOptions{preemptive, 0.0}),
                       4, 100, 64, 1);
    Request& a = h.Add(4, 3, /*priority=*/1);
    EXPECT_EQ(h.Plan(), std::vector<int64_t>{0});
    h.Commit();
    h.Add(4, 2, /*priority=*/0);
    if (preemptive) {
      EXPECT_EQ(h.Plan(), std::vector<int64_t>{1});
      EXPECT_EQ(a.state, RequestState::kPreempted);
      EXPECT_TRUE(h.Commit().empty());
      EXPECT_EQ(h.Plan(), std::vector<int64_t>{1});
      EXPECT_EQ(h.Commit(), std::vector<int64_t>{1});
      EXPECT_EQ(h.Plan(), std::vector<int64_t>{0});
      EXPECT_EQ(h.LastPlan().seqs[0].num_new_tokens, 5);
    } else {
      EXPECT_EQ(h.Plan(), std::vector<int64_t>{0});
      EXPECT_EQ(a.num_preemptions, 0);
    }
  }
}

}  // namespace
}  // namespace servelab
