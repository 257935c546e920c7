#pragma once
// ClientMetrics: MetricsCollector's per-client part (RunSummary::clients and the fairness
// fields). Counts requests and tokens per client, converts delivered tokens into VTC's
// service units for FairnessTracker, and at the end groups the finished requests'
// latencies by client.
//
// Memory: one int32 per finished request (its client) plus O(#clients); per step O(1)
// per emitted token, no allocation.
#include <cstdint>
#include <span>
#include <vector>

#include "core/fairness_tracker.h"
#include "core/metrics.h"
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
  // A step ending at `end` is about to report its tokens.
  void BeginStep(TimeNs end) { fairness_.AdvanceTo(end); }
  // `r` got a token at the step's end; its first token also delivers its prompt (once:
  // tokens recomputed after a preemption are not charged again).
  void OnToken(const Request& r, bool first_token) {
    fairness_.Add(r.client, first_token ? output_weight_ + input_weight_ * r.prompt_len
                                        : output_weight_);
  }
  // `queue` = first_scheduled - arrival, ns.
  void OnFinished(const Request& r, TimeNs queue);
  // Leaves the system at Request::finish, or at arrival when unset.
  void OnRejected(const Request& r);

  // Fills s.clients and s's fairness fields; reads s.makespan_s. `ttft_s` and `e2e_s` hold
  // one value per OnFinished, in call order. Call once, after the last event at `end`.
  void Summarize(TimeNs end, std::span<const double> ttft_s, std::span<const double> e2e_s,
                 RunSummary& s);

 private:
  // Per client, over finished (and rejected) requests; service lives in fairness_.
  struct Tally {
    int64_t finished = 0, rejected = 0, input_tokens = 0, output_tokens = 0;
    TimeNs max_queue = 0;
  };
  Tally& TallyOf(int32_t client);

  const MetricsOptions& options_;  // MetricsCollector's, outlives this
  double input_weight_, output_weight_;  // service units per prompt / output token
  FairnessTracker fairness_;
  std::vector<Tally> tallies_;           // by client index
  std::vector<int32_t> finished_client_;  // the client of each OnFinished, in order
};

}  // namespace servelab
