#include "policies/mlfq_policy.h"

#include <gtest/gtest.h>

#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/kv_cache_manager.h"
#include "core/scheduler.h"
#include "policies/fcfs_policy.h"
#include "policies/registry.h"

namespace servelab {
namespace {

NamedParams Config(std::vector<std::pair<std::string, std::string>> params) {
  NamedParams config{"mlfq", {}, "scheduler.policy", "x.yaml:2", ""};
  for (auto& [key, value] : params) config.params.push_back({key, value, "x.yaml:3"});
  return config;
}

std::unique_ptr<MlfqPolicy> Make(std::vector<std::pair<std::string, std::string>> params,
                                 const PolicyContext& context = {}) {
  auto made = BuiltinPolicies().Make(Config(std::move(params)), context);
  EXPECT_TRUE(made.ok()) << made.status().message();
  return std::unique_ptr<MlfqPolicy>(static_cast<MlfqPolicy*>(std::move(made).value().release()));
}

// Its slot is its id, as if a scheduler had accepted it.
Request MakeRequest(int64_t id, int32_t prompt) {
  Request r;
  r.id = id;
  r.prompt_len = prompt;
  r.target_output_len = 100;
  r.slot = static_cast<int32_t>(id);
  return r;
}

StepPlan Plan(const std::vector<Request*>& scheduled, Request* padding = nullptr) {
  StepPlan plan;
  for (Request* r : scheduled) plan.seqs.push_back({r, 1, r->prompt_len, true, false});
  if (padding != nullptr) plan.seqs.push_back({padding, 1, 10, false, true});
  return plan;
}

StepResult Elapsed(TimeNs ns) {
  StepResult result;
  result.elapsed = ns;
  return result;
}

// Quanta 10, 20, 40 ms, unbounded; prefill predicted at 1 ms per token: a prompt joins
// the first level whose quantum is >= its prefill time.
TEST(MlfqPolicyTest, SkipJoinPicksTheFirstLevelWhoseQuantumCoversThePrefill) {
  PolicyContext context;
  context.prefill_time_s = [](int32_t n) { return n * 1e-3; };
  auto policy = Make({{"levels", "4"}, {"base_quantum_ms", "10"}}, context);
  EXPECT_EQ(policy->QuantumNs(0), 10 * kNsPerMs);
  EXPECT_EQ(policy->QuantumNs(1), 20 * kNsPerMs);
  EXPECT_EQ(policy->QuantumNs(2), 40 * kNsPerMs);
  EXPECT_EQ(policy->QuantumNs(3), std::numeric_limits<TimeNs>::max());
  const std::vector<std::pair<int32_t, int32_t>> prompt_to_level = {
      {1, 0}, {10, 0}, {11, 1}, {20, 1}, {21, 2}, {40, 2}, {41, 3}, {100000, 3}};
  for (auto [prompt, level] : prompt_to_level) {
    EXPECT_EQ(policy->SkipJoinLevel(prompt), level) << "prompt " << prompt;
  }
  Request r = MakeRequest(1, 21);
  policy->Enqueue(r, 0);
  EXPECT_EQ(policy->LevelOf(r), 2);
  EXPECT_EQ(policy->NumWaitingAt(2), 1u);
}

TEST(MlfqPolicyTest, DefaultsComeFromTheCostModelOrTheDocumentedFallbacks) {
  // No cost model: base quantum 20 ms, prefill 0.05 ms/token (400 tokens = 20 ms).
  auto plain = Make({});
  EXPECT_EQ(plain->NumLevels(), 8);
  EXPECT_EQ(plain->QuantumNs(0), 20 * kNsPerMs);
  EXPECT_EQ(plain->QuantumNs(6), 20 * 64 * kNsPerMs);
  EXPECT_EQ(plain->SkipJoinLevel(400), 0);
  EXPECT_EQ(plain->SkipJoinLevel(401), 1);
  // A cost model: base quantum = its one-token iteration (4 ms + 1 ms), and skip-join
  // asks it (prompt 6 = 10 ms: level 1).
  PolicyContext context;
  context.prefill_time_s = [](int32_t n) { return 4e-3 + n * 1e-3; };
  auto costed = Make({}, context);
  EXPECT_EQ(costed->QuantumNs(0), 5 * kNsPerMs);
  EXPECT_EQ(costed->SkipJoinLevel(1), 0);
  EXPECT_EQ(costed->SkipJoinLevel(6), 1);
  // An explicit prefill_ms_per_token wins over the cost model: 6 tokens = 3 ms, level 0.
  auto linear = Make({{"prefill_ms_per_token", "0.5"}}, context);
  EXPECT_EQ(linear->SkipJoinLevel(6), 0);
  EXPECT_EQ(linear->SkipJoinLevel(11), 1);
}

// Quanta 10, 20 ms, unbounded. Service grows by the step's elapsed time for each step
// the request is in; once it exceeds the quantum the request moves down, service reset.
TEST(MlfqPolicyTest, DemotesOnceServiceInALevelExceedsItsQuantum) {
  auto policy = Make({{"levels", "3"}, {"base_quantum_ms", "10"}, {"prefill_ms_per_token", "1"}});
  Request r = MakeRequest(1, 5), other = MakeRequest(2, 5);
  policy->Enqueue(r, 0);
  policy->Enqueue(other, 0);
  ASSERT_EQ(policy->LevelOf(r), 0);
  policy->Admitted(r, 0);
  r.state = RequestState::kRunning;
  for (int i = 1; i <= 2; ++i) policy->OnStepDone(Plan({&r}, &other), Elapsed(4 * kNsPerMs), 0);
  EXPECT_EQ(policy->LevelOf(r), 0);
  EXPECT_EQ(policy->ServiceOf(r), 8.0 * kNsPerMs);
  EXPECT_EQ(policy->ServiceOf(other), 0.0) << "padding and unscheduled requests get no service";
  policy->OnStepDone(Plan({&r}), Elapsed(2 * kNsPerMs), 0);
  EXPECT_EQ(policy->LevelOf(r), 0) << "exactly the quantum is not more than it";
  policy->OnStepDone(Plan({&r}), Elapsed(2 * kNsPerMs), 0);
  EXPECT_EQ(policy->LevelOf(r), 1);
  EXPECT_EQ(policy->ServiceOf(r), 0.0);
  policy->OnStepDone(Plan({&r}), Elapsed(20 * kNsPerMs), 0);
  EXPECT_EQ(policy->LevelOf(r), 1);
  policy->OnStepDone(Plan({&r}), Elapsed(1), 0);
  EXPECT_EQ(policy->LevelOf(r), 2);
  policy->OnStepDone(Plan({&r}), Elapsed(1000 * kNsPerSec), 0);
  EXPECT_EQ(policy->LevelOf(r), 2) << "the last level has no quantum";
  EXPECT_EQ(policy->NumWaitingAt(0), 1u) << "a running request's demotion moves no queue";
}

// Quanta 10, 20 ms, unbounded; 1 ms per prompt token; starvation_s = 1.
TEST(MlfqPolicyTest, PromotesRequestsWaitingLongerThanStarvationToTheTop) {
  auto policy = Make({{"levels", "3"},
                      {"base_quantum_ms", "10"},
                      {"prefill_ms_per_token", "1"},
                      {"starvation_s", "1"}});
  Request r1 = MakeRequest(1, 15), r2 = MakeRequest(2, 30), r3 = MakeRequest(3, 5);
  policy->Enqueue(r1, 0);                   // level 1
  policy->Enqueue(r2, kNsPerSec / 2);       // level 2
  policy->Enqueue(r3, kNsPerSec * 6 / 10);  // level 0
  ASSERT_EQ(policy->LevelOf(r1), 1);
  ASSERT_EQ(policy->LevelOf(r2), 2);
  policy->OnStepDone(StepPlan{}, Elapsed(0), kNsPerSec);
  EXPECT_EQ(policy->LevelOf(r1), 1) << "waited exactly starvation_s: not longer";
  policy->OnStepDone(StepPlan{}, Elapsed(0), kNsPerSec + 1);
  EXPECT_EQ(policy->LevelOf(r1), 0);
  EXPECT_EQ(policy->LevelOf(r2), 2);
  EXPECT_EQ(policy->Peek(0), &r3) << "promoted requests join the back of level 0";
  policy->Admitted(r3, 0);
  EXPECT_EQ(policy->Peek(0), &r1);
  policy->OnStepDone(StepPlan{}, Elapsed(0), kNsPerSec * 3 / 2 + 1);
  EXPECT_EQ(policy->LevelOf(r2), 0);
  EXPECT_EQ(policy->NumWaitingAt(0), 2u);
  EXPECT_EQ(policy->NumWaitingAt(2), 0u);

  // A promoted request stays at level 0 while it runs, however long its steps: no other
  // request, starved or new, is more urgent, so none preempts it.
  policy->Admitted(r1, 0);
  r1.state = RequestState::kRunning;
  policy->OnStepDone(Plan({&r1}), Elapsed(500 * kNsPerMs), 2 * kNsPerSec);
  EXPECT_EQ(policy->LevelOf(r1), 0);
  EXPECT_FALSE(policy->ShouldPreemptFor(r2, r1)) << "r2, promoted later, waits for r1";

  // Waiting time restarts at a preemption, not at arrival. r3 joined level 0 on arrival
  // (never promoted): demoted while running, 11 ms > level 0's 10, then 21 ms > level
  // 1's 20.
  r3.state = RequestState::kRunning;
  policy->OnStepDone(Plan({&r3}), Elapsed(11 * kNsPerMs), 2 * kNsPerSec);
  policy->OnStepDone(Plan({&r3}), Elapsed(21 * kNsPerMs), 2 * kNsPerSec);
  ASSERT_EQ(policy->LevelOf(r3), 2);
  r3.state = RequestState::kPreempted;
  policy->Enqueue(r3, 2 * kNsPerSec);
  policy->OnStepDone(StepPlan{}, Elapsed(0), 2 * kNsPerSec + kNsPerSec * 9 / 10);
  EXPECT_EQ(policy->LevelOf(r3), 2);

  auto off = Make({{"prefill_ms_per_token", "1"}, {"starvation_s", "0"}});
  Request late = MakeRequest(4, 100000);
  off->Enqueue(late, 0);
  off->OnStepDone(StepPlan{}, Elapsed(0), 1000 * kNsPerSec);
  EXPECT_EQ(off->LevelOf(late), 7) << "starvation_s 0 never promotes";
}

TEST(MlfqPolicyTest, PeekIsMostUrgentLevelFifoAndPreemptedGoToTheBackOfTheirLevel) {
  auto policy = Make({{"levels", "3"}, {"base_quantum_ms", "10"}, {"prefill_ms_per_token", "1"}});
  Request a = MakeRequest(1, 30), b = MakeRequest(2, 15), c = MakeRequest(3, 15);
  Request d = MakeRequest(4, 5);
  policy->Enqueue(a, 0);  // level 2
  EXPECT_EQ(policy->Peek(0), &a);
  policy->Enqueue(b, 0);  // level 1
  policy->Enqueue(c, 0);  // level 1
  EXPECT_EQ(policy->Peek(0), &b);
  EXPECT_EQ(policy->Peek(0), &b) << "Peek must not consume";
  policy->Admitted(b, 0);
  b.state = RequestState::kRunning;
  policy->OnStepDone(Plan({&b}), Elapsed(3 * kNsPerMs), kNsPerMs);
  b.state = RequestState::kPreempted;
  policy->Enqueue(b, kNsPerMs);  // keeps level 1 and its 3 ms of service; behind c
  EXPECT_EQ(policy->LevelOf(b), 1);
  EXPECT_EQ(policy->ServiceOf(b), 3.0 * kNsPerMs);
  policy->Enqueue(d, kNsPerMs);  // level 0 jumps ahead
  std::vector<Request*> order;
  while (Request* r = policy->Peek(0)) {
    order.push_back(r);
    policy->Admitted(*r, 0);
  }
  EXPECT_EQ(order, (std::vector<Request*>{&d, &c, &b, &a}));
  EXPECT_EQ(policy->NumWaiting(), 0u);
}

TEST(MlfqPolicyTest, PreemptsOnlyForAStrictlyMoreUrgentLevel) {
  auto policy = Make({});
  // 20 ms base quantum, 0.05 ms per prompt token: 10 tokens join level 0, 500 level 1.
  Request hi = MakeRequest(0, 10), lo = MakeRequest(1, 500);
  policy->Enqueue(hi, 0);
  policy->Enqueue(lo, 0);
  ASSERT_EQ(policy->LevelOf(hi), 0);
  ASSERT_EQ(policy->LevelOf(lo), 1);
  EXPECT_TRUE(policy->ShouldPreemptFor(hi, lo));
  EXPECT_FALSE(policy->ShouldPreemptFor(lo, hi));
  EXPECT_FALSE(policy->ShouldPreemptFor(hi, hi));
  EXPECT_FALSE(policy->ShouldPreemptFor(lo, lo));
}

TEST(MlfqPolicyTest, VictimIsTheLatestAdmittedOfTheLeastUrgentLevel) {
  auto policy = Make({});
  // Levels 1, 2, 0, 2, 1 by skip-join (0.05 ms per token against quanta 20, 40, 80 ms).
  const int32_t prompts[5] = {500, 1000, 100, 1000, 500};
  Request r[5];
  std::vector<Request*> running;
  for (int i = 0; i < 5; ++i) {
    r[i] = MakeRequest(i, prompts[i]);
    policy->Enqueue(r[i], 0);
    running.push_back(&r[i]);
  }
  while (Request* w = policy->Peek(0)) policy->Admitted(*w, 0);
  ASSERT_EQ(policy->LevelOf(r[1]), 2);
  EXPECT_EQ(policy->PickVictim(running, 0), &r[3]);
  running.pop_back();
  running.pop_back();
  EXPECT_EQ(policy->PickVictim(running, 0), &r[1]);
}

TEST(MlfqPolicyTest, RejectsUnknownAndOutOfRangeParameters) {
  auto typo = BuiltinPolicies().Make(Config({{"level", "4"}}), PolicyContext{});
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find(
                "x.yaml:3: scheduler.policy: unknown parameter 'level' for 'mlfq' (did you "
                "mean 'levels'?)"),
            std::string::npos)
      << typo.status().message();
  for (auto [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"levels", "0"}, {"levels", "65"}, {"quantum_ratio", "0.5"},
           {"base_quantum_ms", "0"}, {"starvation_s", "-1"}, {"prefill_ms_per_token", "0"}}) {
    auto bad = BuiltinPolicies().Make(Config({{key, value}}), PolicyContext{});
    EXPECT_FALSE(bad.ok()) << key << " = " << value;
  }
}

// Scheduler-level: two slots; four long requests (16-token prompts: 16 ms of predicted
// prefill, level 1 of quanta 10, 20, 40 ms) arrive at 0, a short one (8 tokens: level
// 0) right after the first step. FCFS runs it after all four long ones; skip-join MLFQ
// admits it ahead of the long ones still waiting (or displaces a running one). Each
// step is 1 ms, so a long request that runs 50 steps attains 50 ms: it leaves level 1
// after its 21st step (21 ms > 20 ms) and ends in level 2.
struct ShortBehindLong {
  TimeNs short_admitted = kNever, short_finished = kNever;
  TimeNs third_long_admitted = kNever;
  int32_t first_long_level = -1;
};

ShortBehindLong RunShortBehindLong(std::unique_ptr<Policy> policy) {
  SchedulerConfig config;
  config.block_size = 16;
  config.max_num_batched_tokens = 256;
  config.max_num_seqs = 2;
  KvCacheManager kv(/*num_blocks=*/1000, config.block_size, /*watermark_blocks=*/0);
  Scheduler scheduler(config, 4096, std::move(policy), &kv);
  std::deque<Request> requests;
  auto add = [&](int32_t prompt, int32_t output, TimeNs now) -> Request& {
    Request& r = requests.emplace_back();
    r.id = static_cast<int64_t>(requests.size()) - 1;
    r.prompt_len = prompt;
    r.target_output_len = output;
    r.arrival = now;
    EXPECT_TRUE(scheduler.AddRequest(r, now));
    return r;
  };
  for (int32_t output : {50, 60, 50, 50}) add(16, output, 0);  // slots free at 50, 60 ms
  TimeNs now = 0;
  Request* short_request = nullptr;
  for (int step = 0; step < 1000 && (step == 0 || scheduler.HasWork()); ++step) {
    scheduler.Schedule(now);
    now += kNsPerMs;
    scheduler.Commit(Elapsed(kNsPerMs), now);
    if (step == 0) short_request = &add(8, 5, now);
  }
  EXPECT_FALSE(scheduler.HasWork());
  ShortBehindLong out;
  out.short_admitted = short_request->first_scheduled;
  out.short_finished = short_request->finish;
  out.third_long_admitted = requests[2].first_scheduled;
  if (const auto* mlfq = dynamic_cast<const MlfqPolicy*>(&scheduler.GetPolicy())) {
    out.first_long_level = mlfq->LevelOf(requests[0]);  // its slot is still its own
  }
  return out;
}

TEST(MlfqPolicyTest, SchedulerAdmitsAShortArrivalAheadOfWaitingLongOnes) {
  const ShortBehindLong fcfs = RunShortBehindLong(std::make_unique<FcfsPolicy>());
  EXPECT_GT(fcfs.short_admitted, fcfs.third_long_admitted);

  const ShortBehindLong mlfq = RunShortBehindLong(
      Make({{"levels", "4"}, {"base_quantum_ms", "10"}, {"prefill_ms_per_token", "1"}}));
  EXPECT_LT(mlfq.short_admitted, mlfq.third_long_admitted);
  // At the latest when the first slot frees (50 ms); at once (1 ms) if the scheduler acts
  // on ShouldPreemptFor and displaces a running long request.
  EXPECT_LE(mlfq.short_admitted, 50 * kNsPerMs);
  EXPECT_LT(mlfq.short_finished, fcfs.short_finished);
  EXPECT_EQ(mlfq.first_long_level, 2);
}

}  // namespace
}  // namespace servelab
