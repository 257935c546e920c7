// Every registered policy on one common workload, and the scheduler's own cost per
// iteration under each policy with 256 running requests (target: under 2 us), with the
// prefix cache off and, for fcfs and the prefix-aware policies, on (hash and radix;
// prompts of 500 tokens, the first 400 one of 8 shared prefixes).
#include <benchmark/benchmark.h>

#include <deque>

#include "core/kv_cache_manager.h"
#include "core/prefix_key.h"
#include "core/scheduler.h"
#include "policies/registry.h"
#include "sim/sim_backend.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"

namespace servelab {
namespace {

PolicyContext TwoClients() {
  PolicyContext context;
  context.seed = 1;
  context.clients = {PolicyClient{"light", 0, 1.0}, PolicyClient{"heavy", 1, 1.0}};
  context.prefill_time_s = [](int32_t tokens) { return 1e-4 * tokens; };
  return context;
}

// Schedule + Commit with `batch` running requests in steady state: each generates up to
// 1,000 tokens, then a fresh request takes its place (so the policy's Enqueue, Peek and
// Admitted run at the natural rate, and OnStepDone every step).
bool NeedsPrefixCache(const std::string& policy) { return policy == "lpm" || policy == "dfs-weight"; }

void BM_SchedulerIterationPerPolicy(benchmark::State& state, const std::string& policy_name,
                                    PrefixCacheType cache) {
  const int32_t batch = static_cast<int32_t>(state.range(0));
  SchedulerConfig config;
  config.max_num_seqs = batch;
  KvCacheManager kv(batch * 100, 16, 0, 0, cache);
  PolicyContext context = TwoClients();
  context.kv = &kv;
  auto policy = BuiltinPolicies().Make(NamedParams{policy_name, {}, "policy", "", ""}, context);
  if (!policy.ok()) {
    state.SkipWithError(policy.status().message().c_str());
    return;
  }
  Scheduler scheduler(config, 1 << 20, std::move(policy).value(), &kv);
  std::deque<Request> requests(batch);
  int64_t next_id = 0;
  TimeNs now = 0;
  auto start = [&](Request& r) {
    r = Request();
    r.id = next_id;
    r.client = static_cast<int32_t>(next_id % 3 == 0 ? 0 : 1);
    r.priority = r.client;
    r.arrival = now;
    r.prompt_len = 500;
    if (cache != PrefixCacheType::kNone) {
      r.prefix_block_tokens = 16;
      r.prefix_identified_tokens = 400;
      r.prefix_block_hashes.resize(25);
      for (size_t j = 0; j < 25; ++j) r.prefix_block_hashes[j] = MixKey(next_id % 8, j);
      ChainPrefixHashes(r.prefix_block_hashes);
    }
    r.target_output_len = 1000 - static_cast<int32_t>(next_id++ % batch);
    scheduler.AddRequest(r, now);
  };
  for (auto& r : requests) start(r);
  StepResult result;
  result.elapsed = kNsPerMs;
  std::vector<Request*> finished;
  int64_t request_iterations = 0;
  for (auto _ : state) {
    request_iterations += static_cast<int64_t>(scheduler.Schedule(now).seqs.size());
    now += kNsPerMs;
    auto done = scheduler.Commit(result, now);
    finished.assign(done.begin(), done.end());
    for (Request* r : finished) start(*r);
  }
  state.counters["batch"] = static_cast<double>(request_iterations) /
                            static_cast<double>(std::max<int64_t>(1, state.iterations()));
}

// The same two-client, overloaded workload under each policy: what the policy buys.
void BM_PolicyOnCommonWorkload(benchmark::State& state, const std::string& policy_name) {
  ExperimentConfig c;
  c.name = policy_name;
  c.seed = 3;
  c.model = *FindModel("llama-2-7b");
  c.hardware.gpu = *FindGpu("a100-80gb");
  c.scheduler.policy.name = policy_name;
  c.scheduler.has_prefix_cache = NeedsPrefixCache(policy_name);
  c.scheduler.prefix_cache.type = PrefixCacheType::kRadix;
  c.scheduler.max_num_seqs = 64;
  c.workload.num_requests = 3000;
  c.workload.arrival.rate = 12;
  c.workload.input_tokens.dist = LengthDist::kLognormal;
  c.workload.input_tokens.mean = 500;
  c.workload.input_tokens.cv = 1.0;
  c.workload.input_tokens.max = 3000;
  c.workload.output_tokens.dist = LengthDist::kLognormal;
  c.workload.output_tokens.mean = 250;
  c.workload.output_tokens.cv = 1.0;
  c.workload.output_tokens.max = 1000;
  c.workload.clients = {ClientConfig{"light", 1, 0, 1}, ClientConfig{"heavy", 2, 1, 1}};
  RunSummary s;
  for (auto _ : state) {
    auto outcome = RunSimulation(c, MetricsSinks{});
    if (!outcome.ok()) {
      state.SkipWithError(outcome.status().message().c_str());
      return;
    }
    s = outcome->summary;
  }
  state.counters["ttft_p50_s"] = s.ttft_s.p50;
  state.counters["ttft_p99_s"] = s.ttft_s.p99;
  state.counters["e2e_p50_s"] = s.e2e_s.p50;
  state.counters["e2e_p99_s"] = s.e2e_s.p99;
  state.counters["output_tok_per_s"] = s.output_throughput;
  state.counters["jain"] = s.jain_index;
  state.counters["window_jain"] = s.window_jain_index;
  state.counters["preemptions"] = static_cast<double>(s.preemptions);
}

const bool kRegistered = [] {
  for (const std::string& name : BuiltinPolicies().Names()) {
    if (!NeedsPrefixCache(name)) {
      benchmark::RegisterBenchmark(("BM_SchedulerIteration/" + name).c_str(),
                                   BM_SchedulerIterationPerPolicy, name, PrefixCacheType::kNone)
          ->Arg(256);
    }
    if (name == "fcfs" || NeedsPrefixCache(name)) {
      for (const PrefixCacheType cache : {PrefixCacheType::kHash, PrefixCacheType::kRadix}) {
        if (name == "dfs-weight" && cache == PrefixCacheType::kHash) continue;
        const std::string type(NameOf(EnumNames<PrefixCacheType>(kPrefixCacheTypeNames), cache));
        benchmark::RegisterBenchmark(("BM_SchedulerIteration/" + name + "/" + type).c_str(),
                                     BM_SchedulerIterationPerPolicy, name, cache)
            ->Arg(256);
      }
    }
    benchmark::RegisterBenchmark(("BM_PolicyOnCommonWorkload/" + name).c_str(),
                                 BM_PolicyOnCommonWorkload, name)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
  }
  return true;
}();

}  // namespace
}  // namespace servelab

BENCHMARK_MAIN();
