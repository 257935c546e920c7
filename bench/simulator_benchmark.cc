// Speed of the simulator, the research instrument: scheduler cost per iteration, the
// whole Azure conversation trace, and a million synthetic requests. Figures are
// benchmark counters; the targets live in the README, never in unit tests.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <ostream>

#include "core/kv_cache_manager.h"
#include "core/scheduler.h"
#include "driver/config_yaml.h"
#include "policies/fcfs_policy.h"
#include "sim/sim_backend.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"

namespace servelab {
namespace {

// Discards what it is given, so CSV formatting is measured without disk writes.
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

double PeakRssMib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

// Schedule + Commit with `batch` running requests in steady state: each generates 1,000
// tokens and is replaced by a fresh 500-token prompt when it finishes (so prefill chunks,
// block growth, completions and admissions all happen at their natural rates). The
// benchmark's time is the scheduler's own cost per iteration.
void BM_SchedulerIteration(benchmark::State& state) {
  const int32_t batch = static_cast<int32_t>(state.range(0));
  SchedulerConfig config;
  config.max_num_seqs = batch;
  KvCacheManager kv(batch * 100, 16, 0);
  Scheduler scheduler(config, 1 << 20, std::make_unique<FcfsPolicy>(), &kv);
  std::deque<Request> requests(batch);
  int64_t next_id = 0;
  auto start = [&](Request& r, TimeNs now) {
    r = Request();
    r.id = next_id;
    r.prompt_len = 500;
    r.target_output_len = 1000 - static_cast<int32_t>(next_id++ % batch);  // staggered ends
    scheduler.AddRequest(r, now);
  };
  for (auto& r : requests) start(r, 0);
  StepResult result;
  result.elapsed = kNsPerMs;
  TimeNs now = 0;
  int64_t request_iterations = 0;
  std::vector<Request*> finished;
  for (auto _ : state) {
    const StepPlan& plan = scheduler.Schedule(now);
    request_iterations += static_cast<int64_t>(plan.seqs.size());
    now += kNsPerMs;
    auto done = scheduler.Commit(result, now);
    finished.assign(done.begin(), done.end());
    for (Request* r : finished) start(*r, now);
  }
  state.counters["batch"] = static_cast<double>(request_iterations) /
                            static_cast<double>(std::max<int64_t>(1, state.iterations()));
  state.counters["request_iterations_per_s"] =
      benchmark::Counter(static_cast<double>(request_iterations), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SchedulerIteration)->Arg(1)->Arg(32)->Arg(256);

// Each iteration is the whole run as `servelab run` does it, files aside: prepare (the
// trace is read here), build the backends, simulate; with `rows` false, without the
// per-request and per-step CSV rows, as the probes of `plan` and `sweep` run it (they keep
// the summary only).
void RunAndReport(benchmark::State& state, const ExperimentConfig& config, bool rows = true) {
  NullBuffer null_buffer;
  std::ostream null_stream(&null_buffer);
  RunSummary summary;
  for (auto _ : state) {
    MetricsSinks sinks{rows ? &null_stream : nullptr, rows ? &null_stream : nullptr, nullptr, 0};
    auto s = RunSimulation(config, sinks);
    if (!s.ok()) {
      state.SkipWithError(s.status().message().c_str());
      return;
    }
    summary = s->summary;
  }
  state.counters["requests"] = static_cast<double>(summary.num_requests);
  state.counters["steps"] = static_cast<double>(summary.num_steps);
  state.counters["simulated_s"] = summary.makespan_s;
  state.counters["speedup_vs_real_time"] = benchmark::Counter(
      summary.makespan_s * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["peak_rss_MiB"] = PeakRssMib();
}

// The whole Azure LLM inference trace 2023 (conversation, 19,366 requests over ~1 h) on
// one Llama-2-7B / A100 replica, stepping every iteration (decode_runs:0) and advancing
// decode runs in strides (decode_runs:1, the default), side by side; `rows:0` is the same
// simulation as a plan or sweep probe runs it, without formatting its 152,545 steps.csv
// rows and 19,366 requests.csv rows. Target: 100,000x real time (README).
void BM_AzureConvTrace(benchmark::State& state) {
  // The switch PrepareExperiment reads; the outputs are identical either way.
  if (state.range(0) == 0) {
    ::setenv("SERVELAB_DECODE_RUNS", "0", 1);
  } else {
    ::unsetenv("SERVELAB_DECODE_RUNS");
  }
  const std::string path = std::string(SERVELAB_SHARED_DATA) + "/traces/azure2023_conv.csv";
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("trace not found: " + path).c_str());
    return;
  }
  ExperimentConfig c;
  c.name = "azure_conv";
  c.model = *FindModel("llama-2-7b");
  c.hardware.gpu = *FindGpu("a100-80gb");
  c.workload.has_trace = true;
  c.workload.trace.path = path;
  c.workload.trace.format = TraceFormat::kAzure;
  RunAndReport(state, c, state.range(1) != 0);
  ::unsetenv("SERVELAB_DECODE_RUNS");
}
BENCHMARK(BM_AzureConvTrace)
    ->ArgNames({"decode_runs", "rows"})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({0, 0})
    ->Args({1, 0})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

// One million synthetic requests (lognormal, mean 1,000 in / 200 out) on Llama-3-8B /
// H100 near capacity. Target: under 20 s and under 2 GB peak memory.
void BM_MillionRequests(benchmark::State& state) {
  ExperimentConfig c;
  c.name = "million";
  c.model = *FindModel("llama-3-8b");
  c.hardware.gpu = *FindGpu("h100-80gb");
  c.workload.num_requests = 1'000'000;
  c.workload.arrival.rate = 24;
  c.workload.input_tokens.dist = LengthDist::kLognormal;
  c.workload.input_tokens.mean = 1000;
  c.workload.input_tokens.cv = 1.0;
  c.workload.input_tokens.max = 7000;
  c.workload.output_tokens.dist = LengthDist::kLognormal;
  c.workload.output_tokens.mean = 200;
  c.workload.output_tokens.cv = 1.0;
  c.workload.output_tokens.max = 1000;
  RunAndReport(state, c);
}
BENCHMARK(BM_MillionRequests)->Unit(benchmark::kSecond)->Iterations(1);

// experiments/gpu/validation_cuda.yaml's workload, 20,000 requests at 41 req/s on one
// H200 (Llama-3-8B, its engine's KV pool), on the cost model fitted to run 4's profile of
// servelab's CUDA engine (model:1: its attention kernels' blocks placed on the SMs each
// step, sim/block_slots.h) or on the roofline (model:0), side by side: what the
// calibrated model's grids cost a decode-heavy simulation (2026-12-04 here: 222 ms a run
// against the roofline's 42 ms, which also schedules other steps; `servelab run` of it,
// the whole process, 0.27 s against 0.20 s with the grids counted as waves).
void BM_CalibratedOwnKernels(benchmark::State& state) {
  const std::string model = std::string(SERVELAB_SOURCE_DIR) + "/experiments/results/h200/run4-offline/MODEL.yaml";
  const std::string cost = state.range(0) != 0 ? "{type: calibrated, path: \"" + model + "\"}" : "{type: roofline}";
  auto config = ParseExperiment(
      "name: own_kernels\nseed: 1\nmodel: llama-3-8b\n"
      "hardware: {gpu: h200-141gb, num_gpu_blocks: 56014}\n"
      "scheduler: {max_num_seqs: 128, max_num_batched_tokens: 4096, chunked_prefill: true}\n"
      "workload:\n  num_requests: 20000\n  arrival: {process: poisson, rate: 41}\n"
      "  input_tokens: {dist: lognormal, mean: 600, cv: 1.0, max: 3000}\n"
      "  output_tokens: {dist: uniform, min: 64, max: 256}\n"
      "cost_model: " + cost + "\n",
      "own_kernels.yaml", ".");
  if (!config.ok()) {
    state.SkipWithError(config.status().message().c_str());
    return;
  }
  RunAndReport(state, *config, false);
}
BENCHMARK(BM_CalibratedOwnKernels)->ArgName("model")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace servelab

BENCHMARK_MAIN();
