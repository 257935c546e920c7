#pragma once
// MetricsCollector: what researchers measure. It sees every iteration and every request
// outcome, streams the per-request and per-step CSV rows as they happen (nothing per
// token is stored), and at the end computes the summary.
//
// Contract with the driver, per iteration on a replica:
//   1. plan = scheduler.Schedule(start); result = backend.Execute(plan)
//   2. metrics.OnStep(replica, plan, start, end, ...)   // BEFORE Commit: reads each
//      request's last_token to get the inter-token latency of the token made at `end`
//   3. scheduler.Commit(result, end) -> finished requests
//   4. metrics.OnFinished(request) for each; metrics.OnRejected(request) at rejection.
//
// Outputs: each CSV gets its header at construction and one row per call, written to the
// stream at once (no buffering of rows here). Times in the CSVs are exact decimals of the
// int64 ns (trailing zeros trimmed, "1.5"); tpot_s is rounded to 1 ns. Rejected rows keep
// arrival_s and leave the other time columns empty. The trace is valid JSON after Finish()
// (or after destruction).
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/request.h"
#include "core/step_plan.h"
#include "core/time.h"

namespace servelab {

struct MetricsOptions {
  std::string run_name;
  std::vector<std::string> client_names;  // Request::client indexes this
  double slo_ttft_s = 0;  // 0 = no target on this metric
  double slo_tpot_s = 0;
  double slo_e2e_s = 0;
  int32_t num_replicas = 1;
  int32_t gpus_per_replica = 1;    // tensor_parallel x pipeline_parallel
  double price_per_gpu_hour = 0;   // USD
  int64_t kv_blocks_per_replica = 0;
};

// Where the streamed outputs go; any pointer may be null (that output is not written).
struct MetricsSinks {
  std::ostream* requests_csv = nullptr;
  std::ostream* steps_csv = nullptr;
  std::ostream* trace_json = nullptr;  // Chrome / Perfetto trace event format
  int64_t trace_max_steps = 100000;    // slices after this many are dropped (noted in the file)
};

// Mean and linearly interpolated percentiles (numpy's default, as vLLM's benchmark).
struct Distribution {
  int64_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};

struct RunSummary {
  std::string name;
  double makespan_s = 0;  // from t = 0 to the last finish or step end, whichever is later
  int64_t num_requests = 0, num_finished = 0, num_rejected = 0;
  int64_t input_tokens = 0, output_tokens = 0;  // over finished requests
  double request_throughput = 0;  // finished req/s over the makespan
  double input_throughput = 0;    // tok/s
  double output_throughput = 0;   // tok/s
  // Per finished request: ttft = first_token - arrival; e2e = finish - arrival;
  // queue = first_scheduled - arrival; tpot = (e2e - ttft) / (output_tokens - 1), and 0
  // for a one-token request (it IS in the distribution, as 0; vLLM's benchmark instead
  // leaves such requests out). itl: one sample per output token after a request's first,
  // = its time since that request's previous token (pauses for preemption included).
  Distribution ttft_s, tpot_s, itl_s, e2e_s, queue_s;
  Distribution normalized_latency_s;  // e2e / output tokens, s per token (Orca, vLLM)
  // SLO: a finished request meets it when every set (non-zero) target holds, each
  // inclusive (ttft <= slo_ttft_s, ...). Rejected requests count as missed:
  // slo_attainment = num_slo_met / (num_finished + num_rejected). With no target set,
  // every finished request meets it.
  double slo_ttft_s = 0, slo_tpot_s = 0, slo_e2e_s = 0;  // the targets, 0 = none
  int64_t num_slo_met = 0;
  double slo_attainment = 0;  // fraction of all requests (finished + rejected) meeting it
  double goodput = 0;         // requests per second meeting every set target
  int32_t num_replicas = 0;
  int64_t num_gpus = 0;       // replicas x gpus_per_replica
  double gpu_busy_fraction = 0;  // sum of step durations / (replicas x makespan)
  int64_t num_steps = 0;
  double mean_batch_size = 0;    // mean over iterations (padding included)
  double mean_kv_utilization = 0;  // step-duration weighted mean of used / total blocks
  double peak_kv_utilization = 0;
  int64_t preemptions = 0;
  int64_t recomputed_tokens = 0;
  double cost_usd = 0;                     // GPUs x price x makespan
  // cost_usd / (output_tokens / 1e6); 0 when no tokens were generated.
  double cost_per_million_output_tokens = 0;
  std::vector<std::pair<std::string, int64_t>> rejected_by_reason;  // enum order, > 0 only
  int64_t trace_dropped_steps = 0;  // steps past MetricsSinks::trace_max_steps

  bool HasSlo() const { return slo_ttft_s > 0 || slo_tpot_s > 0 || slo_e2e_s > 0; }

  nlohmann::ordered_json ToJson() const;
  std::string ToMarkdown() const;
  std::string ToText() const;  // a few lines for stdout
};

class MetricsCollector {
 public:
  MetricsCollector(MetricsOptions options, MetricsSinks sinks);
  ~MetricsCollector();
  MetricsCollector(const MetricsCollector&) = delete;
  MetricsCollector& operator=(const MetricsCollector&) = delete;

  // One iteration of `replica` ran over [start, end). kv_blocks_used after its allocation;
  // `waiting` = requests queued on the replica; `preempted` = preemptions this step.
  void OnStep(int32_t replica, const StepPlan& plan, TimeNs start, TimeNs end,
              int32_t kv_blocks_used, int32_t waiting, int32_t preempted);
  void OnFinished(const Request& request);
  void OnRejected(const Request& request);
  // Closes the trace and returns the summary. Call once, after the last event.
  RunSummary Finish();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace servelab
