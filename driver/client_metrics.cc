#include "driver/client_metrics.h"

#include <algorithm>
#include <string>

#include "core/status.h"

namespace servelab {

ClientMetrics::ClientMetrics(const MetricsOptions& options)
    : options_(options),
      fairness_(options.client_weights, options.service_input_weight,
                options.service_output_weight,
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

void ClientMetrics::Summarize(TimeNs end, std::span<double> ttft_s, std::span<double> e2e_s,
                              RunSummary& s) {
  fairness_.Finish(end);
  s.service_input_weight = options_.service_input_weight;
  s.service_output_weight = options_.service_output_weight;
  s.fairness_window_s = options_.fairness_window_s;
  const size_t n = std::max({options_.client_names.size(), options_.client_weights.size(),
                             tallies_.size(), static_cast<size_t>(fairness_.NumClients())});

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
    cs.max_queue_s = static_cast<double>(counts.max_queue) / 1e9;
    if (cs.requests > 0) weighted.push_back(cs.service_per_weight);
  }
  s.jain_index = JainIndex(weighted);
  s.service_difference_max = fairness_.max_difference();
  s.service_difference_mean = fairness_.mean_difference();
  s.window_jain_index = fairness_.mean_window_jain();
  s.service_difference_windows = fairness_.difference_windows();

  // A client holding every finished request has the run's latency distributions (same
  // values in the same order): copied, not sorted again.
  const auto total = static_cast<int64_t>(finished_client_.size());
  ClientSummary* sole = nullptr;
  for (ClientSummary& c : s.clients) {
    if (c.finished > 0 && c.finished == total) sole = &c;
  }
  // Otherwise a stable counting sort by client into one scratch buffer, reused for each
  // metric, keeps each client's values in OnFinished order (its mean sums in that order).
  if (sole == nullptr && total > 0) {
    std::vector<size_t> begin(n + 1, 0);
    for (int32_t c : finished_client_) ++begin[static_cast<size_t>(c) + 1];
    for (size_t c = 0; c < n; ++c) begin[c + 1] += begin[c];
    std::vector<double> grouped(finished_client_.size());
    std::vector<size_t> next(n);
    for (const auto& [values, member] : {std::pair{ttft_s, &ClientSummary::ttft_s},
                                         std::pair{e2e_s, &ClientSummary::e2e_s}}) {
      std::copy(begin.begin(), begin.end() - 1, next.begin());
      for (size_t i = 0; i < finished_client_.size(); ++i) {
        grouped[next[static_cast<size_t>(finished_client_[i])]++] = values[i];
      }
      for (size_t c = 0; c < n; ++c) {
        s.clients[c].*member =
            Distribution::Of(std::span<double>(grouped.data() + begin[c], begin[c + 1] - begin[c]));
      }
    }
  }
  s.ttft_s = Distribution::Of(ttft_s);
  s.e2e_s = Distribution::Of(e2e_s);
  if (sole != nullptr) {
    sole->ttft_s = s.ttft_s;
    sole->e2e_s = s.e2e_s;
  }
}

}  // namespace servelab
