// RunSummary's renderings: summary.json (ToJson), summary.md (ToMarkdown), stdout (ToText).
// All three are deterministic functions of the summary (fixed key order, printf in the
// "C" locale).
#include <cstdio>
#include <string>

#include "core/metrics.h"

namespace servelab {
namespace {

nlohmann::ordered_json DistributionJson(const Distribution& d) {
  nlohmann::ordered_json j;
  j["count"] = d.count;
  j["mean"] = d.mean;
  j["p50"] = d.p50;
  j["p90"] = d.p90;
  j["p99"] = d.p99;
  j["max"] = d.max;
  return j;
}

// printf-formatted text appended to `out`.
template <class... Args>
void Appendf(std::string& out, const char* format, Args... args) {
  char buf[512];
  const int n = std::snprintf(buf, sizeof(buf), format, args...);
  if (n > 0) out.append(buf, static_cast<size_t>(std::min<int>(n, sizeof(buf) - 1)));
}

void LatencyRow(std::string& out, const char* label, const Distribution& d) {
  Appendf(out, "| %s | %lld | %.3f | %.3f | %.3f | %.3f | %.3f |\n", label,
          static_cast<long long>(d.count), d.mean * 1e3, d.p50 * 1e3, d.p90 * 1e3,
          d.p99 * 1e3, d.max * 1e3);
}

std::string SloTargets(const RunSummary& s) {
  std::string out;
  if (s.slo_ttft_s > 0) Appendf(out, "TTFT <= %g ms", s.slo_ttft_s * 1e3);
  if (s.slo_tpot_s > 0) Appendf(out, "%sTPOT <= %g ms", out.empty() ? "" : ", ", s.slo_tpot_s * 1e3);
  if (s.slo_e2e_s > 0) Appendf(out, "%sE2E <= %g ms", out.empty() ? "" : ", ", s.slo_e2e_s * 1e3);
  return out;
}

}  // namespace

nlohmann::ordered_json RunSummary::ToJson() const {
  nlohmann::ordered_json j;
  j["name"] = name;
  j["makespan_s"] = makespan_s;
  j["num_requests"] = num_requests;
  j["num_finished"] = num_finished;
  j["num_rejected"] = num_rejected;
  j["input_tokens"] = input_tokens;
  j["output_tokens"] = output_tokens;
  j["request_throughput"] = request_throughput;
  j["input_throughput"] = input_throughput;
  j["output_throughput"] = output_throughput;
  j["ttft_s"] = DistributionJson(ttft_s);
  j["tpot_s"] = DistributionJson(tpot_s);
  j["itl_s"] = DistributionJson(itl_s);
  j["e2e_s"] = DistributionJson(e2e_s);
  j["queue_s"] = DistributionJson(queue_s);
  j["normalized_latency_s"] = DistributionJson(normalized_latency_s);
  j["slo_ttft_s"] = slo_ttft_s;
  j["slo_tpot_s"] = slo_tpot_s;
  j["slo_e2e_s"] = slo_e2e_s;
  j["num_slo_met"] = num_slo_met;
  j["slo_attainment"] = slo_attainment;
  j["goodput"] = goodput;
  j["num_replicas"] = num_replicas;
  j["num_gpus"] = num_gpus;
  j["gpu_busy_fraction"] = gpu_busy_fraction;
  j["num_steps"] = num_steps;
  j["mean_batch_size"] = mean_batch_size;
  j["mean_kv_utilization"] = mean_kv_utilization;
  j["peak_kv_utilization"] = peak_kv_utilization;
  j["preemptions"] = preemptions;
  j["recomputed_tokens"] = recomputed_tokens;
  j["cost_usd"] = cost_usd;
  j["cost_per_million_output_tokens"] = cost_per_million_output_tokens;
  nlohmann::ordered_json reasons = nlohmann::ordered_json::object();
  for (const auto& [reason, count] : rejected_by_reason) reasons[reason] = count;
  j["rejected_by_reason"] = std::move(reasons);
  j["trace_dropped_steps"] = trace_dropped_steps;
  return j;
}

std::string RunSummary::ToMarkdown() const {
  std::string out;
  out += "# " + name + "\n\n";
  Appendf(out, "%lld requests: %lld finished, %lld rejected. Makespan %.3f s on %d replica(s), "
          "%lld GPU(s).\n\n",
          static_cast<long long>(num_requests), static_cast<long long>(num_finished),
          static_cast<long long>(num_rejected), makespan_s, num_replicas,
          static_cast<long long>(num_gpus));

  out += "## Latency (ms)\n\n";
  out += "| metric | count | mean | p50 | p90 | p99 | max |\n";
  out += "|---|---:|---:|---:|---:|---:|---:|\n";
  LatencyRow(out, "TTFT", ttft_s);
  LatencyRow(out, "TPOT", tpot_s);
  LatencyRow(out, "ITL", itl_s);
  LatencyRow(out, "E2E", e2e_s);
  LatencyRow(out, "Queue", queue_s);
  LatencyRow(out, "E2E / output token", normalized_latency_s);
  out += "\nTPOT counts one-token requests as 0; ITL has one sample per output token after "
         "the first.\n\n";

  out += "## Throughput\n\n";
  Appendf(out, "- requests: %.3f req/s\n- input: %.1f tok/s (%lld tokens)\n"
          "- output: %.1f tok/s (%lld tokens)\n\n",
          request_throughput, input_throughput, static_cast<long long>(input_tokens),
          output_throughput, static_cast<long long>(output_tokens));

  out += "## Utilization\n\n";
  Appendf(out, "- GPU busy: %.1f%% over %lld steps, mean batch size %.2f\n",
          gpu_busy_fraction * 100, static_cast<long long>(num_steps), mean_batch_size);
  Appendf(out, "- KV cache: mean %.1f%% (time-weighted), peak %.1f%%\n",
          mean_kv_utilization * 100, peak_kv_utilization * 100);
  Appendf(out, "- preemptions: %lld, recomputed tokens: %lld\n\n",
          static_cast<long long>(preemptions), static_cast<long long>(recomputed_tokens));

  out += "## SLO\n\n";
  if (HasSlo()) {
    Appendf(out, "- targets: %s\n", SloTargets(*this).c_str());
  } else {
    out += "- no targets set: every finished request counts as meeting it\n";
  }
  Appendf(out, "- attainment: %.2f%% (%lld of %lld requests; rejected count as missed)\n",
          slo_attainment * 100, static_cast<long long>(num_slo_met),
          static_cast<long long>(num_requests));
  Appendf(out, "- goodput: %.3f req/s\n\n", goodput);

  out += "## Cost\n\n";
  Appendf(out, "- total: $%.6g\n- per million output tokens: $%.6g\n\n", cost_usd,
          cost_per_million_output_tokens);

  out += "## Rejections\n\n";
  if (rejected_by_reason.empty()) {
    out += "None.\n";
  } else {
    out += "| reason | count |\n|---|---:|\n";
    for (const auto& [reason, count] : rejected_by_reason) {
      Appendf(out, "| %s | %lld |\n", reason.c_str(), static_cast<long long>(count));
    }
  }
  if (trace_dropped_steps > 0) {
    Appendf(out, "\ntrace.json holds the first steps only: %lld dropped.\n",
            static_cast<long long>(trace_dropped_steps));
  }
  return out;
}

std::string RunSummary::ToText() const {
  std::string out;
  Appendf(out, "%s: %lld finished, %lld rejected, makespan %.3f s\n", name.c_str(),
          static_cast<long long>(num_finished), static_cast<long long>(num_rejected),
          makespan_s);
  Appendf(out, "throughput: %.3f req/s, %.1f output tok/s, %.1f input tok/s\n",
          request_throughput, output_throughput, input_throughput);
  Appendf(out, "TTFT ms: p50 %.2f p99 %.2f | TPOT ms: p50 %.2f p99 %.2f\n", ttft_s.p50 * 1e3,
          ttft_s.p99 * 1e3, tpot_s.p50 * 1e3, tpot_s.p99 * 1e3);
  Appendf(out, "E2E ms: p50 %.2f p99 %.2f | ITL ms: p50 %.2f p99 %.2f\n", e2e_s.p50 * 1e3,
          e2e_s.p99 * 1e3, itl_s.p50 * 1e3, itl_s.p99 * 1e3);
  if (HasSlo()) {
    Appendf(out, "SLO (%s): %.2f%% attained, goodput %.3f req/s\n", SloTargets(*this).c_str(),
            slo_attainment * 100, goodput);
  }
  Appendf(out, "GPU busy %.1f%%, KV mean %.1f%% peak %.1f%%, %lld preemptions\n",
          gpu_busy_fraction * 100, mean_kv_utilization * 100, peak_kv_utilization * 100,
          static_cast<long long>(preemptions));
  Appendf(out, "cost: $%.6g total, $%.6g per 1M output tokens\n", cost_usd,
          cost_per_million_output_tokens);
  return out;
}

}  // namespace servelab
