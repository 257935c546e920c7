#pragma once
// Cost models with no hardware in them, for scheduling experiments that want a known,
// easily reasoned-about clock, and for tests.
#include <memory>
#include <string_view>

#include "sim/cost_model.h"

namespace servelab {

// `cost_model: {type: constant, step_ms}`.
struct ConstantCostModelOptions {
  double step_ms = 10.0;  // > 0
};

// `cost_model: {type: linear, base_ms, per_token_ms, per_context_token_ms}`, each >= 0.
struct LinearCostModelOptions {
  double base_ms = 5.0;
  double per_token_ms = 0.05;
  double per_context_token_ms = 0.0;
};

// Every iteration takes step_ms, whatever it holds.
class ConstantCostModel : public CostModel {
 public:
  explicit ConstantCostModel(const ConstantCostModelOptions& options);
  std::string_view Name() const override { return "constant"; }
  TimeNs StepTime(const StepPlan& plan) const override { return step_ns_; }
  bool TimesDecodeBatches() const override { return true; }
  TimeNs DecodeStepTime(int64_t /*seqs*/, int64_t /*context_tokens*/) const override {
    return step_ns_;
  }

 private:
  TimeNs step_ns_;  // llround(step_ms * 1e6)
};

// base_ms + per_token_ms * sum(new tokens) + per_context_token_ms * sum(context lengths),
// where each seq counts CostedNewTokens (padding = 1) and CostedContextLen.
class LinearCostModel : public CostModel {
 public:
  explicit LinearCostModel(const LinearCostModelOptions& options);
  std::string_view Name() const override { return "linear"; }
  TimeNs StepTime(const StepPlan& plan) const override;
  bool TimesDecodeBatches() const override { return true; }
  TimeNs DecodeStepTime(int64_t seqs, int64_t context_tokens) const override {
    return TimeOf(seqs, context_tokens);
  }

 private:
  TimeNs TimeOf(int64_t new_tokens, int64_t context_tokens) const;

  double base_ms_;
  double per_token_ms_;
  double per_context_token_ms_;
};

// The registry's factories: read the options above (unknown keys are errors).
StatusOr<std::unique_ptr<CostModel>> MakeConstantCostModel(ParamReader& params,
                                                           const DeploymentSpec& deployment);
StatusOr<std::unique_ptr<CostModel>> MakeLinearCostModel(ParamReader& params,
                                                         const DeploymentSpec& deployment);

}  // namespace servelab
