#include "sim/cost_model.h"

#include "sim/roofline_cost_model.h"
#include "sim/simple_cost_models.h"

namespace servelab {

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
}

const CostModelRegistry& BuiltinCostModels() {
  return BuiltinRegistry<CostModelRegistry>("cost model", RegisterBuiltinCostModels);
}

}  // namespace servelab
