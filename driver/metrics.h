#pragma once
// MetricsCollector: what researchers measure. It sees every iteration and every request
// outcome, streams the per-request and per-step CSV rows as they happen (nothing per
// token is stored), and at the end computes the summary.
//
// Contract with the driver: metrics.OnArrival(request) when a request arrives (before it
// can be rejected or scheduled), and per iteration on a replica:
//   1. plan = scheduler.Schedule(start); result = backend.Execute(plan)
//   2. metrics.OnStep(replica, plan, start, end, ...)   // BEFORE Commit: reads each
//      request's last_token to get the inter-token latency of the token made at `end`
//   3. scheduler.Commit(result, end) -> finished requests
//   4. metrics.OnFinished(request) for each; metrics.OnRejected(request) at rejection.
//
// The service-difference windows assume the calls come in time order (OnArrival at
// arrival, OnStep at `end`, OnFinished at finish, OnRejected at Request::finish or, when
// unset, arrival); a late call is counted in the current window.
//
// Outputs: requests.csv and steps.csv get their header at construction and one row per
// call, written to the stream at once (no buffering of rows here); clients.csv is written
// whole at Finish(). Times in the CSVs are exact decimals of the int64 ns (trailing zeros
// trimmed, "1.5"); tpot_s is rounded to 1 ns. Rejected rows keep arrival_s and leave the
// other time columns empty. The trace is valid JSON after Finish() (or after destruction).
#include <cstdint>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/kv_cache_manager.h"
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
  // The backend's KV pool (KvCapacity): blocks per replica, and the bytes one block
  // copy moves between device and host over all the replica's GPUs (0 = unknown:
  // swap_bytes is then 0).
  int64_t kv_blocks_per_replica = 0;
  int64_t kv_bytes_per_block = 0;

  // Fairness. Client i's weight is client_weights[i] (> 0), 1 where missing.
  std::vector<double> client_weights;
  // VTC's cost function: service units = input_weight x prompt tokens + output_weight x
  // output tokens (the paper's defaults, 1 and 2).
  double service_input_weight = 1.0;
  double service_output_weight = 2.0;
  double fairness_window_s = 10.0;  // service-difference window; <= 0 = not computed
  // Prefix caching on (scheduler.prefix_cache): requests.csv and steps.csv gain a
  // cached_tokens column, the trace a cached_tokens arg, the summary a prefix_cache block.
  bool prefix_caching = false;
  // Multi-turn sessions (workload.sessions): requests.csv gains session and turn columns.
  bool sessions = false;
  // Pipeline stages per replica (hardware.pipeline_parallel): above 1, steps.csv gains
  // stage<s>_start_s and stage<s>_duration_s for each stage, the trace one track per
  // stage, and gpu_busy_fraction counts each stage's busy time.
  int32_t stages = 1;
};

// When one batch was on one pipeline stage.
struct StageSpan {
  TimeNs start = 0;
  TimeNs end = 0;
};

// Where the streamed outputs go; any pointer may be null (that output is not written).
struct MetricsSinks {
  std::ostream* requests_csv = nullptr;
  std::ostream* steps_csv = nullptr;
  std::ostream* trace_json = nullptr;  // Chrome / Perfetto trace event format
  int64_t trace_max_steps = 100000;    // slices after this many are dropped (noted in the file)
  std::ostream* clients_csv = nullptr;  // one row per client, written at Finish()
};

// Mean and linearly interpolated percentiles (numpy's default, as vLLM's benchmark).
struct Distribution {
  int64_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;

  // Of `values`, which it reorders (the mean sums them in their given order first).
  // No values: all zeros.
  static Distribution Of(std::span<double> values);
};

// One client's share of a run (index = Request::client).
struct ClientSummary {
  std::string name;   // MetricsOptions::client_names[i], else the index
  double weight = 1;  // fairness weight
  int64_t requests = 0, finished = 0, rejected = 0;  // requests = finished + rejected
  int64_t input_tokens = 0, output_tokens = 0;       // over finished requests
  // Service units delivered (see RunSummary's fairness block), and service / weight.
  double service = 0, service_per_weight = 0;
  double output_throughput = 0;  // output_tokens / the run's makespan, tok/s
  Distribution ttft_s, e2e_s;    // finished requests, as RunSummary's
  double max_queue_s = 0;        // longest first_scheduled - arrival
};

// Prefix-cache outcome of one replica or of all (KvCacheManager's PrefixCacheStats).
struct PrefixCacheSummary {
  int64_t queried_tokens = 0, hit_tokens = 0;  // hit_tokens = prefill tokens saved
  int64_t queried_blocks = 0, hit_blocks = 0;
  int64_t inserted_blocks = 0, evicted_blocks = 0;
  double token_hit_rate = 0;  // hit_tokens / queried_tokens (0 with no query)
  double block_hit_rate = 0;  // hit_blocks / queried_blocks

  void Add(const PrefixCacheStats& stats);  // and recomputes the rates
  nlohmann::ordered_json ToJson() const;
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
  // The KV blocks each replica had (MetricsOptions): the cost model's count on the
  // simulator, the runner's pool on the engine. Not in ToJson (the run header has it).
  int64_t kv_blocks_per_replica = 0;
  // sum of step durations / (replicas x makespan); with pipeline stages, of each stage's
  // busy time / (replicas x stages x makespan)
  double gpu_busy_fraction = 0;
  int64_t num_steps = 0;
  double mean_batch_size = 0;    // mean over iterations (padding included)
  double mean_kv_utilization = 0;  // step-duration weighted mean of used / total blocks
  double peak_kv_utilization = 0;
  int64_t preemptions = 0;
  int64_t recomputed_tokens = 0;
  // KV blocks copied device -> host (swap_out) and host -> device (swap_in), all replicas.
  // swap_bytes = (swap_out_blocks + swap_in_blocks) x kv_bytes_per_block: bytes over the
  // host links of every GPU together, i.e. each copy moves one whole block of the
  // replica (every GPU its shard).
  int64_t swap_out_blocks = 0, swap_in_blocks = 0;
  double swap_bytes = 0;
  double cost_usd = 0;                     // GPUs x price x makespan
  // cost_usd / (output_tokens / 1e6); 0 when no tokens were generated.
  double cost_per_million_output_tokens = 0;
  std::vector<std::pair<std::string, int64_t>> rejected_by_reason;  // enum order, > 0 only
  int64_t trace_dropped_steps = 0;  // steps past MetricsSinks::trace_max_steps
  // Prefix caching (MetricsOptions::prefix_caching): over all replicas, and per replica.
  bool has_prefix_cache = false;
  PrefixCacheSummary prefix_cache;
  std::vector<PrefixCacheSummary> prefix_cache_replicas;

  // Fairness. Service is counted as DELIVERED, in VTC's units: a request's prompt
  // (input_weight x prompt_len) when the step that makes its first token ends (once:
  // a recompute after preemption is not charged again; a chunked prefill is charged
  // whole at its last chunk), and output_weight per token at the end of the step that
  // makes it. Over a whole run a client's service is input_weight x prompt tokens +
  // output_weight x output tokens of its requests that got a first token.
  double service_input_weight = 0, service_output_weight = 0, fairness_window_s = 0;
  std::vector<ClientSummary> clients;  // every configured client, then any seen beyond
  // Jain's index (Σx)² / (n Σx²) over x = service / weight of the n clients with >= 1
  // request; 1 when all got equal weighted service (or all got none), 0 with no clients.
  double jain_index = 0;
  // VTC's service difference (core/fairness_tracker.h): per window of fairness_window_s,
  // max - min of service / weight over the clients backlogged (a request in the system)
  // throughout the window; over the windows with >= 2 such clients: max, mean, count.
  double service_difference_max = 0, service_difference_mean = 0;
  int64_t service_difference_windows = 0;
  // Jain's index among the clients backlogged in each such window that served anyone,
  // averaged over those windows (1 when none): the fairness of the split while clients
  // compete, which whole-run Jain cannot show once every request has finished.
  double window_jain_index = 1;

  bool HasSlo() const { return slo_ttft_s > 0 || slo_tpot_s > 0 || slo_e2e_s > 0; }

  nlohmann::ordered_json ToJson() const;
  std::string ToMarkdown() const;
  std::string ToText() const;  // a few lines for stdout
  // clients.csv: a header and one row per client (columns in core/metrics_report.cc).
  void WriteClientsCsv(std::ostream& out) const;
};

class MetricsCollector {
 public:
  MetricsCollector(MetricsOptions options, MetricsSinks sinks);
  ~MetricsCollector();
  MetricsCollector(const MetricsCollector&) = delete;
  MetricsCollector& operator=(const MetricsCollector&) = delete;

  // A request arrived (before any OnStep, OnFinished or OnRejected of it). Only the
  // service difference needs it: without arrivals no client counts as backlogged.
  void OnArrival(const Request& request);
  // One iteration of `replica` ran over [start, end). kv_blocks_used after its allocation;
  // `waiting` = requests queued on the replica; `preempted` = preemptions this step.
  // `stages`: with pipeline stages (MetricsOptions::stages > 1), the batch's span on each.
  void OnStep(int32_t replica, const StepPlan& plan, TimeNs start, TimeNs end,
              int32_t kv_blocks_used, int32_t waiting, int32_t preempted,
              std::span<const StageSpan> stages = {});
  // Decode runs (Scheduler::BeginDecodeRun): `plan` is `replica`'s run's batch; then, for
  // each iteration of the run the driver advances without a plan, OnDecodeRunStep records
  // exactly what OnStep would for that iteration (every seq emits a token one step after
  // its previous one; nothing is prefilled, cached, swapped or preempted).
  void BeginDecodeRun(int32_t replica, const StepPlan& plan);
  void OnDecodeRunStep(int32_t replica, TimeNs start, TimeNs end, int32_t kv_blocks_used,
                       int32_t waiting);
  void OnFinished(const Request& request);
  void OnRejected(const Request& request);
  // Prefix caching: replica's cache counters at the end of the run (before Finish).
  void OnPrefixCacheStats(int32_t replica, const PrefixCacheStats& stats);
  // Closes the trace and returns the summary. Call once, after the last event.
  RunSummary Finish();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace servelab
