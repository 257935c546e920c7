// Decode runs (Scheduler::BeginDecodeRun): a run must leave the scheduler, the KV cache
// and every request exactly as stepping the same iterations does.
#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <vector>

#include "core/scheduler.h"
#include "tests/core/scheduler_harness.h"

namespace servelab {
namespace {

using testing::Config;

// The harness, advancing runs as the driver does.
class Replica : public testing::SchedulerHarness {
 public:
  using SchedulerHarness::SchedulerHarness;

  // Up to `iterations` iterations of a run begun now: the last allocated one (when the
  // run lasts that long) is left as a step to commit. Returns the iterations completed in
  // the run, or -1 when no run could begin.
  int32_t Run(int32_t iterations, bool leave_last_as_step) {
    Scheduler& s = Sched();
    const int32_t limit = s.BeginDecodeRun(Now());
    if (limit == 0) return -1;
    std::vector<TimeNs> ends;
    const int32_t n = std::min(iterations, limit);
    for (int32_t j = 0; j < n; ++j) {
      if (!s.AdvanceDecodeRun()) break;
      const bool last = j == limit - 1 || (leave_last_as_step && j == n - 1);
      if (last) {  // the tail: started as a step, committed as the run's last iteration
        s.EndDecodeRun(ends);
        Advance(static_cast<TimeNs>(ends.size() + 1) * kNsPerMs);
        StepResult result;
        result.elapsed = kNsPerMs;
        s.CommitDecodeRunTail(result, Now());
        return static_cast<int32_t>(ends.size());
      }
      ends.push_back(Now() + (j + 1) * kNsPerMs);
    }
    s.EndDecodeRun(ends);
    Advance(static_cast<TimeNs>(ends.size()) * kNsPerMs);
    return static_cast<int32_t>(ends.size());
  }
};

// Everything a step changes in a request.
void ExpectSameRequests(const std::deque<Request>& a, const std::deque<Request>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(a[i].state, b[i].state);
    EXPECT_EQ(a[i].num_computed_tokens, b[i].num_computed_tokens);
    EXPECT_EQ(a[i].num_generated, b[i].num_generated);
    EXPECT_EQ(a[i].first_token, b[i].first_token);
    EXPECT_EQ(a[i].last_token, b[i].last_token);
    EXPECT_EQ(a[i].finish, b[i].finish);
    EXPECT_EQ(a[i].num_preemptions, b[i].num_preemptions);
    EXPECT_EQ(a[i].block_table, b[i].block_table);
  }
}

// Block size 4. After the prefill step A has 6 tokens cached in 2 blocks, B 3 in 1: run
// iteration 0 fits both, iteration 1 writes B's token 4 (a new block), iteration 2 A's
// token 8 (a new block). B's 4th token is the run's limit: the 3rd iteration finishes it.
TEST(DecodeRunTest, AllocatesEachBlockAtTheIterationThatNeedsItAndStopsBeforeAFinish) {
  Replica replica(Config(4, 64, 8), 10);
  Request& a = replica.Add(6, 10);
  Request& b = replica.Add(3, 4);
  replica.Step();  // both prefills; first tokens at 1 ms
  ASSERT_EQ(replica.Kv().NumUsedBlocks(), 3);
  Scheduler& s = replica.Sched();
  EXPECT_EQ(s.BeginDecodeRun(replica.Now()), 3);
  EXPECT_EQ(s.LastPlan().num_decode_tokens, 2);
  EXPECT_EQ(s.LastPlan().num_prefill_tokens, 0);
  ASSERT_TRUE(s.AdvanceDecodeRun());
  EXPECT_EQ(replica.Kv().NumUsedBlocks(), 3);
  ASSERT_TRUE(s.AdvanceDecodeRun());
  EXPECT_EQ(replica.Kv().NumUsedBlocks(), 4);
  EXPECT_EQ(b.block_table.size(), 2u);
  ASSERT_TRUE(s.AdvanceDecodeRun());
  EXPECT_EQ(replica.Kv().NumUsedBlocks(), 5);
  EXPECT_EQ(a.block_table.size(), 3u);
  // Iterations 0 and 1 ended at 2 and 3 ms; iteration 2, the tail, is in flight: the
  // tokens of all three are applied when it completes.
  const std::vector<TimeNs> ends = {2 * kNsPerMs, 3 * kNsPerMs};
  s.EndDecodeRun(ends);
  EXPECT_TRUE(s.DecodeRunTailInFlight());
  EXPECT_EQ(a.num_computed_tokens, 6);
  StepResult result;
  result.elapsed = kNsPerMs;
  const auto done = s.CommitDecodeRunTail(result, 4 * kNsPerMs);
  EXPECT_FALSE(s.DecodeRunTailInFlight());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0], &b);
  EXPECT_EQ(b.finish, 4 * kNsPerMs);
  EXPECT_EQ(b.num_generated, 4);
  EXPECT_EQ(a.num_computed_tokens, 9);
  EXPECT_EQ(a.num_generated, 4);
  EXPECT_EQ(a.last_token, 4 * kNsPerMs);
  EXPECT_EQ(s.NumRunning(), 1);

  // The same iterations stepped.
  Replica stepped(Config(4, 64, 8), 10);
  stepped.Add(6, 10);
  stepped.Add(3, 4);
  for (int i = 0; i < 4; ++i) stepped.Step();
  ExpectSameRequests(replica.Requests(), stepped.Requests());
  EXPECT_EQ(replica.Kv().NumUsedBlocks(), stepped.Kv().NumUsedBlocks());
}

// Two requests both at a block boundary and one free block: the run's first iteration
// cannot allocate, and says so without taking the block.
TEST(DecodeRunTest, AnIterationWithoutBlocksForEveryoneIsRefusedWithNothingChanged) {
  Replica replica(Config(4, 64, 8), 3);
  Request& a = replica.Add(4, 5);
  Request& b = replica.Add(4, 5);
  replica.Step();
  ASSERT_EQ(replica.Kv().NumUsedBlocks(), 2);
  Scheduler& s = replica.Sched();
  ASSERT_EQ(s.BeginDecodeRun(replica.Now()), 4);
  EXPECT_FALSE(s.AdvanceDecodeRun());
  EXPECT_EQ(replica.Kv().NumUsedBlocks(), 2);
  EXPECT_EQ(a.block_table.size(), 1u);
  EXPECT_EQ(b.block_table.size(), 1u);
  s.EndDecodeRun({});
  EXPECT_EQ(a.num_computed_tokens, 4);
  // Stepping then preempts (FCFS: the later request) and goes on.
  replica.Step();
  EXPECT_EQ(b.num_preemptions, 1);
}

TEST(DecodeRunTest, NoRunWhileSomethingElseWouldHappen) {
  {  // A prompt still in chunks: its next step prefills.
    Replica replica(Config(4, 8, 8), 100);
    replica.Add(4, 5);
    replica.Add(20, 5);
    replica.Step();
    EXPECT_EQ(replica.Sched().BeginDecodeRun(replica.Now()), 0);
  }
  {  // A waiting request that a free slot and budget would admit.
    Replica replica(Config(4, 64, 8), 100);
    replica.Add(4, 5);
    replica.Step();
    replica.Add(4, 5);
    EXPECT_EQ(replica.Sched().BeginDecodeRun(replica.Now()), 0);
  }
  {  // Not right after the commit that gave everyone a token.
    Replica replica(Config(4, 64, 8), 100);
    replica.Add(4, 5);
    replica.Step();
    EXPECT_EQ(replica.Sched().BeginDecodeRun(replica.Now() + 1), 0);
  }
  {  // Nothing runs.
    Replica replica(Config(4, 64, 8), 100);
    EXPECT_EQ(replica.Sched().BeginDecodeRun(0), 0);
  }
}

TEST(DecodeRunTest, AWaitingRequestWithNoFreeSlotDoesNotStopARun) {
  Replica replica(Config(4, 64, 2), 100);
  replica.Add(4, 6);
  replica.Add(4, 9);
  replica.Add(4, 5);  // waits: max_num_seqs is 2
  replica.Step();
  ASSERT_EQ(replica.Sched().NumWaiting(), 1);
  EXPECT_EQ(replica.Sched().BeginDecodeRun(replica.Now()), 5);
  replica.Sched().EndDecodeRun({});
}

// Random twins: one replica steps, the other advances runs of random lengths whenever
// one can begin (KV pressure makes some end early, arrivals come between); after every
// round both must agree on every request and block.
TEST(DecodeRunTest, RandomRunsLeaveEverythingAsSteppingDoes) {
  std::mt19937_64 rng(7);
  int64_t run_iterations = 0;
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int32_t block_size = std::vector<int32_t>{1, 4, 16, 5}[trial % 4];
    const int32_t max_seqs = 1 + static_cast<int32_t>(rng() % 12);
    const int32_t blocks = 40 + static_cast<int32_t>(rng() % 200);
    const SchedulerConfig config = Config(block_size, 256, max_seqs);
    Replica runs(config, blocks);
    Replica steps(config, blocks);
    for (int round = 0; round < 60; ++round) {
      if (rng() % 3 == 0) {
        const auto prompt = 1 + static_cast<int32_t>(rng() % 40);
        const auto output = 1 + static_cast<int32_t>(rng() % 60);
        runs.Add(prompt, output);
        steps.Add(prompt, output);
      }
      const auto wanted = static_cast<int32_t>(rng() % 30);
      const bool leave_last = rng() % 2 == 0;
      const int32_t advanced = runs.Run(wanted, leave_last);
      if (advanced < 0) {
        if (runs.Sched().HasWork()) runs.Step();
        if (steps.Sched().HasWork()) steps.Step();
      } else {
        run_iterations += advanced;
        const TimeNs target = runs.Now();
        while (steps.Now() < target) steps.Step();
      }
      ASSERT_EQ(runs.Now(), steps.Now());
      ExpectSameRequests(runs.Requests(), steps.Requests());
      ASSERT_EQ(runs.Kv().NumUsedBlocks(), steps.Kv().NumUsedBlocks());
      ASSERT_EQ(runs.Sched().NumWaiting(), steps.Sched().NumWaiting());
    }
  }
  EXPECT_GT(run_iterations, 1000);  // the runs did happen
}

}  // namespace
}  // namespace servelab
