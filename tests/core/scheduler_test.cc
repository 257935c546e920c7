#include "core/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>

#include "policies/fcfs_policy.h"
#include "tests/core/scheduler_harness.h"

namespace servelab {
namespace {

using testing::Config;
using testing::SchedulerHarness;

struct Entry {
  int64_t id;
  int32_t new_tokens;
  int32_t computed;
  bool emits;
};

std::vector<Entry> Entries(const StepPlan& plan) {
  std::vector<Entry> out;
  for (const auto& s : plan.seqs) {
    out.push_back({s.request->id, s.num_new_tokens, s.num_computed_tokens, s.emits_token});
  }
  return out;
}

MATCHER_P(IsEntries, expected, "") {
  if (arg.size() != expected.size()) return false;
  for (size_t i = 0; i < arg.size(); ++i) {
    if (arg[i].id != expected[i].id || arg[i].new_tokens != expected[i].new_tokens ||
        arg[i].computed != expected[i].computed || arg[i].emits != expected[i].emits) {
      return false;
    }
  }
  return true;
}

// Budget 8, block size 4. A and B (4-token prompts, 3 outputs) prefill together; then
// C (10-token prompt) takes the 6 tokens the two decodes leave, then the last 4.
TEST(SchedulerTest, TokenBudgetSplitsBetweenDecodesAndAChunkedPrefill) {
  SchedulerHarness h(Config(4, 8, 8), 100);
  h.Add(4, 3);  // A = 0
  h.Add(4, 3);  // B = 1
  const StepPlan& s1 = h.Plan();
  EXPECT_THAT(Entries(s1), IsEntries(std::vector<Entry>{{0, 4, 0, true}, {1, 4, 0, true}}));
  EXPECT_EQ(s1.num_prefill_tokens, 8);
  EXPECT_EQ(s1.num_decode_tokens, 0);
  EXPECT_EQ(h.Kv().NumUsedBlocks(), 2);
  EXPECT_TRUE(h.Commit().empty());

  h.Add(10, 2);  // C = 2
  const StepPlan& s2 = h.Plan();
  EXPECT_THAT(Entries(s2), IsEntries(std::vector<Entry>{{0, 1, 4, true}, {1, 1, 4, true},
                                                       {2, 6, 0, false}}));
  EXPECT_EQ(s2.num_prefill_tokens, 6);
  EXPECT_EQ(s2.num_decode_tokens, 2);
  EXPECT_EQ(s2.num_emitting, 2);
  EXPECT_EQ(h.Kv().NumUsedBlocks(), 2 + 2 + 2);  // A, B grow to 5 tokens; C holds 6
  EXPECT_TRUE(h.Commit().empty());

  const StepPlan& s3 = h.Plan();
  EXPECT_THAT(Entries(s3), IsEntries(std::vector<Entry>{{0, 1, 5, true}, {1, 1, 5, true},
                                                       {2, 4, 6, true}}));
  EXPECT_EQ(h.Commit(), (std::vector<int64_t>{0, 1}));  // A and B made their 3rd token
  EXPECT_EQ(h.Kv().NumUsedBlocks(), 3);                  // C: 10 tokens

  const StepPlan& s4 = h.Plan();
  EXPECT_THAT(Entries(s4), IsEntries(std::vector<Entry>{{2, 1, 10, true}}));
  EXPECT_EQ(h.Commit(), (std::vector<int64_t>{2}));
  EXPECT_EQ(h.Kv().NumUsedBlocks(), 0);
  EXPECT_FALSE(h.Sched().HasWork());
}

// Four 2-token blocks. A and B (2-token prompts, 4 outputs) fill them by step 3; at
// step 4 A needs a fifth block: FCFS preempts B (latest admitted), which later
// re-prefills its prompt and 3 generated tokens and still makes all 4 of its tokens.
TEST(SchedulerTest, PreemptionTakesThePolicysVictimWhichLaterFinishesWithAllItsTokens) {
  SchedulerHarness h(Config(2, 64, 8), 4);
  Request& a = h.Add(2, 4);
  Request& b = h.Add(2, 4);
  for (int step = 1; step <= 3; ++step) {
    EXPECT_EQ(h.Plan().seqs.size(), 2u) << "step " << step;
    EXPECT_TRUE(h.Commit().empty());
  }
  EXPECT_EQ(h.Kv().NumUsedBlocks(), 4);
  EXPECT_EQ(a.num_computed_tokens, 4);
  EXPECT_EQ(b.num_generated, 3);

  const StepPlan& s4 = h.Plan();
  EXPECT_THAT(Entries(s4), IsEntries(std::vector<Entry>{{0, 1, 4, true}}));
  EXPECT_EQ(b.state, RequestState::kPreempted);
  EXPECT_EQ(b.num_preemptions, 1);
  EXPECT_EQ(b.num_recomputed_tokens, 4);
  EXPECT_EQ(b.num_computed_tokens, 0);
  EXPECT_EQ(h.Sched().NumPreemptedLastStep(), 1);
  EXPECT_EQ(h.Commit(), (std::vector<int64_t>{0}));
  EXPECT_EQ(a.num_generated, 4);

  // B re-prefills prompt (2) + generated (3) = 5 tokens in one step and samples its 4th.
  const StepPlan& s5 = h.Plan();
  EXPECT_THAT(Entries(s5), IsEntries(std::vector<Entry>{{1, 5, 0, true}}));
  EXPECT_EQ(s5.num_prefill_tokens, 5);
  EXPECT_EQ(h.Commit(), (std::vector<int64_t>{1}));
  EXPECT_EQ(b.num_generated, 4);
  EXPECT_EQ(b.state, RequestState::kFinished);
  EXPECT_EQ(h.Kv().NumFreeBlocks(), 4);
}

TEST(SchedulerTest, MaxNumSeqsCapsTheBatch) {
  SchedulerHarness h(Config(16, 1000, 2), 100);
  h.Add(8, 1);
  h.Add(8, 1);
  h.Add(8, 1);
  EXPECT_EQ(h.Plan().seqs.size(), 2u);
  EXPECT_EQ(h.Commit().size(), 2u);
  EXPECT_EQ(h.Plan().seqs.size(), 1u);
}

TEST(SchedulerTest, WithoutChunkingAPromptWaitsForAWholeBudget) {
  SchedulerConfig c = Config(4, 10, 8);
  c.chunked_prefill = false;
  SchedulerHarness h(c, 100);
  h.Add(6, 5);
  h.Add(6, 5);  // 6 + 6 > 10: waits for the next step
  EXPECT_THAT(Entries(h.Plan()), IsEntries(std::vector<Entry>{{0, 6, 0, true}}));
  h.Commit();
  EXPECT_THAT(Entries(h.Plan()), IsEntries(std::vector<Entry>{{0, 1, 6, true}, {1, 6, 0, true}}));
}

TEST(SchedulerTest, RequestsThatCanNeverRunAreRejectedWithAReason) {
  SchedulerConfig c = Config(4, 16, 8);
  c.chunked_prefill = false;
  SchedulerHarness h(c, /*num_blocks=*/10, /*watermark=*/1, /*max_model_len=*/64);
  Request& too_long = h.Add(60, 5);       // 65 > 64
  Request& too_big = h.Add(30, 10);       // 39 cached tokens = 10 blocks > 10 - 1
  Request& over_budget = h.Add(20, 1);    // 20-token prompt, budget 16, no chunking
  Request& fine = h.Add(16, 5);
  EXPECT_EQ(too_long.reject_reason, RejectReason::kExceedsContextWindow);
  EXPECT_EQ(too_big.reject_reason, RejectReason::kExceedsKvCapacity);
  EXPECT_EQ(over_budget.reject_reason, RejectReason::kExceedsTokenBudget);
  EXPECT_EQ(fine.state, RequestState::kWaiting);
  EXPECT_EQ(h.Sched().NumWaiting(), 1);
}

// Static batching: the batch forms once; finished members stay as padding (charged a
// decode each step) and everyone's response returns when the longest is done.
TEST(SchedulerTest, StaticBatchingPadsUntilTheLongestFinishes) {
  SchedulerConfig c = Config(4, 64, 8);
  c.batching = Batching::kStatic;
  SchedulerHarness h(c, 100);
  Request& short_one = h.Add(4, 1);
  Request& long_one = h.Add(4, 3);
  EXPECT_EQ(h.Plan().seqs.size(), 2u);
  EXPECT_TRUE(h.Commit().empty());  // short_one is done but waits for the batch
  Request& late = h.Add(4, 1);
  const StepPlan& s2 = h.Plan();
  ASSERT_EQ(s2.seqs.size(), 2u) << "no one joins a running static batch";
  EXPECT_EQ(s2.num_padding, 1);
  EXPECT_TRUE(s2.seqs[1].is_padding);
  EXPECT_EQ(s2.seqs[1].request, &short_one);
  EXPECT_TRUE(h.Commit().empty());
  EXPECT_EQ(h.Plan().num_padding, 1);
  EXPECT_EQ(h.Commit(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(short_one.finish, long_one.finish);
  EXPECT_EQ(short_one.first_token, 1 * kNsPerMs);
  EXPECT_EQ(late.state, RequestState::kWaiting);
  EXPECT_EQ(h.Plan().seqs.size(), 1u);  // the next batch
}

}  // namespace
}  // namespace servelab

namespace servelab {
namespace {

// The preemption scenario above with swap: B's two blocks go to the host and come back;
// nothing is recomputed and every block (device and host) is free at the end.
TEST(SchedulerTest, SwapPreemptionMovesBlocksOutAndBackWithoutRecompute) {
  SchedulerConfig c = Config(2, 64, 8);
  c.preemption = PreemptionMode::kSwap;
  KvCacheManager kv(4, 2, 0, /*num_host_blocks=*/4);
  Scheduler s(c, 4096, std::make_unique<FcfsPolicy>(), &kv);
  Request a, b;
  a.id = 0;
  b.id = 1;
  a.prompt_len = b.prompt_len = 2;
  a.target_output_len = b.target_output_len = 4;
  s.AddRequest(a, 0);
  s.AddRequest(b, 0);
  StepResult result;
  TimeNs now = 0;
  for (int step = 1; step <= 3; ++step) {
    ASSERT_EQ(s.Schedule(now).seqs.size(), 2u);
    s.Commit(result, ++now);
  }
  const std::vector<int32_t> b_blocks = b.block_table;
  const StepPlan& s4 = s.Schedule(now);
  ASSERT_EQ(s4.seqs.size(), 1u);
  ASSERT_EQ(s4.swap_out.size(), 2u);
  EXPECT_EQ(s4.swap_out[0].src, b_blocks[0]);
  EXPECT_EQ(s4.swap_out[1].src, b_blocks[1]);
  EXPECT_TRUE(kv.IsSwappedOut(b));
  EXPECT_TRUE(b.block_table.empty()) << "host ids stay in the KV manager";
  EXPECT_EQ(b.num_computed_tokens, 4) << "swap keeps the computed KV";
  EXPECT_EQ(b.num_recomputed_tokens, 0);
  EXPECT_EQ(b.num_preemptions, 1);
  EXPECT_EQ(kv.NumFreeHostBlocks(), 2);
  s.Commit(result, ++now);  // A finishes

  const StepPlan& s5 = s.Schedule(now);
  ASSERT_EQ(s5.swap_in.size(), 2u);
  EXPECT_EQ(s5.swap_in[0].dst, b.block_table[0]);
  ASSERT_EQ(s5.seqs.size(), 1u);
  EXPECT_EQ(s5.seqs[0].num_new_tokens, 1) << "a decode, not a re-prefill";
  EXPECT_EQ(s5.seqs[0].num_computed_tokens, 4);
  EXPECT_FALSE(kv.IsSwappedOut(b));
  auto done = s.Commit(result, ++now);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(b.num_generated, 4);
  EXPECT_EQ(kv.NumFreeBlocks(), 4);
  EXPECT_EQ(kv.NumFreeHostBlocks(), 4);
}

TEST(SchedulerTest, SwapFallsBackToRecomputeWhenTheHostIsFull) {
  SchedulerConfig c = Config(2, 64, 8);
  c.preemption = PreemptionMode::kSwap;
  KvCacheManager kv(4, 2, 0, /*num_host_blocks=*/1);  // B's 2 blocks do not fit
  Scheduler s(c, 4096, std::make_unique<FcfsPolicy>(), &kv);
  Request a, b;
  a.prompt_len = b.prompt_len = 2;
  a.target_output_len = b.target_output_len = 4;
  s.AddRequest(a, 0);
  s.AddRequest(b, 0);
  StepResult result;
  for (TimeNs now = 0; now < 3; ++now) {
    s.Schedule(now);
    s.Commit(result, now + 1);
  }
  EXPECT_TRUE(s.Schedule(3).swap_out.empty());
  EXPECT_FALSE(kv.IsSwappedOut(b));
  EXPECT_EQ(b.num_recomputed_tokens, 4);
}

// A preemptive rule for the test: lower priority value first; displaces worse classes.
class TestPriorityPolicy final : public Policy {
 public:
  std::string_view Name() const override { return "test_priority"; }
  void Enqueue(Request& r, TimeNs) override { waiting_.push_back(&r); }
  Request* Peek(TimeNs) override {
    Request* best = nullptr;
    for (Request* r : waiting_) {
      if (best == nullptr || r->priority < best->priority) best = r;
    }
    return best;
  }
  void Admitted(Request& r, TimeNs) override { std::erase(waiting_, &r); }
  Request* PickVictim(std::span<Request* const> running, TimeNs) override {
    Request* worst = running.front();
    for (Request* r : running) {
      if (r->priority >= worst->priority) worst = r;
    }
    return worst;
  }
  bool ShouldPreemptFor(const Request& waiting, const Request& running) const override {
    return waiting.priority < running.priority;
  }
  size_t NumWaiting() const override { return waiting_.size(); }

 private:
  std::vector<Request*> waiting_;
};

TEST(SchedulerTest, PreemptivePolicyDisplacesALowerClassInTheSameStep) {
  SchedulerConfig c = Config(4, 64, 1);  // one slot
  KvCacheManager kv(100, 4, 0);
  Scheduler s(c, 4096, std::make_unique<TestPriorityPolicy>(), &kv);
  Request low, high;
  low.id = 0;
  low.priority = 1;
  high.id = 1;
  high.priority = 0;
  low.prompt_len = high.prompt_len = 4;
  low.target_output_len = high.target_output_len = 3;
  s.AddRequest(low, 0);
  StepResult result;
  s.Schedule(0);
  s.Commit(result, 1);
  s.AddRequest(high, 1);
  const StepPlan& plan = s.Schedule(1);
  ASSERT_EQ(plan.seqs.size(), 1u);
  EXPECT_EQ(plan.seqs[0].request, &high);
  EXPECT_EQ(low.state, RequestState::kPreempted);
  EXPECT_EQ(low.num_preemptions, 1);
  // `high` runs to completion, then `low` resumes and finishes with all its tokens.
  TimeNs now = 2;
  while (s.HasWork()) {
    s.Schedule(now);
    s.Commit(result, ++now);
  }
  EXPECT_EQ(high.num_generated, 3);
  EXPECT_EQ(low.num_generated, 3);
  EXPECT_LT(high.finish, low.finish);
  EXPECT_EQ(kv.NumUsedBlocks(), 0);
}

}  // namespace
}  // namespace servelab
