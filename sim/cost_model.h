#pragma once
// A CostModel predicts how long one iteration (a StepPlan) takes on one replica.
// Implementations: roofline (per-op max of compute and memory time), constant, linear.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/fields.h"
#include "core/model_spec.h"
#include "core/status.h"
#include "core/step_plan.h"
#include "core/time.h"
#include "sim/gpu_spec.h"

namespace servelab {

enum class CostModelType : uint8_t { kRoofline, kConstant, kLinear };
inline constexpr EnumName<CostModelType> kCostModelNames[] = {
    {"roofline", CostModelType::kRoofline},
    {"constant", CostModelType::kConstant},
    {"linear", CostModelType::kLinear}};

struct CostModelConfig {
  CostModelType type = CostModelType::kRoofline;

  // constant: every iteration takes step_ms.
  double step_ms = 10.0;

  // linear: base_ms + per_token_ms * (new tokens in the step)
  //                 + per_context_token_ms * (sum over seqs of their context length).
  double base_ms = 5.0;
  double per_token_ms = 0.05;
  double per_context_token_ms = 0.0;

  // roofline: each op costs max(FLOPs / (peak * gemm or attention efficiency),
  //                             bytes / (bandwidth * memory_efficiency)).
  double gemm_efficiency = 0.75;       // fraction of dense tensor peak a GEMM reaches
  double attention_efficiency = 0.5;   // fraction of tensor peak attention FLOPs reach
  double memory_efficiency = 0.85;     // fraction of peak DRAM bandwidth streams reach
  double interconnect_efficiency = 0.8;  // fraction of link bandwidth all-reduce reaches
  double allreduce_latency_us = 10.0;  // fixed cost per all-reduce (launch, sync)
  double step_overhead_ms = 0.5;       // per iteration: scheduling, launches, sampling

  template <class V>
  void VisitFields(V& v) {
    v.Enum("type", type, EnumNames<CostModelType>(kCostModelNames));
    switch (type) {
      case CostModelType::kConstant:
        v.Field("step_ms", step_ms, kPositive);
        break;
      case CostModelType::kLinear:
        v.Field("base_ms", base_ms, kNonNegative);
        v.Field("per_token_ms", per_token_ms, kNonNegative);
        v.Field("per_context_token_ms", per_context_token_ms, kNonNegative);
        break;
      case CostModelType::kRoofline:
        v.Field("gemm_efficiency", gemm_efficiency, kOpenUnitInterval);
        v.Field("attention_efficiency", attention_efficiency, kOpenUnitInterval);
        v.Field("memory_efficiency", memory_efficiency, kOpenUnitInterval);
        v.Field("interconnect_efficiency", interconnect_efficiency, kOpenUnitInterval);
        v.Field("allreduce_latency_us", allreduce_latency_us, kNonNegative);
        v.Field("step_overhead_ms", step_overhead_ms, kNonNegative);
        break;
    }
  }
};

// What a replica runs: model, GPU, parallelism and precision.
struct DeploymentSpec {
  ModelSpec model;
  GpuSpec gpu;
  int32_t tensor_parallel = 1;
  int32_t pipeline_parallel = 1;
  DType weight_dtype = DType::kBf16;
  DType kv_dtype = DType::kBf16;
  DType activation_dtype = DType::kBf16;
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string_view Name() const = 0;
  // REQUIRES: !plan.empty(). Deterministic: the same plan gives the same time.
  virtual TimeNs StepTime(const StepPlan& plan) const = 0;
};

// Tokens a scheduled seq costs this step: its num_new_tokens, except that a padding seq
// (static batching) costs one decode token whatever it carries. Every cost model counts
// tokens this way.
inline int32_t CostedNewTokens(const ScheduledRequest& seq) {
  return seq.is_padding ? 1 : seq.num_new_tokens;
}
// Context a seq attends over this step: cached tokens plus its costed new tokens.
inline int64_t CostedContextLen(const ScheduledRequest& seq) {
  return int64_t{seq.num_computed_tokens} + CostedNewTokens(seq);
}

// The registry of cost models: "roofline", "constant", "linear".
std::vector<std::string> CostModelNames();
StatusOr<std::unique_ptr<CostModel>> MakeCostModel(const CostModelConfig& config,
                                                   const DeploymentSpec& deployment);

}  // namespace servelab
