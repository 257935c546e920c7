#pragma once
// AIMD control of the batch limit and token budget toward a latency target (see
// SlaControlConfig). Pure: it sees what the scheduler reports, never a clock.
// Every `interval_steps` steps it estimates the metric and adjusts: above the target,
// both knobs shrink by `decrease`; at or below it, they grow by the additive steps,
// never past the configured maxima.
//
// Estimates. tpot_p95: the mean duration of the last `window` iterations that carried
// decode tokens. A request's TPOT is the mean of the iterations it decoded through, so
// the spread of TPOTs across requests is the spread of such windowed means over time:
// holding every window's mean at the target holds (nearly) every request's TPOT there,
// its p95 included, without waiting for requests to finish (which lags by their whole
// lifetime and makes AIMD overshoot). ttft_p95: the nearest-rank p95 of the last
// `window` first-token latencies.
#include <cstdint>
#include <vector>

#include "core/scheduler_config.h"
#include "core/time.h"

namespace servelab {

class SlaController {
 public:
  SlaController(const SlaControlConfig& config, int32_t max_num_seqs,
                int32_t max_num_batched_tokens);

  // One iteration ended: `step_time` long, with `num_decodes` decode tokens in it.
  void OnStep(TimeNs step_time, int32_t num_decodes);
  // A request got its first token `ttft` after arriving.
  void OnFirstToken(TimeNs ttft);

  int32_t NumSeqsLimit() const { return num_seqs_; }
  int32_t TokenBudget() const { return tokens_; }
  // The estimate (ns) the last adjustment saw, 0 before the first.
  TimeNs LastObserved() const { return last_observed_; }
  int64_t NumAdjustments() const { return adjustments_; }

 private:
  void Record(TimeNs sample);
  void Adjust();

  SlaControlConfig config_;
  int32_t max_seqs_, max_tokens_;
  int32_t num_seqs_, tokens_;
  std::vector<TimeNs> window_;  // ring buffer of samples
  size_t next_ = 0;
  size_t filled_ = 0;
  std::vector<TimeNs> scratch_;
  int64_t steps_ = 0;
  TimeNs last_observed_ = 0;
  int64_t adjustments_ = 0;
};

}  // namespace servelab
