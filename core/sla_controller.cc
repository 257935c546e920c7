#include "core/sla_controller.h"

#include <algorithm>
#include <cmath>

namespace servelab {

SlaController::SlaController(const SlaControlConfig& config, int32_t max_num_seqs,
                             int32_t max_num_batched_tokens)
    : config_(config),
      max_seqs_(max_num_seqs),
      max_tokens_(max_num_batched_tokens),
      num_seqs_(max_num_seqs),
      tokens_(max_num_batched_tokens),
      window_(config.window, 0) {
  scratch_.reserve(config.window);
}

void SlaController::Record(TimeNs sample) {
  window_[next_] = sample;
  next_ = (next_ + 1) % window_.size();
  filled_ = std::min(filled_ + 1, window_.size());
}

void SlaController::OnStep(TimeNs step_time, int32_t num_decodes) {
  // TPOT: every decode token of the step waited step_time for it.
  if (config_.metric == SlaMetric::kTpotP95 && num_decodes > 0) Record(step_time);
  if (++steps_ % config_.interval_steps == 0) Adjust();
}

void SlaController::OnFirstToken(TimeNs ttft) {
  if (config_.metric == SlaMetric::kTtftP95) Record(ttft);
}

void SlaController::Adjust() {
  scratch_.assign(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(filled_));
  if (scratch_.empty()) return;
  if (config_.metric == SlaMetric::kTpotP95) {
    TimeNs sum = 0;
    for (TimeNs x : scratch_) sum += x;
    last_observed_ = sum / static_cast<TimeNs>(scratch_.size());
  } else {
    // Nearest-rank p95: the smallest sample with at least 95% of samples at or below it.
    const size_t rank =
        static_cast<size_t>(std::ceil(0.95 * static_cast<double>(scratch_.size()))) - 1;
    std::nth_element(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(rank),
                     scratch_.end());
    last_observed_ = scratch_[rank];
  }
  ++adjustments_;
  const auto target = static_cast<TimeNs>(config_.target_ms * 1e6);
  if (last_observed_ > target) {
    num_seqs_ = std::max(config_.min_num_seqs,
                         static_cast<int32_t>(std::floor(num_seqs_ * config_.decrease)));
    tokens_ = std::max(config_.min_batched_tokens,
                       static_cast<int32_t>(std::floor(tokens_ * config_.decrease)));
  } else {
    num_seqs_ = std::min(max_seqs_, num_seqs_ + config_.increase_seqs);
    tokens_ = std::min(max_tokens_, tokens_ + config_.increase_tokens);
  }
  // The budget must cover one token for every running request.
  tokens_ = std::max(tokens_, std::min(num_seqs_, max_tokens_));
}

}  // namespace servelab
