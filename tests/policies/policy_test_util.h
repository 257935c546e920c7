#pragma once
// Helpers shared by the policy tests: hand-built requests, a Scheduler driven step by
// step over a KvCacheManager (as tests/core/scheduler_test.cc does for FCFS), and
// building a registered policy from inline parameters.
//
// A hand-built request's slot is its id, as if a scheduler had accepted it (policies keep
// their per-request state by slot); the SchedulerHarness's scheduler gives real ones.
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/kv_cache_manager.h"
#include "core/scheduler.h"
#include "policies/registry.h"

namespace servelab::testing {

inline Request MakeRequest(int64_t id, TimeNs arrival, int32_t output_len, int32_t priority = 0,
                           int32_t prompt_len = 4) {
  Request r;
  r.id = id;
  r.arrival = arrival;
  r.target_output_len = output_len;
  r.priority = priority;
  r.prompt_len = prompt_len;
  r.slot = static_cast<int32_t>(id);
  return r;
}

// Builds policy `name` with parameters {key, value}... from exp.yaml.
inline StatusOr<std::unique_ptr<Policy>> MakePolicy(
    const std::string& name, const std::vector<std::pair<std::string, std::string>>& params = {},
    uint64_t seed = 1) {
  NamedParams config{name, {}, "scheduler.policy", "exp.yaml:3", ""};
  int line = 4;
  for (const auto& [key, value] : params) {
    config.params.push_back({key, value, "exp.yaml:" + std::to_string(line++)});
  }
  PolicyContext context;
  context.seed = seed;
  return BuiltinPolicies().Make(config, context);
}

// Pops Peek() until empty, admitting each: the full admission order by id.
inline std::vector<int64_t> DrainOrder(Policy& policy, TimeNs now = 0) {
  std::vector<int64_t> order;
  while (Request* r = policy.Peek(now)) {
    order.push_back(r->id);
    policy.Admitted(*r, now);
  }
  return order;
}

// Each Step() plans, "executes" in 1 ms, and commits.
class SchedulerHarness {
 public:
  SchedulerHarness(std::unique_ptr<Policy> policy, int32_t block_size, int32_t num_blocks,
                   int32_t budget, int32_t max_seqs)
      : kv_(num_blocks, block_size, /*watermark_blocks=*/0),
        scheduler_(Config(block_size, budget, max_seqs), /*max_model_len=*/4096,
                   std::move(policy), &kv_) {}

  Request& Add(int32_t prompt, int32_t output, int32_t priority = 0) {
    Request& r = requests_.emplace_back(
        MakeRequest(static_cast<int64_t>(requests_.size()), now_, output, priority, prompt));
    scheduler_.AddRequest(r, now_);
    return r;
  }
  // Ids in the planned batch, in plan order.
  std::vector<int64_t> Plan() {
    std::vector<int64_t> ids;
    for (const ScheduledRequest& s : scheduler_.Schedule(now_).seqs) ids.push_back(s.request->id);
    return ids;
  }
  // Ids finished by the planned step.
  std::vector<int64_t> Commit() {
    now_ += kNsPerMs;
    StepResult result;
    result.elapsed = kNsPerMs;
    std::vector<int64_t> done;
    for (Request* r : scheduler_.Commit(result, now_)) done.push_back(r->id);
    return done;
  }
  Scheduler& Sched() { return scheduler_; }
  const StepPlan& LastPlan() const { return scheduler_.LastPlan(); }

 private:
  static SchedulerConfig Config(int32_t block_size, int32_t budget, int32_t max_seqs) {
    SchedulerConfig c;
    c.block_size = block_size;
    c.max_num_batched_tokens = budget;
    c.max_num_seqs = max_seqs;
    c.chunked_prefill = true;
    return c;
  }

  TimeNs now_ = 0;
  KvCacheManager kv_;
  Scheduler scheduler_;
  std::deque<Request> requests_;
};

}  // namespace servelab::testing
