#pragma once
// The simulator's Backend: an iteration takes what the cost model predicts, plus the
// time its swap copies take over PCIe (blocks x bytes per block per GPU / PCIe
// bandwidth; the GPUs of a replica copy their shards in parallel, and vLLM performs the
// copies before the forward pass, so they do not overlap it).
#include <cmath>
#include <memory>

#include "core/backend.h"
#include "sim/cost_model.h"

namespace servelab {

class SimBackend final : public Backend {
 public:
  // `swap_ns_per_block`: time to copy one KV block between host and device.
  SimBackend(std::unique_ptr<CostModel> cost_model, KvCapacity capacity,
             double swap_ns_per_block = 0.0)
      : cost_model_(std::move(cost_model)),
        capacity_(capacity),
        swap_ns_per_block_(swap_ns_per_block) {}

  std::string_view Name() const override { return "sim"; }
  KvCapacity Capacity() const override { return capacity_; }
  StepResult Execute(const StepPlan& plan) override {
    StepResult result;
    result.elapsed = cost_model_->StepTime(plan) + SwapTime(plan);
    return result;
  }
  const CostModel& GetCostModel() const { return *cost_model_; }
  TimeNs SwapTime(const StepPlan& plan) const {
    const auto blocks = static_cast<double>(plan.swap_out.size() + plan.swap_in.size());
    return static_cast<TimeNs>(std::llround(blocks * swap_ns_per_block_));
  }

 private:
  std::unique_ptr<CostModel> cost_model_;
  KvCapacity capacity_;
  double swap_ns_per_block_;
};

}  // namespace servelab
