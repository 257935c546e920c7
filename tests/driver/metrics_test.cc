#include "driver/metrics.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/fairness_tracker.h"

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
  std::ostringstream requests, steps, trace, clients;
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
  sinks.clients_csv = &out.clients;
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

// --- Per-client metrics, fairness and swap accounting. ---

// The hand case's clients with VTC's default charges (1 per prompt token, 2 per output
// token), counted when delivered: alice's A gets its prompt (4) and first token at 1 s,
// then a token at 1.5 s and 2.25 s: 4 + 3 x 2 = 10. bob's B: prompt 2 and a token at
// 1.5 s, a token at 2.25 s: 2 + 2 x 2 = 6; his rejected C gets nothing.
TEST(ClientMetricsTest, HandCaseClientsAreExact) {
  Outputs out;
  RunHandCase(out);
  const RunSummary& s = out.summary;
  ASSERT_EQ(s.clients.size(), 2u);
  const ClientSummary& alice = s.clients[0];
  const ClientSummary& bob = s.clients[1];
  EXPECT_EQ(alice.name, "alice");
  EXPECT_EQ(alice.weight, 1.0);
  EXPECT_EQ(alice.requests, 1);
  EXPECT_EQ(alice.finished, 1);
  EXPECT_EQ(alice.rejected, 0);
  EXPECT_EQ(alice.input_tokens, 4);
  EXPECT_EQ(alice.output_tokens, 3);
  EXPECT_DOUBLE_EQ(alice.service, 10.0);
  EXPECT_DOUBLE_EQ(alice.service_per_weight, 10.0);
  EXPECT_DOUBLE_EQ(alice.output_throughput, 3 / 2.25);
  EXPECT_EQ(alice.ttft_s.count, 1);
  EXPECT_DOUBLE_EQ(alice.ttft_s.max, 1.0);
  EXPECT_DOUBLE_EQ(alice.e2e_s.p99, 2.25);
  EXPECT_DOUBLE_EQ(alice.max_queue_s, 0.25);
  EXPECT_EQ(bob.name, "bob");
  EXPECT_EQ(bob.requests, 2);
  EXPECT_EQ(bob.finished, 1);
  EXPECT_EQ(bob.rejected, 1);
  EXPECT_EQ(bob.input_tokens, 2);
  EXPECT_EQ(bob.output_tokens, 2);
  EXPECT_DOUBLE_EQ(bob.service, 6.0);
  EXPECT_DOUBLE_EQ(bob.e2e_s.mean, 1.75);
  EXPECT_DOUBLE_EQ(bob.max_queue_s, 0.5);
  // Conservation: the clients' service is the charge of the finished requests' tokens.
  EXPECT_DOUBLE_EQ(alice.service + bob.service, 1.0 * s.input_tokens + 2.0 * s.output_tokens);
  // Jain over {10, 6}: 16^2 / (2 x 136).
  EXPECT_DOUBLE_EQ(s.jain_index, 256.0 / 272.0);
  // RunHandCase reports no arrivals: no client is ever backlogged, no window counts.
  EXPECT_EQ(s.service_difference_windows, 0);
  EXPECT_EQ(s.service_difference_max, 0.0);
  EXPECT_EQ(s.swap_out_blocks + s.swap_in_blocks, 0);
}

TEST(ClientMetricsTest, ClientsCsvIsExact) {
  Outputs out;
  RunHandCase(out);
  EXPECT_EQ(out.clients.str(),
            "client,weight,requests,finished,rejected,input_tokens,output_tokens,service,"
            "service_per_weight,output_throughput,ttft_mean_s,ttft_p50_s,ttft_p99_s,"
            "e2e_mean_s,e2e_p50_s,e2e_p99_s,max_queue_s\n"
            "alice,1,1,1,0,4,3,10,10,1.333333333,1,1,1,2.25,2.25,2.25,0.25\n"
            "bob,1,2,1,1,2,2,6,6,0.888888889,1,1,1,1.75,1.75,1.75,0.5\n");
}

// Weighted service: client 0 (weight 1) gets 1 + 2 x 1 = 3; client 1 (weight 2) gets
// 14 + 2 x 2 = 18, i.e. 9 per unit of weight. Jain over {3, 9} = 12^2 / (2 x 90) = 0.8.
TEST(ClientMetricsTest, JainIndexUsesServicePerWeight) {
  MetricsOptions options;
  options.client_weights = {1.0, 2.0};
  std::ostringstream clients;
  MetricsSinks sinks;
  sinks.clients_csv = &clients;
  MetricsCollector metrics(options, sinks);
  Request a = MakeRequest(1, 0, 0, 1, 1);
  Request b = MakeRequest(2, 1, 0, 14, 2);
  RunStep(metrics, 0, 100 * kMs, {{&a, 1}, {&b, 14}}, 0, 0, 0);
  RunStep(metrics, 100 * kMs, 200 * kMs, {{&b, 1}}, 0, 0, 0);
  const RunSummary s = metrics.Finish();
  ASSERT_EQ(s.clients.size(), 2u);
  EXPECT_EQ(s.clients[0].name, "0");  // no names configured: the index
  EXPECT_DOUBLE_EQ(s.clients[0].service_per_weight, 3.0);
  EXPECT_DOUBLE_EQ(s.clients[1].service, 18.0);
  EXPECT_DOUBLE_EQ(s.clients[1].service_per_weight, 9.0);
  EXPECT_DOUBLE_EQ(s.jain_index, 0.8);
  EXPECT_NE(clients.str().find("\n1,2,1,1,0,14,2,18,9,10,"), std::string::npos) << clients.str();
  EXPECT_EQ(JainIndex(std::vector<double>{1.0, 3.0}), 0.8);
  EXPECT_EQ(JainIndex(std::vector<double>{5.0, 0.0, 0.0, 0.0}), 0.25);
  EXPECT_EQ(JainIndex(std::vector<double>{0.0, 0.0}), 1.0);
  EXPECT_EQ(JainIndex(std::vector<double>{}), 0.0);
}

TEST(ClientMetricsTest, ServiceWeightsAndClientsWithoutRequests) {
  MetricsOptions options;
  options.client_names = {"a", "b", "idle"};
  options.service_input_weight = 0.5;
  options.service_output_weight = 3.0;
  MetricsCollector metrics(options, MetricsSinks{});
  Request a = MakeRequest(1, 0, 0, 8, 2);
  Request b = MakeRequest(2, 1, 0, 2, 1);
  RunStep(metrics, 0, 100 * kMs, {{&a, 8}, {&b, 2}}, 0, 0, 0);
  RunStep(metrics, 100 * kMs, 200 * kMs, {{&a, 1}}, 0, 0, 0);
  const RunSummary s = metrics.Finish();
  ASSERT_EQ(s.clients.size(), 3u);
  EXPECT_DOUBLE_EQ(s.clients[0].service, 0.5 * 8 + 3.0 * 2);  // 10
  EXPECT_DOUBLE_EQ(s.clients[1].service, 0.5 * 2 + 3.0 * 1);  // 4
  EXPECT_EQ(s.clients[2].requests, 0);
  EXPECT_EQ(s.clients[2].service, 0.0);
  // The idle client has no request: Jain is over {10, 4} only.
  EXPECT_DOUBLE_EQ(s.jain_index, 196.0 / (2 * 116.0));
  EXPECT_EQ(s.service_input_weight, 0.5);
  EXPECT_EQ(s.service_output_weight, 3.0);
}

// Latencies grouped by client, in OnFinished order within each.
TEST(ClientMetricsTest, PerClientDistributions) {
  MetricsCollector metrics(MetricsOptions{}, MetricsSinks{});
  auto finished = [&](int32_t client, TimeNs arrival, TimeNs first_token, TimeNs finish) {
    Request r = MakeRequest(0, client, arrival, 8, 2);
    r.first_scheduled = arrival + 10 * kMs * (client + 1);
    r.first_token = first_token;
    r.last_token = r.finish = finish;
    r.num_generated = 2;
    metrics.OnFinished(r);
  };
  finished(0, 0, 1000 * kMs, 2000 * kMs);     // ttft 1, e2e 2
  finished(1, 0, 2000 * kMs, 2500 * kMs);     // ttft 2, e2e 2.5
  finished(0, 0, 3000 * kMs, 4000 * kMs);     // ttft 3, e2e 4
  finished(2, 500 * kMs, 600 * kMs, 4000 * kMs);  // ttft 0.1, e2e 3.5
  const RunSummary s = metrics.Finish();
  ASSERT_EQ(s.clients.size(), 3u);
  EXPECT_EQ(s.clients[0].ttft_s.count, 2);
  EXPECT_DOUBLE_EQ(s.clients[0].ttft_s.mean, 2.0);
  EXPECT_DOUBLE_EQ(s.clients[0].ttft_s.p50, 2.0);
  EXPECT_DOUBLE_EQ(s.clients[0].ttft_s.p99, 2.98);
  EXPECT_DOUBLE_EQ(s.clients[0].e2e_s.max, 4.0);
  EXPECT_DOUBLE_EQ(s.clients[0].max_queue_s, 0.01);
  EXPECT_EQ(s.clients[1].ttft_s.count, 1);
  EXPECT_DOUBLE_EQ(s.clients[1].e2e_s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.clients[1].max_queue_s, 0.02);
  EXPECT_DOUBLE_EQ(s.clients[2].ttft_s.p50, 0.1);
  EXPECT_DOUBLE_EQ(s.clients[2].output_throughput, 2 / 4.0);
  // The run's distributions are untouched by the grouping.
  EXPECT_EQ(s.ttft_s.count, 4);
  EXPECT_DOUBLE_EQ(s.ttft_s.mean, (1 + 2 + 3 + 0.1) / 4);
  EXPECT_DOUBLE_EQ(s.e2e_s.max, 4.0);
}

// Windows of 1 s (times in ms; every step takes 400 ms; services with charges 1 and 2):
//   A (client 0): arrives 0, prompt 10, 6 tokens.  B (client 1): arrives 0, prompt 8, 5.
//   C (client 2): arrives 1500, prompt 10, 2 tokens.
//   [0, 400)     A prefill              A +12
//   [400, 800)   A, B prefill           A +2, B +10
//   [800, 1200)  A, B                   A +2, B +2         (window 1)
//   [1200, 1600) A, B, C prefill        A +2, B +2, C +12
//   [1600, 2000) A, B, C -> C finishes  A +2, B +2, C +2   (window 2: ends at 2000)
//   [2000, 2400) A, B -> both finish    A +2, B +2
// Window [0, 1000): A 14, B 10; C not in the system -> difference 4.
// Window [1000, 2000): A 4, B 4; C arrived at 1500, not backlogged throughout (its 12
//   would make it 8) -> 0.
// Last window [2000, 2400): A 4, B 4 (in the system until the end); C left at 2000 (its
//   2 would make it 2) -> 0.
TEST(ClientMetricsTest, ServiceDifferenceCountsClientsBackloggedThroughoutEachWindow) {
  MetricsOptions options;
  options.fairness_window_s = 1.0;
  MetricsCollector metrics(options, MetricsSinks{});
  Request a = MakeRequest(1, 0, 0, 10, 6);
  Request b = MakeRequest(2, 1, 0, 8, 5);
  Request c = MakeRequest(3, 2, 1500 * kMs, 10, 2);
  metrics.OnArrival(a);
  metrics.OnArrival(b);
  const TimeNs step = 400 * kMs;
  RunStep(metrics, 0, step, {{&a, 10}}, 0, 0, 0);
  RunStep(metrics, step, 2 * step, {{&a, 1}, {&b, 8}}, 0, 0, 0);
  RunStep(metrics, 2 * step, 3 * step, {{&a, 1}, {&b, 1}}, 0, 0, 0);
  metrics.OnArrival(c);
  RunStep(metrics, 3 * step, 4 * step, {{&a, 1}, {&b, 1}, {&c, 10}}, 0, 0, 0);
  RunStep(metrics, 4 * step, 5 * step, {{&a, 1}, {&b, 1}, {&c, 1}}, 0, 0, 0);
  RunStep(metrics, 5 * step, 6 * step, {{&a, 1}, {&b, 1}}, 0, 0, 0);
  ASSERT_TRUE(a.IsFinished() && b.IsFinished() && c.IsFinished());
  const RunSummary s = metrics.Finish();
  EXPECT_EQ(s.service_difference_windows, 3);
  EXPECT_DOUBLE_EQ(s.service_difference_max, 4.0);
  EXPECT_DOUBLE_EQ(s.service_difference_mean, 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.clients[0].service, 10 + 2 * 6.0);
  EXPECT_DOUBLE_EQ(s.clients[2].service, 10 + 2 * 2.0);
}

// A 5.5 s step between two backlogged clients: windows [0, 1) .. [4, 5) s hold no service
// (difference 0 each, the four empty ones skipped in one go); the last window [5, 5.5)
// gets A 3 + 2 and B 1 + 2 -> 2. Weighted by 2, B's 3 counts as 1.5 in a second run.
TEST(ClientMetricsTest, ServiceDifferenceOverEmptyWindowsAndWeights) {
  for (const double weight_b : {1.0, 2.0}) {
    MetricsOptions options;
    options.fairness_window_s = 1.0;
    options.client_weights = {1.0, weight_b};
    MetricsCollector metrics(options, MetricsSinks{});
    Request a = MakeRequest(1, 0, 0, 3, 1);
    Request b = MakeRequest(2, 1, 0, 1, 1);
    metrics.OnArrival(a);
    metrics.OnArrival(b);
    RunStep(metrics, 0, 5500 * kMs, {{&a, 3}, {&b, 1}}, 0, 0, 0);
    const RunSummary s = metrics.Finish();
    EXPECT_EQ(s.service_difference_windows, 6);
    const double last = 5.0 - 3.0 / weight_b;
    EXPECT_DOUBLE_EQ(s.service_difference_max, last);
    EXPECT_DOUBLE_EQ(s.service_difference_mean, last / 6);
  }
}

// A single client, or windows switched off, never counts a window.
TEST(ClientMetricsTest, ServiceDifferenceNeedsTwoClientsAndAWindow) {
  for (const double window : {1.0, 0.0}) {
    MetricsOptions options;
    options.fairness_window_s = window;
    MetricsCollector metrics(options, MetricsSinks{});
    Request a = MakeRequest(1, 0, 0, 3, 2);
    Request b = MakeRequest(2, window > 0 ? 0 : 1, 0, 3, 2);
    metrics.OnArrival(a);
    metrics.OnArrival(b);
    RunStep(metrics, 0, 1500 * kMs, {{&a, 3}, {&b, 3}}, 0, 0, 0);
    RunStep(metrics, 1500 * kMs, 3000 * kMs, {{&a, 1}, {&b, 1}}, 0, 0, 0);
    const RunSummary s = metrics.Finish();
    EXPECT_EQ(s.service_difference_windows, 0) << window;
    EXPECT_EQ(s.service_difference_max, 0.0);
  }
}

// Every block copy is counted; bytes = blocks x the bytes one copy moves (all GPUs).
TEST(ClientMetricsTest, SwapBlocksAndBytes) {
  MetricsOptions options;
  options.gpus_per_replica = 2;
  options.kv_bytes_per_block = 2000;  // 1000 per GPU, 2 GPUs
  MetricsCollector metrics(options, MetricsSinks{});
  StepPlan plan;
  plan.swap_out = {{1, 0}, {2, 1}, {3, 2}};
  plan.swap_in = {{5, 6}, {7, 8}};
  metrics.OnStep(0, plan, 0, 10 * kMs, 0, 0, 0);
  plan.Clear();
  plan.swap_in = {{0, 1}};
  metrics.OnStep(0, plan, 10 * kMs, 20 * kMs, 0, 0, 0);
  const RunSummary s = metrics.Finish();
  EXPECT_EQ(s.swap_out_blocks, 3);
  EXPECT_EQ(s.swap_in_blocks, 3);
  EXPECT_DOUBLE_EQ(s.swap_bytes, 6 * 1000.0 * 2);
  const nlohmann::ordered_json j = s.ToJson();
  EXPECT_EQ(j["swap_out_blocks"], 3);
  EXPECT_DOUBLE_EQ(j["swap_bytes"].get<double>(), 12000.0);
  EXPECT_NE(s.ToText().find("6 blocks swapped"), std::string::npos) << s.ToText();
  EXPECT_NE(s.ToMarkdown().find("- swap: 3 blocks out, 3 in"), std::string::npos);
}

TEST(ClientMetricsTest, RenderingsCarryClientsAndFairness) {
  Outputs out;
  RunHandCase(out);
  const nlohmann::ordered_json j = out.summary.ToJson();
  ASSERT_EQ(j["clients"].size(), 2u);
  EXPECT_EQ(j["clients"][1]["name"], "bob");
  EXPECT_EQ(j["clients"][1]["rejected"], 1);
  EXPECT_DOUBLE_EQ(j["clients"][0]["service"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j["clients"][0]["ttft_s"]["max"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["jain_index"].get<double>(), 256.0 / 272.0);
  EXPECT_EQ(j["service_difference_windows"], 0);
  EXPECT_EQ(j["fairness_window_s"], 10.0);

  const std::string md = out.summary.ToMarkdown();
  EXPECT_NE(md.find("| alice | 1 | 1 | 1 | 0 | 1.3 | 10 | 10 | 1000.000 | 1000.000 | "
                    "1000.000 | 2250.000 | 250.000 |"),
            std::string::npos) << md;
  EXPECT_NE(md.find("- Jain's index over service / weight: 0.9412"), std::string::npos) << md;

  const std::string text = out.summary.ToText();
  EXPECT_NE(text.find("fairness: Jain 0.9412"), std::string::npos) << text;
  // One client: no fairness line.
  RunSummary single = out.summary;
  single.clients.resize(1);
  EXPECT_EQ(single.ToText().find("fairness"), std::string::npos);
}

}  // namespace
}  // namespace servelab
