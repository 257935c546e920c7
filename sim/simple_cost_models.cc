#include "sim/simple_cost_models.h"

#include <cmath>

namespace servelab {

ConstantCostModel::ConstantCostModel(const CostModelConfig& config)
    : step_ns_(std::llround(config.step_ms * static_cast<double>(kNsPerMs))) {}

LinearCostModel::LinearCostModel(const CostModelConfig& config)
    : base_ms_(config.base_ms),
      per_token_ms_(config.per_token_ms),
      per_context_token_ms_(config.per_context_token_ms) {}

TimeNs LinearCostModel::StepTime(const StepPlan& plan) const {
  int64_t new_tokens = 0;
  int64_t context_tokens = 0;
  for (const ScheduledRequest& seq : plan.seqs) {
    new_tokens += CostedNewTokens(seq);
    context_tokens += CostedContextLen(seq);
  }
  const double ms = base_ms_ + per_token_ms_ * static_cast<double>(new_tokens) +
                    per_context_token_ms_ * static_cast<double>(context_tokens);
  return std::llround(ms * static_cast<double>(kNsPerMs));
}

}  // namespace servelab
