#include "core/client_metrics.h"

#include <algorithm>
#include <string>

#include "core/status.h"

namespace servelab {

ClientMetrics::ClientMetrics(const MetricsOptions& options)
    : options_(options),
      input_weight_(options.service_input_weight),
      output_weight_(options.service_output_weight),
      fairness_(options.client_weights,
                options.fairness_window_s > 0 ? FromSeconds(options.fairness_window_s) : 0) {}

ClientMetrics::Tally& ClientMetrics::TallyOf(int32_t client) {
  SERVELAB_CHECK(client >= 0);
  if (static_cast<size_t>(client) >= tallies_.size()) {
    tallies_.resize(static_cast<size_t>(client) + 1);
  }
  return tallies_[static_cast<size_t>(client)];
}

void ClientMetrics::OnFinished(const Request& r, TimeNs queue) {
  Tally& c = TallyOf(r.client);
  ++c.finished;
  c.input_tokens += r.prompt_len;
  c.output_tokens += r.num_generated;
  c.max_queue = std::max(c.max_queue, queue);
  finished_client_.push_back(r.client);
  fairness_.Depart(r.client, r.finish);
}

void ClientMetrics::OnRejected(const Request& r) {
  ++TallyOf(r.client).rejected;
  fairness_.Depart(r.client, r.finish != kNever ? r.finish : r.arrival);
}

void ClientMetrics::Summarize(TimeNs end, std::span<const double> ttft_s,
                              std::span<const double> e2e_s, RunSummary& s) {
  fairness_.Finish(end);
  s.service_input_weight = input_weight_;
  s.service_output_weight = output_weight_;
  s.fairness_window_s = options_.fairness_window_s;
  const size_t n = std::max({options_.client_names.size(), options_.client_weights.size(),
                             tallies_.size(), static_cast<size_t>(fairness_.NumClients())});

  // Stable counting sort of the latencies by client: each client's values stay in
  // OnFinished order, so its mean sums in a deterministic order.
  std::vector<size_t> begin(n + 1, 0);
  for (int32_t c : finished_client_) ++begin[static_cast<size_t>(c) + 1];
  for (size_t c = 0; c < n; ++c) begin[c + 1] += begin[c];
  std::vector<size_t> next(begin.begin(), begin.end() - 1);
  std::vector<double> ttft(ttft_s.size()), e2e(e2e_s.size());
  for (size_t i = 0; i < finished_client_.size(); ++i) {
    const size_t at = next[static_cast<size_t>(finished_client_[i])]++;
    ttft[at] = ttft_s[i];
    e2e[at] = e2e_s[i];
  }

  std::vector<double> weighted;  // service / weight of the clients with requests
  for (size_t c = 0; c < n; ++c) {
    ClientSummary& cs = s.clients.emplace_back();
    cs.name = c < options_.client_names.size() ? options_.client_names[c] : std::to_string(c);
    cs.weight = c < options_.client_weights.size() ? options_.client_weights[c] : 1.0;
    const Tally counts = c < tallies_.size() ? tallies_[c] : Tally{};
    cs.finished = counts.finished;
    cs.rejected = counts.rejected;
    cs.requests = counts.finished + counts.rejected;
    cs.input_tokens = counts.input_tokens;
    cs.output_tokens = counts.output_tokens;
    const auto index = static_cast<int32_t>(c);
    cs.service = index < fairness_.NumClients() ? fairness_.Service(index) : 0.0;
    cs.service_per_weight = cs.service / cs.weight;
    cs.output_throughput =
        s.makespan_s > 0 ? static_cast<double>(counts.output_tokens) / s.makespan_s : 0.0;
    const size_t count = begin[c + 1] - begin[c];
    cs.ttft_s = Distribution::Of(std::span<double>(ttft.data() + begin[c], count));
    cs.e2e_s = Distribution::Of(std::span<double>(e2e.data() + begin[c], count));
    cs.max_queue_s = static_cast<double>(counts.max_queue) / 1e9;
    if (cs.requests > 0) weighted.push_back(cs.service_per_weight);
  }
  s.jain_index = JainIndex(weighted);
  s.service_difference_max = fairness_.max_difference();
  s.service_difference_mean = fairness_.mean_difference();
  s.service_difference_windows = fairness_.difference_windows();
}

}  // namespace servelab
