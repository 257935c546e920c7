#include "policies/vtc_policy.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/kv_cache_manager.h"
#include "core/scheduler.h"
#include "policies/fcfs_policy.h"
#include "policies/registry.h"

namespace servelab {
namespace {

Request Make(int64_t id, int32_t client, int32_t prompt) {
  Request r;
  r.id = id;
  r.client = client;
  r.prompt_len = prompt;
  r.target_output_len = 100;
  return r;
}

// One step in which each listed request samples a token (plus, for `chunk`, a prefill
// chunk that samples nothing, and a static-batching padding seq: neither is charged).
StepPlan Emitting(const std::vector<Request*>& emitting, Request* chunk = nullptr,
                  Request* padding = nullptr) {
  StepPlan plan;
  for (Request* r : emitting) plan.seqs.push_back({r, 1, r->prompt_len, true, false});
  if (chunk != nullptr) plan.seqs.push_back({chunk, 8, 0, false, false});
  if (padding != nullptr) plan.seqs.push_back({padding, 1, 10, false, true});
  return plan;
}

void Admit(VtcPolicy& policy, Request& expected) {
  ASSERT_EQ(policy.Peek(0), &expected) << "expected request " << expected.id;
  policy.Admitted(expected, 0);
  expected.state = RequestState::kRunning;
}

// Clients A=0, B=1, C=2, weights 1, input_weight 1, output_weight 2. Hand-computed:
//   A1(10), A2(10) arrive      A lifts to nothing (no reference yet): A=0
//   admit A1                   A = 10
//   A1 samples a token         A = 12 (a chunk and a padding seq are not charged)
//   B1(4) arrives              B lifts to min over backlogged {A=12}: B = 12
//   tie A=B=12                 lowest index: admit A2, A = 22; A's queue empties
//   admit B1                   B = 16; B's queue empties last
//   C1(5) arrives, none wait   C lifts to the last client to leave (B): C = 16
//   A3(3) arrives              lift to min{C=16} never lowers: A stays 22
//   admit C1 (16 < 22)         C = 21; then A3: A = 25
TEST(VtcPolicyTest, CountersLiftAndAdmissionOrderOnAScriptedArrivalPattern) {
  VtcPolicy policy(VtcPolicyOptions{}, {1.0, 1.0, 1.0});
  Request a1 = Make(1, 0, 10), a2 = Make(2, 0, 10), b1 = Make(3, 1, 4);
  Request c1 = Make(4, 2, 5), a3 = Make(5, 0, 3);
  policy.Enqueue(a1, 0);
  policy.Enqueue(a2, 0);
  EXPECT_EQ(policy.Counter(0), 0.0);
  Admit(policy, a1);
  EXPECT_EQ(policy.Counter(0), 10.0);
  policy.OnStepDone(Emitting({&a1}, &a2, &b1), StepResult{}, 0);
  EXPECT_EQ(policy.Counter(0), 12.0);
  EXPECT_EQ(policy.Counter(1), 0.0);

  policy.Enqueue(b1, 0);
  EXPECT_EQ(policy.Counter(1), 12.0);
  EXPECT_EQ(policy.Peek(0), &a2);
  EXPECT_EQ(policy.Peek(0), &a2) << "Peek must not consume";
  Admit(policy, a2);
  EXPECT_EQ(policy.Counter(0), 22.0);
  Admit(policy, b1);
  EXPECT_EQ(policy.Counter(1), 16.0);
  EXPECT_EQ(policy.Peek(0), nullptr);
  EXPECT_EQ(policy.NumWaiting(), 0u);

  policy.Enqueue(c1, 0);
  EXPECT_EQ(policy.Counter(2), 16.0) << "lifted to the last client that left (B)";
  policy.Enqueue(a3, 0);
  EXPECT_EQ(policy.Counter(0), 22.0) << "the lift never lowers a counter";
  Admit(policy, c1);
  EXPECT_EQ(policy.Counter(2), 21.0);
  Admit(policy, a3);
  EXPECT_EQ(policy.Counter(0), 25.0);

  // Output charges: 2 per sampled token, per client.
  policy.OnStepDone(Emitting({&a1, &a2, &b1, &c1}), StepResult{}, 0);
  EXPECT_EQ(policy.Counter(0), 29.0);
  EXPECT_EQ(policy.Counter(1), 18.0);
  EXPECT_EQ(policy.Counter(2), 23.0);
}

// A client that was never backlogged while others were served cannot bank the idle
// time: it joins at the smallest backlogged counter, not at 0.
TEST(VtcPolicyTest, LiftIsRelativeToBackloggedClientsOnly) {
  VtcPolicy policy(VtcPolicyOptions{}, {1.0, 1.0, 1.0});
  Request a1 = Make(1, 0, 50), a2 = Make(2, 0, 1), b1 = Make(3, 1, 30), b2 = Make(4, 1, 1);
  Request c1 = Make(5, 2, 1);
  policy.Enqueue(a1, 0);
  policy.Enqueue(a2, 0);
  Admit(policy, a1);  // A = 50, still backlogged (a2)
  policy.Enqueue(b1, 0);  // B lifted to 50
  policy.Enqueue(b2, 0);
  EXPECT_EQ(policy.Counter(1), 50.0);
  Admit(policy, a2);  // tie 50 = 50: A (lowest index); A = 51, A's queue empties
  Admit(policy, b1);  // B = 80, B still backlogged (b2)
  // A is not backlogged, so its 51 is no reference: C lifts to B's 80.
  policy.Enqueue(c1, 0);
  EXPECT_EQ(policy.Counter(2), 80.0);
}

// Weighted VTC: weight 2 halves the charges, so a backlogged client of weight 2 is
// admitted twice as often as one of weight 1 (equal 4-token prompts):
// (A,B) = (0,0) A (4,0) B (4,2) B (4,4) A (8,4) B (8,6) B (8,8) A (12,8) B (12,10) B.
TEST(VtcPolicyTest, ClientWeightsDivideCharges) {
  VtcPolicy policy(VtcPolicyOptions{}, {1.0, 2.0});
  std::deque<Request> requests;
  for (int i = 0; i < 6; ++i) {
    requests.push_back(Make(i, 0, 4));
    policy.Enqueue(requests.back(), 0);
    requests.push_back(Make(100 + i, 1, 4));
    policy.Enqueue(requests.back(), 0);
  }
  std::string order;
  for (int i = 0; i < 9; ++i) {
    Request* r = policy.Peek(0);
    ASSERT_NE(r, nullptr);
    order += r->client == 0 ? 'A' : 'B';
    policy.Admitted(*r, 0);
  }
  EXPECT_EQ(order, "ABBABBABB");
  EXPECT_EQ(policy.Counter(0), 12.0);
  EXPECT_EQ(policy.Counter(1), 12.0);
  Request* b = &requests[1];
  policy.OnStepDone(Emitting({&requests[0], b}), StepResult{}, 0);
  EXPECT_EQ(policy.Counter(0), 14.0);
  EXPECT_EQ(policy.Counter(1), 13.0);
}

TEST(VtcPolicyTest, PreemptedRequestReturnsToItsClientsFrontUncharged) {
  VtcPolicy policy(VtcPolicyOptions{}, {1.0, 1.0});
  Request a1 = Make(1, 0, 10), a2 = Make(2, 0, 10), b1 = Make(3, 1, 1);
  policy.Enqueue(a1, 0);
  policy.Enqueue(a2, 0);
  Admit(policy, a1);  // A = 10
  a1.state = RequestState::kPreempted;
  policy.Enqueue(a1, 0);
  EXPECT_EQ(policy.NumWaiting(0), 2u);
  Admit(policy, a1);  // ahead of a2, and its prompt is not charged again
  EXPECT_EQ(policy.Counter(0), 10.0);
  policy.Enqueue(b1, 0);  // lifted to A's 10
  EXPECT_EQ(policy.Counter(1), 10.0);
}

TEST(VtcPolicyTest, VictimIsTheLatestAdmittedOfTheMostServedClient) {
  VtcPolicy policy(VtcPolicyOptions{}, {1.0, 1.0, 1.0});
  Request a1 = Make(1, 0, 30), b1 = Make(2, 1, 10), a2 = Make(3, 0, 1), c1 = Make(4, 2, 5);
  policy.Enqueue(a1, 0);
  Admit(policy, a1);  // A = 30
  policy.Enqueue(b1, 0);
  Admit(policy, b1);  // B lifted to... nothing waits, last to leave is A: B = 30 + 10
  policy.Enqueue(a2, 0);
  Admit(policy, a2);  // A: lifted to B (last to leave) = 40, + 1 = 41
  policy.Enqueue(c1, 0);
  Admit(policy, c1);  // C = 41 + 5 = 46
  ASSERT_EQ(policy.Counter(0), 41.0);
  ASSERT_EQ(policy.Counter(1), 40.0);
  ASSERT_EQ(policy.Counter(2), 46.0);
  std::vector<Request*> running = {&a1, &b1, &a2, &c1};
  EXPECT_EQ(policy.PickVictim(running, 0), &c1);
  std::vector<Request*> without_c = {&a1, &b1, &a2};
  EXPECT_EQ(policy.PickVictim(without_c, 0), &a2) << "latest admitted of client A";
  // Equal counters: the higher client index is evicted (admission favours the lower).
  policy.OnStepDone(Emitting({&b1}), StepResult{}, 0);  // B = 42
  policy.OnStepDone(Emitting({&a1}), StepResult{}, 0);  // A = 43
  policy.OnStepDone(Emitting({&b1}), StepResult{}, 0);  // B = 44
  policy.OnStepDone(Emitting({&a2}), StepResult{}, 0);  // A = 45
  policy.OnStepDone(Emitting({&b1}), StepResult{}, 0);  // B = 46
  ASSERT_EQ(policy.Counter(1), 46.0);
  std::vector<Request*> tie = {&c1, &b1};
  EXPECT_EQ(policy.PickVictim(tie, 0), &c1);
  EXPECT_FALSE(policy.ShouldPreemptFor(a1, c1));
}

TEST(VtcPolicyTest, RegistryReadsWeightsAndRejectsUnknownOrBadParameters) {
  PolicyContext context;
  context.clients = {{"a", 0, 1.0}, {"b", 0, 1.0}};
  NamedParams ok{"vtc", {{"input_weight", "0", "x.yaml:3"}}, "scheduler.policy", "x.yaml:2", ""};
  auto made = BuiltinPolicies().Make(ok, context);
  ASSERT_TRUE(made.ok()) << made.status().message();
  Request a = Make(1, 0, 100);
  (*made)->Enqueue(a, 0);
  (*made)->Admitted(a, 0);
  EXPECT_EQ(static_cast<VtcPolicy&>(**made).Counter(0), 0.0) << "input_weight 0";

  NamedParams typo{"vtc", {{"output_weigth", "3", "x.yaml:4"}}, "scheduler.policy", "x.yaml:2", ""};
  auto bad = BuiltinPolicies().Make(typo, context);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("x.yaml:4: scheduler.policy: unknown parameter "
                                        "'output_weigth' for 'vtc' (did you mean "
                                        "'output_weight'?)"),
            std::string::npos)
      << bad.status().message();

  NamedParams negative{"vtc", {{"input_weight", "-1", "x.yaml:5"}}, "scheduler.policy", "", ""};
  EXPECT_FALSE(BuiltinPolicies().Make(negative, context).ok());

  context.clients[1].weight = 0.0;
  NamedParams plain{"vtc", {}, "scheduler.policy", "x.yaml:2", ""};
  auto zero = BuiltinPolicies().Make(plain, context);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("client 'b' has weight 0"), std::string::npos)
      << zero.status().message();
}

// Scheduler-level: a heavy client (3 of every 4 arrivals) and a light one, both
// backlogged throughout. FCFS serves them in proportion to demand (~3:1); VTC equalises
// the weighted service (prompt tokens at admission + 2 per output token). Each step is
// 1 ms; 4 sequences run at once, so ~50 of the 400 requests finish in 400 steps.
struct FairnessRun {
  double service[2] = {0, 0};  // weighted tokens per client, computed from the requests
  double counters[2] = {0, 0};  // VTC's own counters (VTC runs only)
  size_t waiting[2] = {0, 0};
};

FairnessRun RunHeavyAndLight(bool vtc) {
  SchedulerConfig config;
  config.block_size = 16;
  config.max_num_batched_tokens = 256;
  config.max_num_seqs = 4;
  KvCacheManager kv(/*num_blocks=*/1000, config.block_size, /*watermark_blocks=*/0);
  VtcPolicy* vtc_policy = nullptr;
  std::unique_ptr<Policy> policy;
  if (vtc) {
    auto owned = std::make_unique<VtcPolicy>(VtcPolicyOptions{}, std::vector<double>{1.0, 1.0});
    vtc_policy = owned.get();
    policy = std::move(owned);
  } else {
    policy = std::make_unique<FcfsPolicy>();
  }
  Scheduler scheduler(config, 4096, std::move(policy), &kv);
  std::deque<Request> requests;
  for (int i = 0; i < 400; ++i) {
    Request& r = requests.emplace_back();
    r.id = i;
    r.client = i % 4 == 3 ? 1 : 0;  // H H H L H H H L ...
    r.prompt_len = 32;
    r.target_output_len = 32;
    EXPECT_TRUE(scheduler.AddRequest(r, 0));
  }
  TimeNs now = 0;
  for (int step = 0; step < 400; ++step) {
    scheduler.Schedule(now);
    now += kNsPerMs;
    StepResult result;
    result.elapsed = kNsPerMs;
    scheduler.Commit(result, now);
  }
  FairnessRun run;
  for (const Request& r : requests) {
    if (r.first_scheduled != kNever) run.service[r.client] += r.prompt_len;
    run.service[r.client] += 2.0 * r.num_generated;
    if (r.first_scheduled == kNever) run.waiting[r.client] += 1;
  }
  if (vtc_policy != nullptr) {
    for (int c = 0; c < 2; ++c) run.counters[c] = vtc_policy->Counter(c);
  }
  return run;
}

TEST(VtcPolicyTest, SchedulerEqualisesServiceBetweenHeavyAndLightClients) {
  const FairnessRun fcfs = RunHeavyAndLight(/*vtc=*/false);
  ASSERT_GT(fcfs.waiting[0], 0u);
  ASSERT_GT(fcfs.waiting[1], 0u);
  EXPECT_GT(fcfs.service[0] / fcfs.service[1], 2.5) << "FCFS follows demand (3:1)";

  const FairnessRun vtc = RunHeavyAndLight(/*vtc=*/true);
  ASSERT_GT(vtc.waiting[0], 0u) << "both clients must stay backlogged";
  ASSERT_GT(vtc.waiting[1], 0u);
  const double ratio = vtc.service[0] / vtc.service[1];
  EXPECT_GE(ratio, 0.8);
  EXPECT_LE(ratio, 1.25);
  // Conservation: with weight 1, each counter is exactly its client's weighted service.
  EXPECT_EQ(vtc.counters[0], vtc.service[0]);
  EXPECT_EQ(vtc.counters[1], vtc.service[1]);
}

}  // namespace
}  // namespace servelab
