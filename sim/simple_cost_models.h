#pragma once
// Cost models with no hardware in them, for scheduling experiments that want a known,
// easily reasoned-about clock, and for tests.
#include <string_view>

#include "sim/cost_model.h"

namespace servelab {

// Every iteration takes step_ms, whatever it holds.
class ConstantCostModel : public CostModel {
 public:
  explicit ConstantCostModel(const CostModelConfig& config);
  std::string_view Name() const override { return "constant"; }
  TimeNs StepTime(const StepPlan& plan) const override { return step_ns_; }

 private:
  TimeNs step_ns_;  // llround(step_ms * 1e6)
};

// base_ms + per_token_ms * sum(new tokens) + per_context_token_ms * sum(context lengths),
// where each seq counts CostedNewTokens (padding = 1) and CostedContextLen.
class LinearCostModel : public CostModel {
 public:
  explicit LinearCostModel(const CostModelConfig& config);
  std::string_view Name() const override { return "linear"; }
  TimeNs StepTime(const StepPlan& plan) const override;

 private:
  double base_ms_;
  double per_token_ms_;
  double per_context_token_ms_;
};

}  // namespace servelab
