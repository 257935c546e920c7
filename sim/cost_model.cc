#include "sim/cost_model.h"

#include "sim/calibrated_cost_model.h"
#include "sim/roofline_cost_model.h"
#include "sim/simple_cost_models.h"

namespace servelab {

void CostModel::StageTimes(const StepPlan& plan, std::span<TimeNs> stages) const {
  if (stages.empty()) return;
  const TimeNs total = StepTime(plan);
  const auto n = static_cast<TimeNs>(stages.size());
  for (size_t s = 0; s < stages.size(); ++s) {
    stages[s] = total / n + (static_cast<TimeNs>(s) < total % n ? 1 : 0);
  }
}

void RegisterBuiltinCostModels(CostModelRegistry& registry) {
  registry.Register("roofline",
                    "per op: max(FLOPs / (peak x efficiency), bytes / (bandwidth x "
                    "efficiency));\nattention per sequence from its own context; TP "
                    "all-reduce; PP stages",
                    MakeRooflineCostModel);
  registry.Register("constant", "every iteration takes step_ms", MakeConstantCostModel);
  registry.Register("linear",
                    "base_ms + per_token_ms x new tokens + per_context_token_ms x context "
                    "tokens",
                    MakeLinearCostModel);
  registry.Register("calibrated",
                    "per-op models fitted to profiles (`servelab calibrate`): {path: "
                    "MODEL.yaml};\nthe ops the profiles did not cover from the roofline",
                    MakeCalibratedCostModel);
}

const CostModelRegistry& BuiltinCostModels() {
  return BuiltinRegistry<CostModelRegistry>("cost model", RegisterBuiltinCostModels);
}

}  // namespace servelab
