// RunSummary's renderings: summary.json (ToJson), summary.md (ToMarkdown), stdout (ToText),
// clients.csv (WriteClientsCsv). All are deterministic functions of the summary (fixed key
// order, printf in the "C" locale, std::to_chars).
#include <cstdio>
#include <string>

#include "driver/csv_writer.h"
#include "driver/metrics.h"

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

nlohmann::ordered_json ClientJson(const ClientSummary& c) {
  nlohmann::ordered_json j;
  j["name"] = c.name;
  j["weight"] = c.weight;
  j["requests"] = c.requests;
  j["finished"] = c.finished;
  j["rejected"] = c.rejected;
  j["input_tokens"] = c.input_tokens;
  j["output_tokens"] = c.output_tokens;
  j["service"] = c.service;
  j["service_per_weight"] = c.service_per_weight;
  j["output_throughput"] = c.output_throughput;
  j["ttft_s"] = DistributionJson(c.ttft_s);
  j["e2e_s"] = DistributionJson(c.e2e_s);
  j["max_queue_s"] = c.max_queue_s;
  return j;
}

std::string SloTargets(const RunSummary& s) {
  std::string out;
  if (s.slo_ttft_s > 0) Appendf(out, "TTFT <= %g ms", s.slo_ttft_s * 1e3);
  if (s.slo_tpot_s > 0) Appendf(out, "%sTPOT <= %g ms", out.empty() ? "" : ", ", s.slo_tpot_s * 1e3);
  if (s.slo_e2e_s > 0) Appendf(out, "%sE2E <= %g ms", out.empty() ? "" : ", ", s.slo_e2e_s * 1e3);
  return out;
}

}  // namespace

nlohmann::ordered_json PrefixCacheSummary::ToJson() const {
  nlohmann::ordered_json j;
  j["token_hit_rate"] = token_hit_rate;
  j["block_hit_rate"] = block_hit_rate;
  j["hit_tokens"] = hit_tokens;
  j["queried_tokens"] = queried_tokens;
  j["hit_blocks"] = hit_blocks;
  j["queried_blocks"] = queried_blocks;
  j["inserted_blocks"] = inserted_blocks;
  j["evicted_blocks"] = evicted_blocks;
  return j;
}

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
  j["swap_out_blocks"] = swap_out_blocks;
  j["swap_in_blocks"] = swap_in_blocks;
  j["swap_bytes"] = swap_bytes;
  j["cost_usd"] = cost_usd;
  j["cost_per_million_output_tokens"] = cost_per_million_output_tokens;
  nlohmann::ordered_json reasons = nlohmann::ordered_json::object();
  for (const auto& [reason, count] : rejected_by_reason) reasons[reason] = count;
  j["rejected_by_reason"] = std::move(reasons);
  j["trace_dropped_steps"] = trace_dropped_steps;
  if (has_prefix_cache) {
    nlohmann::ordered_json cache = prefix_cache.ToJson();
    nlohmann::ordered_json replicas = nlohmann::ordered_json::array();
    for (const PrefixCacheSummary& r : prefix_cache_replicas) replicas.push_back(r.ToJson());
    cache["replicas"] = std::move(replicas);
    j["prefix_cache"] = std::move(cache);
  }
  j["service_input_weight"] = service_input_weight;
  j["service_output_weight"] = service_output_weight;
  j["fairness_window_s"] = fairness_window_s;
  j["jain_index"] = jain_index;
  j["service_difference_max"] = service_difference_max;
  j["service_difference_mean"] = service_difference_mean;
  j["service_difference_windows"] = service_difference_windows;
  j["window_jain_index"] = window_jain_index;
  nlohmann::ordered_json client_list = nlohmann::ordered_json::array();
  for (const ClientSummary& c : clients) client_list.push_back(ClientJson(c));
  j["clients"] = std::move(client_list);
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
  Appendf(out, "- preemptions: %lld, recomputed tokens: %lld\n",
          static_cast<long long>(preemptions), static_cast<long long>(recomputed_tokens));
  Appendf(out, "- swap: %lld blocks out, %lld in, %.3f GiB over the host links\n\n",
          static_cast<long long>(swap_out_blocks), static_cast<long long>(swap_in_blocks),
          swap_bytes / (1024.0 * 1024.0 * 1024.0));

  if (has_prefix_cache) {
    out += "## Prefix cache\n\n";
    out += "A query is one admission's lookup over all of its request's tokens; hits are the "
           "tokens (blocks) taken from the cache, i.e. prefill not computed.\n\n";
    out += "| replica | token hit rate | block hit rate | tokens saved | tokens queried | "
           "blocks inserted | blocks evicted |\n";
    out += "|---|---:|---:|---:|---:|---:|---:|\n";
    const auto row = [&out](const std::string& name, const PrefixCacheSummary& c) {
      Appendf(out, "| %s | %.2f%% | %.2f%% | %lld | %lld | %lld | %lld |\n", name.c_str(),
              c.token_hit_rate * 100, c.block_hit_rate * 100,
              static_cast<long long>(c.hit_tokens), static_cast<long long>(c.queried_tokens),
              static_cast<long long>(c.inserted_blocks), static_cast<long long>(c.evicted_blocks));
    };
    for (size_t i = 0; i < prefix_cache_replicas.size(); ++i) {
      row(std::to_string(i), prefix_cache_replicas[i]);
    }
    row("all", prefix_cache);
    out += "\n";
  }

  out += "## Clients\n\n";
  out += "| client | weight | requests | finished | rejected | output tok/s | service | "
         "service / weight | TTFT mean ms | TTFT p99 ms | TTFT max ms | E2E p99 ms | "
         "max queue ms |\n";
  out += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const ClientSummary& c : clients) {
    Appendf(out, "| %s | %g | %lld | %lld | %lld | %.1f | %.0f | %.0f | %.3f | %.3f | %.3f | "
            "%.3f | %.3f |\n",
            c.name.c_str(), c.weight, static_cast<long long>(c.requests),
            static_cast<long long>(c.finished), static_cast<long long>(c.rejected),
            c.output_throughput, c.service, c.service_per_weight, c.ttft_s.mean * 1e3,
            c.ttft_s.p99 * 1e3, c.ttft_s.max * 1e3, c.e2e_s.p99 * 1e3, c.max_queue_s * 1e3);
  }
  out += "\n## Fairness\n\n";
  Appendf(out, "- service = %g x input tokens + %g x output tokens, counted when delivered\n",
          service_input_weight, service_output_weight);
  Appendf(out, "- Jain's index over service / weight: %.4f over the run, %.4f averaged over "
          "windows among backlogged clients\n", jain_index, window_jain_index);
  if (service_difference_windows > 0) {
    Appendf(out, "- service difference (max - min service / weight among clients backlogged "
            "for a whole %g s window): max %.1f, mean %.1f over %lld windows\n\n",
            fairness_window_s, service_difference_max, service_difference_mean,
            static_cast<long long>(service_difference_windows));
  } else {
    Appendf(out, "- service difference: no %g s window had two clients backlogged throughout"
            "\n\n", fairness_window_s);
  }

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
  Appendf(out, "GPU busy %.1f%%, KV mean %.1f%% peak %.1f%%, %lld preemptions",
          gpu_busy_fraction * 100, mean_kv_utilization * 100, peak_kv_utilization * 100,
          static_cast<long long>(preemptions));
  if (swap_out_blocks + swap_in_blocks > 0) {
    Appendf(out, ", %lld blocks swapped", static_cast<long long>(swap_out_blocks + swap_in_blocks));
  }
  out += "\n";
  if (has_prefix_cache) {
    Appendf(out, "prefix cache: %.2f%% of tokens hit (%.2f%% of blocks), %lld prefill tokens "
            "saved, %lld blocks evicted\n",
            prefix_cache.token_hit_rate * 100, prefix_cache.block_hit_rate * 100,
            static_cast<long long>(prefix_cache.hit_tokens),
            static_cast<long long>(prefix_cache.evicted_blocks));
  }
  if (clients.size() >= 2) {
    Appendf(out, "fairness: Jain %.4f (run) %.4f (backlogged windows), service difference "
            "max %.1f mean %.1f (%lld windows of %g s)\n",
            jain_index, window_jain_index, service_difference_max, service_difference_mean,
            static_cast<long long>(service_difference_windows), fairness_window_s);
  }
  Appendf(out, "cost: $%.6g total, $%.6g per 1M output tokens\n", cost_usd,
          cost_per_million_output_tokens);
  return out;
}

void RunSummary::WriteClientsCsv(std::ostream& out) const {
  CsvWriter csv(&out);
  csv.Line("client,weight,requests,finished,rejected,input_tokens,output_tokens,service,"
           "service_per_weight,output_throughput,ttft_mean_s,ttft_p50_s,ttft_p99_s,e2e_mean_s,"
           "e2e_p50_s,e2e_p99_s,max_queue_s");
  // Non-integers with 9 decimals, trailing zeros trimmed (SecondsDouble's format).
  for (const ClientSummary& c : clients) {
    csv.Str(c.name).SecondsDouble(c.weight).Int(c.requests).Int(c.finished).Int(c.rejected);
    csv.Int(c.input_tokens).Int(c.output_tokens).SecondsDouble(c.service);
    csv.SecondsDouble(c.service_per_weight).SecondsDouble(c.output_throughput);
    csv.SecondsDouble(c.ttft_s.mean).SecondsDouble(c.ttft_s.p50).SecondsDouble(c.ttft_s.p99);
    csv.SecondsDouble(c.e2e_s.mean).SecondsDouble(c.e2e_s.p50).SecondsDouble(c.e2e_s.p99);
    csv.SecondsDouble(c.max_queue_s);
    csv.EndRow();
  }
}

}  // namespace servelab
