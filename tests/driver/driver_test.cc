// The backend-neutral driver with test doubles for what it is built from
// (tests/driver/fakes.h) and an in-memory workload.
#include "driver/driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "policies/fcfs_policy.h"
#include "tests/driver/fakes.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;

// Requests given in memory, in arrival order.
class ListWorkload final : public Workload {
 public:
  struct Spec {
    TimeNs arrival;
    int32_t prompt_len;
    int32_t output_len;
  };
  explicit ListWorkload(std::vector<Spec> specs) : specs_(std::move(specs)) {}
  bool Next(Request& request) override {
    if (next_ >= specs_.size()) return false;
    const Spec& s = specs_[next_];
    request.id = static_cast<int64_t>(next_++);
    request.arrival = s.arrival;
    request.prompt_len = s.prompt_len;
    request.target_output_len = s.output_len;
    return true;
  }

 private:
  std::vector<Spec> specs_;
  size_t next_ = 0;
};

struct Harness {
  DriverOptions options;
  FakeBackendOptions backend;
  std::vector<FakeBackend*> backends;
  std::vector<PolicyContext> contexts;  // what each replica's policy was made with
  std::ostringstream requests_csv;
  std::function<std::unique_ptr<Policy>()> make_policy;  // FCFS when empty

  StatusOr<std::unique_ptr<Driver>> Make(std::vector<ListWorkload::Spec> specs, Clock& clock) {
    options.metrics.run_name = "t";
    BackendFactory factory = [this](int32_t) -> StatusOr<std::unique_ptr<Backend>> {
      auto b = std::make_unique<FakeBackend>(backend);
      backends.push_back(b.get());
      return std::unique_ptr<Backend>(std::move(b));
    };
    PolicyMaker policies = [this](const PolicyContext& context) -> StatusOr<std::unique_ptr<Policy>> {
      contexts.push_back(context);
      if (make_policy) return make_policy();
      return std::unique_ptr<Policy>(std::make_unique<FcfsPolicy>());
    };
    MetricsSinks sinks;
    sinks.requests_csv = &requests_csv;
    return Driver::Create(options, std::make_unique<ListWorkload>(std::move(specs)), factory,
                          policies, clock, sinks);
  }
};

// A backend error ends the run at that step, with the backend's message naming the
// replica, the step and the time; nothing after it runs.
TEST(DriverTest, ABackendFailureStopsTheRunAtThatStep) {
  Harness h;
  h.backend.fail_at_step = 3;
  VirtualClock clock;
  auto driver = h.Make({{0, 16, 10}}, clock);
  ASSERT_TRUE(driver.ok()) << driver.status().message();
  const StatusOr<RunSummary> run = (*driver)->Run();
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kInternal);  // the CLI exits 1
  EXPECT_EQ(run.status().message(), "replica 0, step 3 (t = 0.030000 s): fake: device fault");
  EXPECT_EQ(h.backends[0]->starts.size(), 4u) << "no step after the failed one";
  EXPECT_EQ((*driver)->Progress().steps, 3);
  // The backend's kind of error is kept: bad input it finds (a prompt token outside the
  // vocabulary, a recording of other steps) is the CLI's exit 2.
  Harness bad;
  bad.backend.fail_at_step = 1;
  bad.backend.fail_code = StatusCode::kInvalidArgument;
  VirtualClock bad_clock;
  auto bad_driver = bad.Make({{0, 16, 10}}, bad_clock);
  ASSERT_TRUE(bad_driver.ok()) << bad_driver.status().message();
  const StatusOr<RunSummary> bad_run = (*bad_driver)->Run();
  ASSERT_FALSE(bad_run.ok());
  EXPECT_EQ(bad_run.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_run.status().message(), "replica 0, step 1 (t = 0.010000 s): fake: bad token");
}

// The KV pool and the context come from the backend: a request longer than the
// backend's context is rejected, and the driver reports what the backend said.
TEST(DriverTest, CapacityAndContextComeFromTheBackend) {
  Harness h;
  h.backend.capacity = KvCapacity{40, 16, 0, 123};
  h.backend.max_model_len = 100;
  VirtualClock clock;
  auto driver = h.Make({{0, 80, 10}, {0, 95, 10}, {0, 20, 5}}, clock);
  ASSERT_TRUE(driver.ok());
  EXPECT_EQ((*driver)->ReplicaScheduler(0).Kv().NumTotalBlocks(), 40);
  const ServedFacts& served = (*driver)->Served();
  EXPECT_EQ(served.backend, "fake");
  EXPECT_EQ(served.policy, "fcfs");
  EXPECT_EQ(served.capacity.num_gpu_blocks, 40);
  EXPECT_EQ(served.capacity.bytes_per_block, 123);
  EXPECT_EQ(served.max_model_len, 100);
  auto run = (*driver)->Run();
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->num_finished, 2);
  EXPECT_EQ(run->num_rejected, 1);  // 95 + 10 > 100
  EXPECT_EQ(run->kv_blocks_per_replica, 40);
  EXPECT_THAT(h.requests_csv.str(), HasSubstr("rejected,exceeds_context_window"));
}

// A policy that lets every waiting request displace the running one. With one seat,
// chunks of 8 tokens and 16-token prompts, each request prefills half its prompt, is
// preempted, and under recompute starts again: none ever reaches its first token. (The
// tokens a preempted request had generated are kept; only an unfinished prefill is lost.)
class AlwaysDisplacePolicy final : public Policy {
 public:
  std::string_view Name() const override { return "always_displace"; }
  void Enqueue(Request& request, TimeNs) override { queue_.push_back(&request); }
  Request* Peek(TimeNs) override { return queue_.empty() ? nullptr : queue_.front(); }
  void Admitted(Request&, TimeNs) override { queue_.erase(queue_.begin()); }
  Request* PickVictim(std::span<Request* const> running, TimeNs) override { return running[0]; }
  bool ShouldPreemptFor(const Request&, const Request&) const override { return true; }
  size_t NumWaiting() const override { return queue_.size(); }

 private:
  std::vector<Request*> queue_;
};

// The progress check: a schedule that never lets a request finish stops with an error
// (here after 2^16 + 100 x 42 steps: two requests of 16 + 5 tokens), where it used to run
// forever; the same two requests under FCFS finish, untouched by the check.
TEST(DriverTest, AScheduleThatNeverFinishesARequestStops) {
  Harness h;
  h.options.scheduler.max_num_seqs = 1;
  h.options.scheduler.max_num_batched_tokens = 8;
  h.options.scheduler.chunked_prefill = true;
  h.make_policy = [] { return std::unique_ptr<Policy>(std::make_unique<AlwaysDisplacePolicy>()); };
  VirtualClock clock;
  auto driver = h.Make({{0, 16, 5}, {0, 16, 5}}, clock);
  ASSERT_TRUE(driver.ok()) << driver.status().message();
  const StatusOr<RunSummary> run = (*driver)->Run();
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kInternal);  // the CLI exits 1
  EXPECT_THAT(run.status().message(),
              HasSubstr("no request has finished in the last 69737 steps"));
  EXPECT_THAT(run.status().message(), HasSubstr("100 times the 42 tokens"));
  EXPECT_EQ((*driver)->Progress().finished, 0);

  Harness fcfs;
  fcfs.options.scheduler = h.options.scheduler;
  VirtualClock fcfs_clock;
  auto ok = fcfs.Make({{0, 16, 5}, {0, 16, 5}}, fcfs_clock);
  ASSERT_TRUE(ok.ok());
  const StatusOr<RunSummary> done = (*ok)->Run();
  ASSERT_TRUE(done.ok()) << done.status().message();
  EXPECT_EQ(done->num_finished, 2);
}

TEST(DriverTest, ABackendWithAnotherBlockSizeIsAnError) {
  Harness h;
  h.backend.capacity.block_size = 32;
  VirtualClock clock;
  auto driver = h.Make({{0, 16, 1}}, clock);
  ASSERT_FALSE(driver.ok());
  EXPECT_THAT(driver.status().message(),
              HasSubstr("backend 'fake' has block size 32, scheduler.block_size is 16"));
}

// Each replica's policy is made with its index and, when the backend predicts, the
// backend's prefill time (in seconds, as PolicyContext has it).
TEST(DriverTest, PoliciesGetTheReplicaAndTheBackendsPrefillPrediction) {
  Harness h;
  h.options.num_replicas = 2;
  VirtualClock clock;
  ASSERT_TRUE(h.Make({{0, 16, 1}}, clock).ok());
  ASSERT_EQ(h.contexts.size(), 2u);
  EXPECT_EQ(h.contexts[1].replica, 1);
  EXPECT_FALSE(h.contexts[0].prefill_time_s) << "this backend predicts nothing";

  Harness p;
  p.backend.prefill_time = 2 * kMs;  // per token
  auto driver = p.Make({{0, 16, 1}}, clock);  // the prediction asks its backend
  ASSERT_TRUE(driver.ok());
  ASSERT_TRUE(p.contexts[0].prefill_time_s);
  EXPECT_DOUBLE_EQ(p.contexts[0].prefill_time_s(5), 0.010);
}

// The wall clock, on a fake time source: the driver sleeps until an arrival when idle,
// and when a step costs more real time than it reports (host overhead), the next step
// starts at the real time, not at the reported end. No real sleeping happens.
TEST(DriverTest, WallClockWaitsForArrivalsAndNeverRunsAhead) {
  FakeTimeSource time;
  WallClock clock(time);
  Harness h;
  h.backend.time = &time;
  h.backend.step_time = 10 * kMs;
  h.backend.host_time = 5 * kMs;
  // One request of 2 output tokens at t = 100 ms: its prefill step emits the first token,
  // one decode step the second.
  auto driver = h.Make({{100 * kMs, 16, 2}}, clock);
  ASSERT_TRUE(driver.ok());
  auto run = (*driver)->Run();
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(time.sleeps, std::vector<TimeNs>{100 * kMs}) << "only the wait for the arrival";
  // Step 0 starts at the arrival; it ends (reported) at 110 ms but real time is then
  // 115 ms, so step 1 starts at 115 ms.
  EXPECT_EQ(h.backends[0]->starts, (std::vector<TimeNs>{100 * kMs, 115 * kMs}));
  // The last step's end is handled at the real time, 130 ms.
  EXPECT_DOUBLE_EQ(run->e2e_s.max, 0.030);
}

// The same run on the virtual clock: steps follow each other at their reported ends.
TEST(DriverTest, VirtualClockHandlesEventsAtTheirTimes) {
  Harness h;
  h.backend.host_time = 5 * kMs;  // no time source: nothing to charge it to
  VirtualClock clock;
  auto driver = h.Make({{100 * kMs, 16, 2}}, clock);
  ASSERT_TRUE(driver.ok());
  auto run = (*driver)->Run();
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(h.backends[0]->starts, (std::vector<TimeNs>{100 * kMs, 110 * kMs}));
  EXPECT_DOUBLE_EQ(run->e2e_s.max, 0.020);
}

}  // namespace
}  // namespace servelab
