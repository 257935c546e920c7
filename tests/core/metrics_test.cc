#include "core/metrics.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace servelab {
namespace {

constexpr TimeNs kMs = kNsPerMs;

Request MakeRequest(int64_t id, int32_t client, TimeNs arrival, int32_t prompt, int32_t output) {
  Request r;
  r.id = id;
  r.client = client;
  r.arrival = arrival;
  r.prompt_len = prompt;
  r.target_output_len = output;
  r.replica = 0;
  return r;
}

// Plays the scheduler's part around MetricsCollector exactly as core/metrics.h documents:
// admission stamps first_scheduled, OnStep sees the request before Commit, Commit then
// advances tokens and timestamps, and finished requests go to OnFinished.
void RunStep(MetricsCollector& metrics, TimeNs start, TimeNs end,
             const std::vector<std::pair<Request*, int32_t>>& batch, int32_t kv_used,
             int32_t waiting, int32_t preempted, int32_t replica = 0) {
  StepPlan plan;
  plan.start = start;
  for (auto [r, new_tokens] : batch) {
    if (r->first_scheduled == kNever) r->first_scheduled = start;
    ScheduledRequest s;
    s.request = r;
    s.num_new_tokens = new_tokens;
    s.num_computed_tokens = r->num_computed_tokens;
    s.emits_token = r->num_computed_tokens + new_tokens == r->NumTokens();
    plan.seqs.push_back(s);
    if (s.IsDecode()) plan.num_decode_tokens += 1;
    else plan.num_prefill_tokens += new_tokens;
    plan.num_emitting += s.emits_token ? 1 : 0;
  }
  metrics.OnStep(replica, plan, start, end, kv_used, waiting, preempted);
  std::vector<Request*> finished;
  for (const ScheduledRequest& s : plan.seqs) {
    Request& r = *s.request;
    r.num_computed_tokens += s.num_new_tokens;
    if (!s.emits_token) continue;
    r.num_generated += 1;
    if (r.first_token == kNever) r.first_token = end;
    r.last_token = end;
    if (r.num_generated == r.target_output_len) {
      r.finish = end;
      r.state = RequestState::kFinished;
      finished.push_back(&r);
    }
  }
  for (Request* r : finished) metrics.OnFinished(*r);
}

struct Outputs {
  std::ostringstream requests, steps, trace;
  RunSummary summary;
};

MetricsOptions HandOptions() {
  MetricsOptions o;
  o.run_name = "hand";
  o.client_names = {"alice", "bob"};
  o.slo_ttft_s = 1.0;
  o.slo_tpot_s = 0.7;
  o.num_replicas = 1;
  o.gpus_per_replica = 2;
  o.price_per_gpu_hour = 3.6;
  o.kv_blocks_per_replica = 100;
  return o;
}

// Three steps, two requests and a rejection (times in ms):
//   A: arrives 0, prompt 4, 3 tokens.  B: arrives 500, prompt 2, 2 tokens.
//   C: arrives 200, rejected (context window).
//   step 1 [250, 1000)  A prefill                     -> A token 1 at 1000
//   step 2 [1000, 1500) A decode, B prefill           -> A token 2 (ITL 500), B token 1
//   step 3 [1750, 2250) A decode, B decode (idle gap) -> ITL 750 each; both finish
void RunHandCase(Outputs& out, MetricsOptions options = HandOptions()) {
  MetricsSinks sinks;
  sinks.requests_csv = &out.requests;
  sinks.steps_csv = &out.steps;
  sinks.trace_json = &out.trace;
  MetricsCollector metrics(std::move(options), sinks);
  Request a = MakeRequest(1, 0, 0, 4, 3);
  Request b = MakeRequest(2, 1, 500 * kMs, 2, 2);
  b.num_preemptions = 1;  // as if preempted once earlier, 2 tokens recomputed
  b.num_recomputed_tokens = 2;
  Request c = MakeRequest(3, 1, 200 * kMs, 5000, 10);
  c.state = RequestState::kRejected;
  c.reject_reason = RejectReason::kExceedsContextWindow;

  RunStep(metrics, 250 * kMs, 1000 * kMs, {{&a, 4}}, 10, 0, 0);
  metrics.OnRejected(c);
  RunStep(metrics, 1000 * kMs, 1500 * kMs, {{&a, 1}, {&b, 2}}, 20, 0, 0);
  RunStep(metrics, 1750 * kMs, 2250 * kMs, {{&a, 1}, {&b, 1}}, 30, 1, 1);
  out.summary = metrics.Finish();
}

TEST(MetricsCollectorTest, RequestsCsvIsExact) {
  Outputs out;
  RunHandCase(out);
  EXPECT_EQ(out.requests.str(),
            "id,client,replica,status,reject_reason,arrival_s,first_token_s,finish_s,"
            "input_tokens,output_tokens,ttft_s,e2e_s,tpot_s,queue_s,preemptions\n"
            "3,bob,0,rejected,exceeds_context_window,0.2,,,5000,0,,,,,0\n"
            "1,alice,0,finished,,0,1,2.25,4,3,1,2.25,0.625,0.25,0\n"
            "2,bob,0,finished,,0.5,1.5,2.25,2,2,1,1.75,0.75,0.5,1\n");
}

TEST(MetricsCollectorTest, StepsCsvIsExact) {
  Outputs out;
  RunHandCase(out);
  EXPECT_EQ(out.steps.str(),
            "replica,start_s,duration_s,batch_size,prefill_tokens,decode_tokens,"
            "kv_blocks_used,kv_blocks_total,waiting,preempted\n"
            "0,0.25,0.75,1,4,0,10,100,0,0\n"
            "0,1,0.5,2,2,1,20,100,0,0\n"
            "0,1.75,0.5,2,0,2,30,100,1,1\n");
}

TEST(MetricsCollectorTest, SummaryNumbersAreExact) {
  Outputs out;
  RunHandCase(out);
  const RunSummary& s = out.summary;
  EXPECT_EQ(s.name, "hand");
  EXPECT_DOUBLE_EQ(s.makespan_s, 2.25);
  EXPECT_EQ(s.num_requests, 3);
  EXPECT_EQ(s.num_finished, 2);
  EXPECT_EQ(s.num_rejected, 1);
  EXPECT_EQ(s.input_tokens, 6);
  EXPECT_EQ(s.output_tokens, 5);
  EXPECT_DOUBLE_EQ(s.request_throughput, 2 / 2.25);
  EXPECT_DOUBLE_EQ(s.input_throughput, 6 / 2.25);
  EXPECT_DOUBLE_EQ(s.output_throughput, 5 / 2.25);

  EXPECT_EQ(s.ttft_s.count, 2);
  EXPECT_DOUBLE_EQ(s.ttft_s.p50, 1.0);
  EXPECT_DOUBLE_EQ(s.ttft_s.max, 1.0);
  // TPOT {0.625, 0.75}: numpy.percentile -> 0.6875, 0.7375, 0.74875.
  EXPECT_EQ(s.tpot_s.count, 2);
  EXPECT_DOUBLE_EQ(s.tpot_s.mean, 0.6875);
  EXPECT_DOUBLE_EQ(s.tpot_s.p50, 0.6875);
  EXPECT_DOUBLE_EQ(s.tpot_s.p90, 0.7375);
  EXPECT_DOUBLE_EQ(s.tpot_s.p99, 0.74875);
  EXPECT_DOUBLE_EQ(s.tpot_s.max, 0.75);
  // ITL {0.5, 0.75, 0.75}: first tokens are not ITL samples.
  EXPECT_EQ(s.itl_s.count, 3);
  EXPECT_DOUBLE_EQ(s.itl_s.mean, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.itl_s.p50, 0.75);
  EXPECT_DOUBLE_EQ(s.itl_s.p90, 0.75);
  EXPECT_DOUBLE_EQ(s.itl_s.max, 0.75);
  // E2E {2.25, 1.75}.
  EXPECT_DOUBLE_EQ(s.e2e_s.mean, 2.0);
  EXPECT_DOUBLE_EQ(s.e2e_s.p90, 2.2);
  EXPECT_DOUBLE_EQ(s.e2e_s.p99, 2.245);
  EXPECT_DOUBLE_EQ(s.queue_s.mean, 0.375);
  EXPECT_DOUBLE_EQ(s.queue_s.max, 0.5);
  // e2e / output tokens: {0.75, 0.875}.
  EXPECT_DOUBLE_EQ(s.normalized_latency_s.mean, 0.8125);

  // A meets TTFT <= 1 s (inclusive) and TPOT <= 0.7 s; B's TPOT 0.75 misses; C rejected.
  EXPECT_EQ(s.num_slo_met, 1);
  EXPECT_DOUBLE_EQ(s.slo_attainment, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.goodput, 1 / 2.25);

  EXPECT_EQ(s.num_steps, 3);
  EXPECT_DOUBLE_EQ(s.gpu_busy_fraction, 1.75 / 2.25);
  EXPECT_DOUBLE_EQ(s.mean_batch_size, 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.mean_kv_utilization, (0.75 * 0.1 + 0.5 * 0.2 + 0.5 * 0.3) / 1.75);
  EXPECT_DOUBLE_EQ(s.peak_kv_utilization, 0.3);
  EXPECT_EQ(s.preemptions, 1);
  EXPECT_EQ(s.recomputed_tokens, 2);
  // 1 replica x 2 GPUs x $3.6/h x 2.25 s = $0.0045; / 5e-6 M tokens = $900.
  EXPECT_EQ(s.num_gpus, 2);
  EXPECT_DOUBLE_EQ(s.cost_usd, 0.0045);
  EXPECT_DOUBLE_EQ(s.cost_per_million_output_tokens, 900.0);
  ASSERT_EQ(s.rejected_by_reason.size(), 1u);
  EXPECT_EQ(s.rejected_by_reason[0].first, "exceeds_context_window");
  EXPECT_EQ(s.rejected_by_reason[0].second, 1);
  EXPECT_EQ(s.trace_dropped_steps, 0);
}

TEST(MetricsCollectorTest, OutputsAreByteIdenticalAcrossRuns) {
  Outputs first, second;
  RunHandCase(first);
  RunHandCase(second);
  EXPECT_EQ(first.requests.str(), second.requests.str());
  EXPECT_EQ(first.steps.str(), second.steps.str());
  EXPECT_EQ(first.trace.str(), second.trace.str());
  EXPECT_EQ(first.summary.ToJson().dump(2), second.summary.ToJson().dump(2));
  EXPECT_EQ(first.summary.ToMarkdown(), second.summary.ToMarkdown());
  EXPECT_EQ(first.summary.ToText(), second.summary.ToText());
}

TEST(MetricsCollectorTest, TraceHasOneSlicePerStepInMicroseconds) {
  Outputs out;
  RunHandCase(out);
  const auto trace = nlohmann::json::parse(out.trace.str());
  std::vector<nlohmann::json> slices;
  int process_names = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") slices.push_back(e);
    if (e["ph"] == "M" && e["name"] == "process_name") {
      ++process_names;
      EXPECT_EQ(e["args"]["name"], "replica 0");
    }
    EXPECT_NE(e["name"], "dropped_steps");
  }
  EXPECT_EQ(process_names, 1);
  ASSERT_EQ(slices.size(), 3u);
  EXPECT_EQ(slices[0]["name"], "step");
  EXPECT_EQ(slices[0]["pid"], 0);
  EXPECT_EQ(slices[0]["tid"], 0);
  EXPECT_DOUBLE_EQ(slices[0]["ts"].get<double>(), 250000.0);
  EXPECT_DOUBLE_EQ(slices[0]["dur"].get<double>(), 750000.0);
  EXPECT_EQ(slices[1]["args"]["batch_size"], 2);
  EXPECT_EQ(slices[1]["args"]["prefill_tokens"], 2);
  EXPECT_EQ(slices[1]["args"]["decode_tokens"], 1);
  EXPECT_EQ(slices[2]["args"]["kv_blocks_used"], 30);
  EXPECT_EQ(slices[2]["args"]["waiting"], 1);
}

TEST(MetricsCollectorTest, TraceCapDropsSlicesAndSaysSo) {
  MetricsOptions options;
  options.num_replicas = 2;
  std::ostringstream trace;
  MetricsSinks sinks;
  sinks.trace_json = &trace;
  sinks.trace_max_steps = 2;
  MetricsCollector metrics(options, sinks);
  StepPlan plan;
  for (int i = 0; i < 5; ++i) {
    // Sub-microsecond parts check the exact ns -> us decimals.
    metrics.OnStep(i % 2, plan, i * 1'000'500, (i + 1) * 1'000'500, 0, 0, 0);
  }
  const RunSummary summary = metrics.Finish();
  EXPECT_EQ(summary.trace_dropped_steps, 3);

  const auto parsed = nlohmann::json::parse(trace.str());  // throws if invalid
  int slices = 0, notes = 0, process_names = 0;
  for (const auto& e : parsed["traceEvents"]) {
    if (e["ph"] == "X") {
      if (slices == 1) {
        EXPECT_EQ(e["pid"], 1);
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1000.5);
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 1000.5);
      }
      ++slices;
    }
    if (e["name"] == "process_name") ++process_names;
    if (e["name"] == "dropped_steps") {
      ++notes;
      EXPECT_EQ(e["args"]["dropped_steps"], 3);
      EXPECT_EQ(e["args"]["trace_max_steps"], 2);
    }
  }
  EXPECT_EQ(slices, 2);
  EXPECT_EQ(notes, 1);
  EXPECT_EQ(process_names, 2);
  EXPECT_EQ(parsed["otherData"]["dropped_steps"], 3);
}

TEST(MetricsCollectorTest, EmptyRunGivesValidTraceAndZeroSummary) {
  std::ostringstream trace, requests;
  MetricsSinks sinks;
  sinks.trace_json = &trace;
  sinks.requests_csv = &requests;
  MetricsCollector metrics(MetricsOptions{}, sinks);
  // The header is written at construction.
  EXPECT_EQ(requests.str().substr(0, 9), "id,client");
  const RunSummary s = metrics.Finish();
  EXPECT_NO_THROW(nlohmann::json::parse(trace.str()));
  EXPECT_EQ(s.num_requests, 0);
  EXPECT_EQ(s.makespan_s, 0);
  EXPECT_EQ(s.request_throughput, 0);
  EXPECT_EQ(s.cost_per_million_output_tokens, 0);
  EXPECT_EQ(s.ttft_s.count, 0);
  EXPECT_EQ(s.itl_s.count, 0);
}

// Finished requests built by hand (no steps): targets TPOT <= 0.1 s and E2E <= 2.5 s.
TEST(MetricsCollectorTest, SloAttainmentAndGoodputOnHandCase) {
  MetricsOptions options;
  options.slo_tpot_s = 0.1;
  options.slo_e2e_s = 2.5;
  MetricsCollector metrics(options, MetricsSinks{});
  auto finished = [&](TimeNs arrival, TimeNs first_token, TimeNs finish, int32_t tokens) {
    Request r = MakeRequest(0, 0, arrival, 8, tokens);
    r.first_scheduled = arrival;
    r.first_token = first_token;
    r.last_token = r.finish = finish;
    r.num_generated = tokens;
    metrics.OnFinished(r);
  };
  finished(0, 500 * kMs, 1000 * kMs, 6);            // tpot 0.1 (inclusive): met
  finished(1000 * kMs, 1200 * kMs, 3000 * kMs, 10);  // tpot 0.2: missed
  finished(0, 3000 * kMs, 3000 * kMs, 1);            // e2e 3.0: missed
  finished(2000 * kMs, 4000 * kMs, 4000 * kMs, 1);   // e2e 2.0, tpot 0: met
  Request rejected = MakeRequest(9, 0, 0, 8, 1);
  rejected.reject_reason = RejectReason::kExceedsKvCapacity;
  metrics.OnRejected(rejected);
  const RunSummary s = metrics.Finish();
  EXPECT_TRUE(s.HasSlo());
  EXPECT_EQ(s.num_slo_met, 2);
  EXPECT_DOUBLE_EQ(s.slo_attainment, 2.0 / 5.0);  // rejected counts as missed
  EXPECT_DOUBLE_EQ(s.makespan_s, 4.0);
  EXPECT_DOUBLE_EQ(s.goodput, 0.5);
  // One-token requests are in the TPOT distribution as 0: {0.1, 0.2, 0, 0}.
  EXPECT_EQ(s.tpot_s.count, 4);
  EXPECT_DOUBLE_EQ(s.tpot_s.p50, 0.05);
  EXPECT_DOUBLE_EQ(s.tpot_s.max, 0.2);
  ASSERT_EQ(s.rejected_by_reason.size(), 1u);
  EXPECT_EQ(s.rejected_by_reason[0].first, "exceeds_kv_capacity");
}

TEST(MetricsCollectorTest, PaddingAndUnfinishedChunksMakeNoItl) {
  MetricsCollector metrics(MetricsOptions{}, MetricsSinks{});
  Request a = MakeRequest(1, 0, 0, 100, 5);
  a.last_token = 0;  // had a token at t = 0
  a.num_generated = 1;
  StepPlan plan;
  ScheduledRequest padding{&a, 1, 101, true, true};  // padding never yields a token
  ScheduledRequest chunk{&a, 10, 50, false, false};   // a prefill chunk that does not finish
  plan.seqs = {padding, chunk};
  metrics.OnStep(0, plan, 0, 10 * kMs, 0, 0, 0);
  EXPECT_EQ(metrics.Finish().itl_s.count, 0);
}

TEST(RunSummaryTest, RenderingsCarryTheNumbers) {
  Outputs out;
  RunHandCase(out);
  const nlohmann::ordered_json j = out.summary.ToJson();
  EXPECT_EQ(j.begin().key(), "name");
  EXPECT_EQ(j["num_finished"], 2);
  EXPECT_DOUBLE_EQ(j["tpot_s"]["p90"].get<double>(), 0.7375);
  const std::vector<std::string> keys = {"count", "mean", "p50", "p90", "p99", "max"};
  std::vector<std::string> got;
  for (auto it = j["itl_s"].begin(); it != j["itl_s"].end(); ++it) got.push_back(it.key());
  EXPECT_EQ(got, keys);
  EXPECT_EQ(j["rejected_by_reason"]["exceeds_context_window"], 1);
  EXPECT_DOUBLE_EQ(j["cost_per_million_output_tokens"].get<double>(), 900.0);

  const std::string md = out.summary.ToMarkdown();
  EXPECT_NE(md.find("| TPOT | 2 | 687.500 | 687.500 | 737.500 | 748.750 | 750.000 |"),
            std::string::npos) << md;
  EXPECT_NE(md.find("| exceeds_context_window | 1 |"), std::string::npos);

  const std::string text = out.summary.ToText();
  const auto lines = std::count(text.begin(), text.end(), '\n');
  EXPECT_GE(lines, 5);
  EXPECT_LE(lines, 8);
  EXPECT_NE(text.find("TTFT ms: p50 1000.00 p99 1000.00"), std::string::npos) << text;
  EXPECT_NE(text.find("$900 per 1M output tokens"), std::string::npos) << text;
}

}  // namespace
}  // namespace servelab
