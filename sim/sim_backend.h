#pragma once
// The simulator's Backend: an iteration takes what the cost model predicts.
#include <memory>

#include "core/backend.h"
#include "sim/cost_model.h"

namespace servelab {

class SimBackend final : public Backend {
 public:
  SimBackend(std::unique_ptr<CostModel> cost_model, KvCapacity capacity)
      : cost_model_(std::move(cost_model)), capacity_(capacity) {}

  std::string_view Name() const override { return "sim"; }
  KvCapacity Capacity() const override { return capacity_; }
  StepResult Execute(const StepPlan& plan) override {
    StepResult result;
    result.elapsed = cost_model_->StepTime(plan);
    return result;
  }
  const CostModel& GetCostModel() const { return *cost_model_; }

 private:
  std::unique_ptr<CostModel> cost_model_;
  KvCapacity capacity_;
};

}  // namespace servelab
