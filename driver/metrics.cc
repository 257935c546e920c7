// MetricsCollector: streams requests.csv / steps.csv / trace.json rows as events arrive and
// keeps only what the summary needs: one double per finished request per latency metric
// (ClientMetrics adds its client), the inter-token latencies as a WeightedTimeSample, and
// running sums over steps.
#include "driver/metrics.h"

#include <algorithm>
#include <array>
#include <span>
#include <utility>

#include "driver/chrome_trace.h"
#include "driver/client_metrics.h"
#include "driver/csv_writer.h"
#include "core/percentile.h"

namespace servelab {
namespace {

constexpr std::string_view kRequestsHeader =
    "id,client,replica,status,reject_reason,arrival_s,first_token_s,finish_s,input_tokens,"
    "output_tokens,ttft_s,e2e_s,tpot_s,queue_s,preemptions";
constexpr std::string_view kStepsHeader =
    "replica,start_s,duration_s,batch_size,prefill_tokens,decode_tokens,kv_blocks_used,"
    "kv_blocks_total,waiting,preempted";
constexpr std::array<RejectReason, 4> kRejectReasons = {
    RejectReason::kNone, RejectReason::kExceedsContextWindow,
    RejectReason::kExceedsKvCapacity, RejectReason::kExceedsTokenBudget};

// Correctly rounded ns -> s (t * 1e-9 is not: 1e-9 is inexact).
double Sec(TimeNs ns) { return static_cast<double>(ns) / 1e9; }

Distribution Summarize(WeightedTimeSample& sample) {
  Distribution d;
  if (sample.Count() == 0) return d;
  d.count = sample.Count();
  d.mean = sample.Mean();
  d.p50 = sample.Percentile(50);
  d.p90 = sample.Percentile(90);
  d.p99 = sample.Percentile(99);
  d.max = sample.Max();
  return d;
}

double Ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

}  // namespace

Distribution Distribution::Of(std::span<double> values) {
  Distribution d;
  if (values.empty()) return d;
  double sum = 0;
  for (double v : values) sum += v;  // arrival order: deterministic
  d.count = static_cast<int64_t>(values.size());
  d.mean = sum / static_cast<double>(values.size());
  constexpr std::array<double, 3> kPercentiles = {50, 90, 99};
  std::array<double, 3> p{};
  PercentilesBySelection(values, kPercentiles, p);
  d.p50 = p[0];
  d.p90 = p[1];
  d.p99 = p[2];
  d.max = *std::max_element(values.begin(), values.end());
  return d;
}

class MetricsCollector::Impl {
 public:
  Impl(MetricsOptions options, MetricsSinks sinks)
      : options_(std::move(options)),
        requests_(sinks.requests_csv),
        steps_(sinks.steps_csv),
        clients_csv_(sinks.clients_csv),
        trace_(sinks.trace_json, options_.num_replicas, sinks.trace_max_steps,
               options_.run_name, options_.stages),
        slo_ttft_ns_(FromSeconds(options_.slo_ttft_s)),
        slo_tpot_ns_(FromSeconds(options_.slo_tpot_s)),
        slo_e2e_ns_(FromSeconds(options_.slo_e2e_s)),
        clients_(options_) {
    const std::string_view cached = options_.prefix_caching ? ",cached_tokens" : "";
    const std::string_view session = options_.sessions ? ",session,turn" : "";
    if (requests_.enabled()) {
      requests_.Line(std::string(kRequestsHeader) + std::string(cached) + std::string(session));
    }
    if (steps_.enabled()) {
      std::string header = std::string(kStepsHeader) + std::string(cached);
      for (int32_t stage = 0; options_.stages > 1 && stage < options_.stages; ++stage) {
        header += ",stage" + std::to_string(stage) + "_start_s,stage" + std::to_string(stage) +
                  "_duration_s";
      }
      steps_.Line(header);
    }
    if (options_.prefix_caching) prefix_stats_.resize(options_.num_replicas);
  }

  void OnArrival(const Request& r) { clients_.OnArrival(r); }

  void OnPrefixCacheStats(int32_t replica, const PrefixCacheStats& stats) {
    SERVELAB_CHECK(options_.prefix_caching && replica >= 0 &&
                   static_cast<size_t>(replica) < prefix_stats_.size());
    prefix_stats_[static_cast<size_t>(replica)] = stats;
  }

  void OnStep(int32_t replica, const StepPlan& plan, TimeNs start, TimeNs end,
              int32_t kv_blocks_used, int32_t waiting, int32_t preempted,
              std::span<const StageSpan> stages) {
    // Inter-token latency of every token made at `end`. Most requests also got a token at
    // `start` (the previous step's end): those share the value end - start and are added
    // as one weighted pair.
    // Every token is service delivered at `end`, and a request's first token delivers its
    // prompt too: summed per run of seqs of one client (client_metrics.h says why).
    clients_.BeginStep(end);
    int32_t run_client = -1;
    int64_t run_prompt = 0, run_output = 0;
    int64_t at_step_start = 0;
    for (const ScheduledRequest& s : plan.seqs) {
      if (!s.emits_token || s.is_padding) continue;
      const Request& r = *s.request;
      if (r.client != run_client) {
        if (run_output > 0) clients_.Deliver(run_client, run_prompt, run_output);
        run_client = r.client;
        run_prompt = run_output = 0;
      }
      ++run_output;
      const TimeNs last = r.last_token;
      if (last == kNever) {  // the first token: TTFT, not ITL
        run_prompt += r.prompt_len;
        continue;
      }
      if (last == start) {
        ++at_step_start;
      } else {
        itl_.Add(end - last);
      }
    }
    itl_.Add(end - start, at_step_start);
    if (run_output > 0) clients_.Deliver(run_client, run_prompt, run_output);
    swap_out_blocks_ += static_cast<int64_t>(plan.swap_out.size());
    swap_in_blocks_ += static_cast<int64_t>(plan.swap_in.size());
    RecordStep(replica, start, end, StepShape{static_cast<int64_t>(plan.seqs.size()),
                                              plan.num_prefill_tokens, plan.num_decode_tokens,
                                              plan.num_cached_tokens},
               kv_blocks_used, waiting, preempted, stages);
  }

  void BeginDecodeRun(int32_t replica, const StepPlan& plan) {
    if (runs_.size() <= static_cast<size_t>(replica)) runs_.resize(static_cast<size_t>(replica) + 1);
    DecodeRunShape& run = runs_[static_cast<size_t>(replica)];
    run.shape = StepShape{static_cast<int64_t>(plan.seqs.size()), 0, plan.num_decode_tokens, 0};
    run.clients.clear();
    for (const ScheduledRequest& s : plan.seqs) {
      const int32_t client = s.request->client;
      if (run.clients.empty() || run.clients.back().first != client) run.clients.emplace_back(client, 0);
      ++run.clients.back().second;
    }
  }

  void OnDecodeRunStep(int32_t replica, TimeNs start, TimeNs end, int32_t kv_blocks_used,
                       int32_t waiting) {
    // What OnStep does for such a step: every seq emits a token one step after its last.
    const DecodeRunShape& run = runs_[static_cast<size_t>(replica)];
    clients_.BeginStep(end);
    itl_.Add(end - start, run.shape.batch_size);
    for (const auto& [client, tokens] : run.clients) clients_.Deliver(client, 0, tokens);
    RecordStep(replica, start, end, run.shape, kv_blocks_used, waiting, 0);
  }

 private:
  // What a steps.csv row and the trace say of a step's batch.
  struct StepShape {
    int64_t batch_size = 0;
    int32_t prefill_tokens = 0, decode_tokens = 0, cached_tokens = 0;
  };

  // The per-step sums, the steps.csv row and the trace slice.
  void RecordStep(int32_t replica, TimeNs start, TimeNs end, const StepShape& plan,
                  int32_t kv_blocks_used, int32_t waiting, int32_t preempted,
                  std::span<const StageSpan> stages = {}) {
    SERVELAB_CHECK(stages.size() == (options_.stages > 1 ? size_t(options_.stages) : 0));
    const TimeNs duration = end - start;
    ++num_steps_;
    step_ns_ += duration;
    if (stages.empty()) busy_ns_ += duration;
    for (const StageSpan& stage : stages) busy_ns_ += stage.end - stage.start;
    batch_size_sum_ += plan.batch_size;
    last_end_ = std::max(last_end_, end);
    if (options_.kv_blocks_per_replica > 0) {
      const double util = static_cast<double>(kv_blocks_used) /
                          static_cast<double>(options_.kv_blocks_per_replica);
      kv_util_time_sum_ += util * static_cast<double>(duration);
      kv_util_sum_ += util;
      kv_util_peak_ = std::max(kv_util_peak_, util);
    }

    if (steps_.enabled()) {
      steps_.Int(replica).Seconds(start).Seconds(duration)
          .Int(plan.batch_size)
          .Int(plan.prefill_tokens).Int(plan.decode_tokens)
          .Int(kv_blocks_used).Int(options_.kv_blocks_per_replica)
          .Int(waiting).Int(preempted);
      if (options_.prefix_caching) steps_.Int(plan.cached_tokens);
      for (const StageSpan& stage : stages) steps_.Seconds(stage.start).Seconds(stage.end - stage.start);
      steps_.EndRow();
    }
    TraceStepArgs args;
    args.batch_size = plan.batch_size;
    args.prefill_tokens = plan.prefill_tokens;
    args.decode_tokens = plan.decode_tokens;
    args.kv_blocks_used = kv_blocks_used;
    args.waiting = waiting;
    args.cached_tokens = options_.prefix_caching ? plan.cached_tokens : -1;
    if (stages.empty()) trace_.Step(replica, start, end, args);
    for (size_t stage = 0; stage < stages.size(); ++stage) {
      trace_.Step(replica, stages[stage].start, stages[stage].end, args, static_cast<int32_t>(stage));
    }
  }

 public:

  void OnFinished(const Request& r) {
    ++num_finished_;
    input_tokens_ += r.prompt_len;
    output_tokens_ += r.num_generated;
    preemptions_ += r.num_preemptions;
    recomputed_tokens_ += r.num_recomputed_tokens;
    last_end_ = std::max(last_end_, r.finish);

    // The scheduler sets first_scheduled and first_token before a request can finish;
    // should either be missing, the latency falls back to the next event that exists.
    const TimeNs first_token = r.first_token != kNever ? r.first_token : r.finish;
    const TimeNs first_scheduled = r.first_scheduled != kNever ? r.first_scheduled : first_token;
    const TimeNs ttft = first_token - r.arrival;
    const TimeNs e2e = r.finish - r.arrival;
    const TimeNs queue = first_scheduled - r.arrival;
    const double tpot_ns = r.num_generated > 1
                               ? static_cast<double>(r.finish - first_token) / (r.num_generated - 1)
                               : 0.0;
    clients_.OnFinished(r, queue);
    ttft_.push_back(Sec(ttft));
    e2e_.push_back(Sec(e2e));
    queue_.push_back(Sec(queue));
    tpot_.push_back(tpot_ns / 1e9);
    normalized_.push_back(Sec(e2e) / std::max<int32_t>(r.num_generated, 1));

    const bool met = (slo_ttft_ns_ <= 0 || ttft <= slo_ttft_ns_) &&
                     (slo_tpot_ns_ <= 0 || tpot_ns <= static_cast<double>(slo_tpot_ns_)) &&
                     (slo_e2e_ns_ <= 0 || e2e <= slo_e2e_ns_);
    if (met) ++slo_met_;

    if (!requests_.enabled()) return;
    RowStart(r, "finished");
    requests_.Seconds(r.arrival);
    if (r.first_token != kNever) requests_.Seconds(r.first_token); else requests_.Empty();
    requests_.Seconds(r.finish).Int(r.prompt_len).Int(r.num_generated);
    if (r.first_token != kNever) requests_.Seconds(ttft); else requests_.Empty();
    requests_.Seconds(e2e).SecondsDouble(tpot_ns / 1e9);
    if (r.first_scheduled != kNever) requests_.Seconds(queue); else requests_.Empty();
    requests_.Int(r.num_preemptions);
    if (options_.prefix_caching) requests_.Int(r.num_cached_tokens);
    if (options_.sessions) requests_.Int(r.session).Int(r.turn);
    requests_.EndRow();
  }

  void OnRejected(const Request& r) {
    ++num_rejected_;
    ++rejected_by_reason_[static_cast<size_t>(r.reject_reason)];
    clients_.OnRejected(r);
    preemptions_ += r.num_preemptions;
    recomputed_tokens_ += r.num_recomputed_tokens;
    if (!requests_.enabled()) return;
    RowStart(r, "rejected");
    // arrival is known; the other times never happened.
    requests_.Seconds(r.arrival).Empty().Empty().Int(r.prompt_len).Int(r.num_generated);
    requests_.Empty().Empty().Empty().Empty().Int(r.num_preemptions);
    if (options_.prefix_caching) requests_.Int(r.num_cached_tokens);
    if (options_.sessions) requests_.Int(r.session).Int(r.turn);
    requests_.EndRow();
  }

  RunSummary Finish() {
    trace_.Close(last_end_);
    RunSummary s;
    s.name = options_.run_name;
    s.makespan_s = Sec(last_end_);
    s.num_finished = num_finished_;
    s.num_rejected = num_rejected_;
    s.num_requests = num_finished_ + num_rejected_;
    s.input_tokens = input_tokens_;
    s.output_tokens = output_tokens_;
    s.request_throughput = Ratio(static_cast<double>(num_finished_), s.makespan_s);
    s.input_throughput = Ratio(static_cast<double>(input_tokens_), s.makespan_s);
    s.output_throughput = Ratio(static_cast<double>(output_tokens_), s.makespan_s);
    clients_.Summarize(last_end_, ttft_, e2e_, s);  // s.ttft_s, s.e2e_s too
    s.tpot_s = Distribution::Of(tpot_);
    s.itl_s = Summarize(itl_);
    s.queue_s = Distribution::Of(queue_);
    s.normalized_latency_s = Distribution::Of(normalized_);
    s.slo_ttft_s = options_.slo_ttft_s;
    s.slo_tpot_s = options_.slo_tpot_s;
    s.slo_e2e_s = options_.slo_e2e_s;
    s.num_slo_met = slo_met_;
    s.slo_attainment = Ratio(static_cast<double>(slo_met_), static_cast<double>(s.num_requests));
    s.goodput = Ratio(static_cast<double>(slo_met_), s.makespan_s);
    s.num_replicas = options_.num_replicas;
    s.num_gpus = static_cast<int64_t>(options_.num_replicas) * options_.gpus_per_replica;
    s.kv_blocks_per_replica = options_.kv_blocks_per_replica;
    s.gpu_busy_fraction = Ratio(static_cast<double>(busy_ns_),
                                static_cast<double>(options_.num_replicas) *
                                    static_cast<double>(last_end_) *
                                    static_cast<double>(std::max(1, options_.stages)));
    s.num_steps = num_steps_;
    s.mean_batch_size =
        Ratio(static_cast<double>(batch_size_sum_), static_cast<double>(num_steps_));
    // Duration-weighted; when every step took no time, the plain mean over steps.
    s.mean_kv_utilization = step_ns_ > 0
                                ? kv_util_time_sum_ / static_cast<double>(step_ns_)
                                : Ratio(kv_util_sum_, static_cast<double>(num_steps_));
    s.peak_kv_utilization = kv_util_peak_;
    s.preemptions = preemptions_;
    s.recomputed_tokens = recomputed_tokens_;
    s.swap_out_blocks = swap_out_blocks_;
    s.swap_in_blocks = swap_in_blocks_;
    s.swap_bytes = static_cast<double>(swap_out_blocks_ + swap_in_blocks_) *
                   static_cast<double>(options_.kv_bytes_per_block);
    s.cost_usd = static_cast<double>(s.num_gpus) * options_.price_per_gpu_hour *
                 s.makespan_s / 3600.0;
    s.cost_per_million_output_tokens =
        Ratio(s.cost_usd, static_cast<double>(output_tokens_) / 1e6);
    for (RejectReason reason : kRejectReasons) {
      const int64_t n = rejected_by_reason_[static_cast<size_t>(reason)];
      if (n == 0) continue;
      // A rejection without a reason is a scheduler bug, but still counted and shown.
      const std::string_view name =
          reason == RejectReason::kNone ? "unspecified" : RejectReasonName(reason);
      s.rejected_by_reason.emplace_back(std::string(name), n);
    }
    s.trace_dropped_steps = trace_.dropped_steps();
    if (options_.prefix_caching) {
      s.has_prefix_cache = true;
      for (const PrefixCacheStats& r : prefix_stats_) {
        s.prefix_cache_replicas.emplace_back().Add(r);
        s.prefix_cache.Add(r);
      }
    }
    if (clients_csv_ != nullptr) s.WriteClientsCsv(*clients_csv_);
    return s;
  }

 private:
  // id, client, replica, status, reject_reason.
  void RowStart(const Request& r, std::string_view status) {
    requests_.Int(r.id);
    if (r.client >= 0 && static_cast<size_t>(r.client) < options_.client_names.size()) {
      requests_.Str(options_.client_names[static_cast<size_t>(r.client)]);
    } else {
      requests_.Int(r.client);  // no name configured: the index
    }
    requests_.Int(r.replica).Str(status).Str(RejectReasonName(r.reject_reason));
  }

  MetricsOptions options_;
  CsvWriter requests_;
  CsvWriter steps_;
  std::ostream* clients_csv_;
  ChromeTraceWriter trace_;
  TimeNs slo_ttft_ns_, slo_tpot_ns_, slo_e2e_ns_;  // 0 = no target
  ClientMetrics clients_;

  // One value per finished request, in seconds, in OnFinished order.
  std::vector<double> ttft_, tpot_, e2e_, queue_, normalized_;
  WeightedTimeSample itl_;  // ns, weighted by token count
  int64_t num_finished_ = 0, num_rejected_ = 0, slo_met_ = 0;
  int64_t input_tokens_ = 0, output_tokens_ = 0;
  int64_t preemptions_ = 0, recomputed_tokens_ = 0;
  int64_t swap_out_blocks_ = 0, swap_in_blocks_ = 0;
  std::vector<PrefixCacheStats> prefix_stats_;  // by replica, as reported at the end
  std::array<int64_t, 4> rejected_by_reason_{};  // indexed by RejectReason

  TimeNs last_end_ = 0;  // latest step end or finish: the makespan
  int64_t num_steps_ = 0;
  TimeNs busy_ns_ = 0;   // sum of step durations over all replicas
  int64_t batch_size_sum_ = 0;
  TimeNs step_ns_ = 0;   // sum of step durations (overlapping when pipelined)
  double kv_util_time_sum_ = 0;  // sum of used/total x duration_ns
  double kv_util_sum_ = 0;
  double kv_util_peak_ = 0;

  // Each replica's decode run being recorded (BeginDecodeRun): its batch, and its seqs'
  // clients as runs of (client, seqs) in batch order.
  struct DecodeRunShape {
    StepShape shape;
    std::vector<std::pair<int32_t, int64_t>> clients;
  };
  std::vector<DecodeRunShape> runs_;
};

MetricsCollector::MetricsCollector(MetricsOptions options, MetricsSinks sinks)
    : impl_(std::make_unique<Impl>(std::move(options), sinks)) {}
MetricsCollector::~MetricsCollector() = default;

void MetricsCollector::OnArrival(const Request& request) { impl_->OnArrival(request); }
void MetricsCollector::OnStep(int32_t replica, const StepPlan& plan, TimeNs start, TimeNs end,
                              int32_t kv_blocks_used, int32_t waiting, int32_t preempted,
                              std::span<const StageSpan> stages) {
  impl_->OnStep(replica, plan, start, end, kv_blocks_used, waiting, preempted, stages);
}

void MetricsCollector::BeginDecodeRun(int32_t replica, const StepPlan& plan) {
  impl_->BeginDecodeRun(replica, plan);
}

void MetricsCollector::OnDecodeRunStep(int32_t replica, TimeNs start, TimeNs end,
                                       int32_t kv_blocks_used, int32_t waiting) {
  impl_->OnDecodeRunStep(replica, start, end, kv_blocks_used, waiting);
}
void MetricsCollector::OnFinished(const Request& request) { impl_->OnFinished(request); }
void MetricsCollector::OnPrefixCacheStats(int32_t replica, const PrefixCacheStats& stats) {
  impl_->OnPrefixCacheStats(replica, stats);
}

void PrefixCacheSummary::Add(const PrefixCacheStats& stats) {
  queried_tokens += stats.queried_tokens;
  hit_tokens += stats.hit_tokens;
  queried_blocks += stats.queried_blocks;
  hit_blocks += stats.hit_blocks;
  inserted_blocks += stats.inserted_blocks;
  evicted_blocks += stats.evicted_blocks;
  token_hit_rate = Ratio(static_cast<double>(hit_tokens), static_cast<double>(queried_tokens));
  block_hit_rate = Ratio(static_cast<double>(hit_blocks), static_cast<double>(queried_blocks));
}
void MetricsCollector::OnRejected(const Request& request) { impl_->OnRejected(request); }
RunSummary MetricsCollector::Finish() { return impl_->Finish(); }

}  // namespace servelab
