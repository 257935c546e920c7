#pragma once
// ClientMetrics: MetricsCollector's per-client part (RunSummary::clients and the fairness
// fields). Counts requests and tokens per client, hands the tokens delivered to
// FairnessTracker, and at the end groups the finished requests' latencies by client.
//
// Memory: one int32 per finished request (its client) plus O(#clients). Per step the
// caller sums the tokens of consecutive seqs of one client in registers and calls
// Deliver once per run of them (once per step with a single client): a per-token call
// would chain every step's tokens through one memory location.
#include <cstdint>
#include <span>
#include <vector>

#include "core/fairness_tracker.h"
#include "driver/metrics.h"
#include "core/request.h"
#include "core/time.h"

namespace servelab {

class ClientMetrics {
 public:
  explicit ClientMetrics(const MetricsOptions& options);

  void OnArrival(const Request& r) {
    TallyOf(r.client);
    fairness_.Arrive(r.client, r.arrival);
  }
  // A step ending at `end` is about to Deliver its tokens.
  void BeginStep(TimeNs end) { fairness_.AdvanceTo(end); }
  // `client` got `output_tokens` at the step's end, and with the first token of a request
  // its prompt: `prompt_tokens` sums those prompts (each charged once: tokens recomputed
  // after a preemption are not charged again).
  void Deliver(int32_t client, int64_t prompt_tokens, int64_t output_tokens) {
    fairness_.Add(client, prompt_tokens, output_tokens);
  }
  // `queue` = first_scheduled - arrival, ns.
  void OnFinished(const Request& r, TimeNs queue);
  // Leaves the system at Request::finish, or at arrival when unset.
  void OnRejected(const Request& r);

  // Fills s.clients, s's fairness fields, and the run's s.ttft_s and s.e2e_s (sorting
  // `ttft_s` and `e2e_s` in place: they hold one value per OnFinished, in call order, and
  // are grouped by client first). Reads s.makespan_s. Call once, after the last event,
  // at `end`.
  void Summarize(TimeNs end, std::span<double> ttft_s, std::span<double> e2e_s,
                 RunSummary& s);

 private:
  // Per client, over finished (and rejected) requests; service lives in fairness_.
  struct Tally {
    int64_t finished = 0, rejected = 0, input_tokens = 0, output_tokens = 0;
    TimeNs max_queue = 0;
  };
  Tally& TallyOf(int32_t client);

  const MetricsOptions& options_;  // MetricsCollector's, outlives this
  FairnessTracker fairness_;
  std::vector<Tally> tallies_;           // by client index
  std::vector<int32_t> finished_client_;  // the client of each OnFinished, in order
};

}  // namespace servelab
