#include "sim/simple_cost_models.h"

#include <cmath>

namespace servelab {

ConstantCostModel::ConstantCostModel(const ConstantCostModelOptions& options)
    : step_ns_(std::llround(options.step_ms * static_cast<double>(kNsPerMs))) {}

LinearCostModel::LinearCostModel(const LinearCostModelOptions& options)
    : base_ms_(options.base_ms),
      per_token_ms_(options.per_token_ms),
      per_context_token_ms_(options.per_context_token_ms) {}

TimeNs LinearCostModel::StepTime(const StepPlan& plan) const {
  int64_t new_tokens = 0;
  int64_t context_tokens = 0;
  for (const ScheduledRequest& seq : plan.seqs) {
    new_tokens += CostedNewTokens(seq);
    context_tokens += CostedContextLen(seq);
  }
  return TimeOf(new_tokens, context_tokens);
}

TimeNs LinearCostModel::TimeOf(int64_t new_tokens, int64_t context_tokens) const {
  const double ms = base_ms_ + per_token_ms_ * static_cast<double>(new_tokens) +
                    per_context_token_ms_ * static_cast<double>(context_tokens);
  return std::llround(ms * static_cast<double>(kNsPerMs));
}

StatusOr<std::unique_ptr<CostModel>> MakeConstantCostModel(ParamReader& params,
                                                           const DeploymentSpec& /*deployment*/) {
  ConstantCostModelOptions options;
  options.step_ms = params.GetDouble("step_ms", options.step_ms, Bounds{0, 1e6, true, false});
  return std::unique_ptr<CostModel>(std::make_unique<ConstantCostModel>(options));
}

StatusOr<std::unique_ptr<CostModel>> MakeLinearCostModel(ParamReader& params,
                                                         const DeploymentSpec& /*deployment*/) {
  LinearCostModelOptions options;
  options.base_ms = params.GetDouble("base_ms", options.base_ms, Bounds{0, 1e6});
  options.per_token_ms = params.GetDouble("per_token_ms", options.per_token_ms, Bounds{0, 1e6});
  options.per_context_token_ms =
      params.GetDouble("per_context_token_ms", options.per_context_token_ms, Bounds{0, 1e6});
  return std::unique_ptr<CostModel>(std::make_unique<LinearCostModel>(options));
}

}  // namespace servelab
