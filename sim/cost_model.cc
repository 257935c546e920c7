#include "sim/cost_model.h"

#include "sim/roofline_cost_model.h"
#include "sim/simple_cost_models.h"

namespace servelab {

std::vector<std::string> CostModelNames() { return {"constant", "linear", "roofline"}; }

StatusOr<std::unique_ptr<CostModel>> MakeCostModel(const CostModelConfig& config,
                                                   const DeploymentSpec& deployment) {
  switch (config.type) {
    case CostModelType::kConstant:
      return std::unique_ptr<CostModel>(std::make_unique<ConstantCostModel>(config));
    case CostModelType::kLinear:
      return std::unique_ptr<CostModel>(std::make_unique<LinearCostModel>(config));
    case CostModelType::kRoofline:
      SERVELAB_RETURN_IF_ERROR(RooflineCostModel::Validate(deployment));
      return std::unique_ptr<CostModel>(
          std::make_unique<RooflineCostModel>(config, deployment));
  }
  return InvalidArgument("unknown cost model type");
}

}  // namespace servelab
