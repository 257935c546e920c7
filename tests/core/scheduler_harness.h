#pragma once
// A Scheduler driven by hand in tests (FCFS, every iteration 1 ms).
#include <deque>
#include <memory>
#include <vector>

#include "core/scheduler.h"
#include "policies/fcfs_policy.h"

namespace servelab::testing {

// Drives a Scheduler by hand: each Step() plans, "executes" in 1 ms, and commits.
class SchedulerHarness {
 public:
  SchedulerHarness(SchedulerConfig config, int32_t num_blocks, int32_t watermark_blocks = 0,
                   int32_t max_model_len = 4096)
      : kv_(num_blocks, config.block_size, watermark_blocks),
        scheduler_(config, max_model_len, std::make_unique<FcfsPolicy>(), &kv_) {}

  Request& Add(int32_t prompt, int32_t output) {
    Request& r = requests_.emplace_back();
    r.id = static_cast<int64_t>(requests_.size()) - 1;
    r.prompt_len = prompt;
    r.target_output_len = output;
    r.arrival = now_;
    scheduler_.AddRequest(r, now_);
    return r;
  }
  const StepPlan& Plan() { return scheduler_.Schedule(now_); }
  std::vector<int64_t> Commit() {
    now_ += kNsPerMs;
    StepResult result;
    result.elapsed = kNsPerMs;
    std::vector<int64_t> done;
    for (Request* r : scheduler_.Commit(result, now_)) done.push_back(r->id);
    return done;
  }
  // Plans and commits one iteration; returns the ids it finished.
  std::vector<int64_t> Step() {
    Plan();
    return Commit();
  }
  KvCacheManager& Kv() { return kv_; }
  Scheduler& Sched() { return scheduler_; }
  std::deque<Request>& Requests() { return requests_; }
  TimeNs Now() const { return now_; }
  void Advance(TimeNs by) { now_ += by; }

 private:
  TimeNs now_ = 0;
  KvCacheManager kv_;
  Scheduler scheduler_;
  std::deque<Request> requests_;
};

inline SchedulerConfig Config(int32_t block_size, int32_t budget, int32_t max_seqs) {
  SchedulerConfig c;
  c.block_size = block_size;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.chunked_prefill = true;
  return c;
}

}  // namespace servelab::testing
