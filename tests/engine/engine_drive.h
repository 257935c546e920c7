#pragma once
// Engine test support: an EngineBackend over any ModelRunner driven by the real core
// Scheduler, as the engine driver drives it (Schedule -> Execute -> Commit ->
// OnRequestFinished), with what a test checks recorded.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "core/kv_cache_manager.h"
#include "core/prefix_key.h"
#include "core/scheduler.h"
#include "engine/engine_backend.h"
#include "policies/fcfs_policy.h"
#include "tests/engine/tiny_model.h"

namespace servelab::testing {

struct Outcome {
  std::map<int64_t, std::vector<int32_t>> tokens;  // sampled, per request id
  std::map<int64_t, int32_t> target;
  std::map<int64_t, int32_t> prompt_len;
  std::map<int64_t, std::vector<int32_t>> prompts;  // the ids the backend fed each request
  int32_t preemptions = 0;
  int32_t swap_steps = 0;
  int32_t reprefills = 0;  // seqs re-prefilling prompt + generated ids from position 0
  int32_t steps = 0;
  int64_t cached_tokens = 0;  // prompt tokens admissions took from the prefix cache
  bool elapsed_positive = true;
  size_t tokens_left = 0;  // ids the backend still holds at the end
};

struct RunOptions {
  int32_t num_blocks = 200;
  int32_t num_cpu_blocks = 0;
  PreemptionMode preemption = PreemptionMode::kRecompute;
  EngineBackendOptions backend;
  // Shared prefixes: request i starts with family i % 3's prompt, its first 4 x
  // (2 + i % 3) tokens identified (at most its prompt), so requests share 8-16 tokens.
  bool shared_prefixes = false;
  PrefixCacheType prefix_cache = PrefixCacheType::kNone;
  bool warm_up = false;  // EngineBackend::WarmUp at the scheduler's limits first
};

// Eight requests arriving at once; prompts 5..40 tokens, outputs 6..20, block size 4, at
// most 6 running and 24 tokens per step, so prompts are chunked and mixed with decodes.
// `runner`'s pools decide whether preemption happens (num_blocks, num_cpu_blocks in
// RunOptions are for the caller's runner; this reads the runner's Capacity()).
inline Outcome DriveEngine(std::unique_ptr<ModelRunner> runner, const RunOptions& options) {
  EngineBackend backend(std::move(runner), options.backend);
  if (options.warm_up) {
    EXPECT_TRUE(backend.WarmUp(24, 6).ok());
  }
  const KvCapacity capacity = backend.Capacity();
  KvCacheManager kv(capacity.num_gpu_blocks, capacity.block_size, 0, capacity.num_cpu_blocks,
                    options.prefix_cache);
  SchedulerConfig config;
  config.block_size = 4;
  config.max_num_seqs = 6;
  config.max_num_batched_tokens = 24;  // prompts are chunked and mixed with decodes
  config.preemption = options.preemption;
  Scheduler scheduler(config, 1024, std::make_unique<FcfsPolicy>(), &kv);
  std::vector<Request> requests(8);
  Outcome outcome;
  for (int32_t i = 0; i < 8; ++i) {
    Request& r = requests[static_cast<size_t>(i)];
    r.id = 100 + i;
    r.prompt_len = 5 + (i * 11) % 36;
    r.target_output_len = 6 + (i * 7) % 15;
    if (options.shared_prefixes) {
      const uint64_t family = static_cast<uint64_t>(i % 3);
      r.prefix_block_tokens = 4;
      r.prefix_block_hashes = {family, family + 10, family + 20, family + 30};
      ChainPrefixHashes(r.prefix_block_hashes);
      r.prefix_identified_tokens = std::min(r.prompt_len, 4 * (2 + i % 3));
    }
    outcome.target[r.id] = r.target_output_len;
    outcome.prompt_len[r.id] = r.prompt_len;
    EXPECT_TRUE(scheduler.AddRequest(r, 0));
  }
  TimeNs now = 0;
  while (scheduler.HasWork() && outcome.steps < 2000) {
    const StepPlan& plan = scheduler.Schedule(now);
    EXPECT_FALSE(plan.empty());
    if (plan.empty()) break;
    outcome.swap_steps += plan.swap_out.empty() ? 0 : 1;
    StatusOr<StepResult> executed = backend.Execute(plan);
    EXPECT_TRUE(executed.ok()) << executed.status().message();
    if (!executed.ok()) break;
    const StepResult& result = *executed;
    EXPECT_EQ(result.sampled_tokens.size(), static_cast<size_t>(plan.num_emitting));
    EXPECT_EQ(result.stopped.size(), static_cast<size_t>(plan.num_emitting));
    size_t k = 0;
    for (const ScheduledRequest& s : plan.seqs) {
      outcome.reprefills += s.num_computed_tokens == 0 && s.request->num_generated > 0;
      outcome.cached_tokens += s.num_cached_tokens;
      if (!outcome.prompts.contains(s.request->id)) {
        const auto ids = backend.Tokens().Tokens(s.request->id);
        outcome.prompts[s.request->id].assign(ids.begin(), ids.begin() + s.request->prompt_len);
      }
      if (s.emits_token) outcome.tokens[s.request->id].push_back(result.sampled_tokens[k++]);
    }
    outcome.elapsed_positive = outcome.elapsed_positive && result.elapsed > 0;
    now += result.elapsed;
    for (Request* r : scheduler.Commit(result, now)) backend.OnRequestFinished(r->id);
    ++outcome.steps;
  }
  for (const Request& r : requests) {
    EXPECT_TRUE(r.IsFinished()) << r.id;
    outcome.preemptions += r.num_preemptions;
  }
  outcome.tokens_left = backend.Tokens().NumRequests();
  return outcome;
}

}  // namespace servelab::testing
