#pragma once
// A CostModel predicts how long one iteration (a StepPlan) takes on one replica.
// Implementations register by name in the cost-model registry (core/registry.h):
// roofline (per-op max of compute and memory time), constant, linear. The experiment's
// `cost_model: {type: <name>, <its parameters>}` picks one.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend.h"
#include "core/fields.h"
#include "core/registry.h"
#include "core/model_spec.h"
#include "core/status.h"
#include "core/step_plan.h"
#include "core/time.h"
#include "driver/gpu_spec.h"

namespace servelab {

// What a replica runs: model, GPU, parallelism and precision.
struct DeploymentSpec {
  ModelSpec model;
  GpuSpec gpu;
  int32_t tensor_parallel = 1;
  int32_t pipeline_parallel = 1;
  int32_t expert_parallel = 1;  // 1, or tensor_parallel (HardwareConfig::expert_parallel)
  // Nodes (HardwareConfig): the replica's GPUs fill nodes in order, stage by stage.
  int32_t gpus_per_node = 8;
  double network_gbps = 50;       // between nodes, per GPU and direction, GB/s
  double network_latency_us = 10;  // extra per collective or transfer that crosses nodes
  DType weight_dtype = DType::kBf16;
  DType kv_dtype = DType::kBf16;
  DType activation_dtype = DType::kBf16;
  // The scheduler's limits, where a cost model follows what an engine sizes by them (the
  // calibrated model's decode graphs): sequences a step, the context served; 0: none.
  int32_t max_num_seqs = 0;
  int32_t max_model_len = 0;
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string_view Name() const = 0;
  // REQUIRES: !plan.empty(). Deterministic: the same plan gives the same time.
  virtual TimeNs StepTime(const StepPlan& plan) const = 0;
  // Pipeline parallelism: the time of each of `stages.size()` stages for `plan`, summing
  // to StepTime(plan) exactly. Default: StepTime split evenly (the remainder's ns to the
  // first stages); the roofline gives each stage its own layers.
  virtual void StageTimes(const StepPlan& plan, std::span<TimeNs> stages) const;
  // Decode runs: whether this model's time for a plan whose every seq decodes (one new
  // token, emitting, no padding) depends only on its number of seqs and the sum of their
  // contexts, so that DecodeStepTime gives it in O(1).
  virtual bool TimesDecodeBatches() const { return false; }
  // REQUIRES: TimesDecodeBatches(). Bit for bit StepTime() of any such plan of `seqs` seqs
  // whose CostedContextLen values sum to `context_tokens`.
  virtual TimeNs DecodeStepTime(int64_t seqs, int64_t context_tokens) const { return 0; }
  // What the model is made of, when more than its name says (the calibrated one: which
  // ops come from the fit, which from the roofline). Empty otherwise.
  virtual std::string Describe() const { return ""; }
  // A mixture of experts: the routing this model expects of `plan`'s MoE layers (the
  // experts touched over all GPUs; those given one row on the busiest GPU); none for a
  // dense model or a model that does not route.
  virtual std::optional<ExpertsRun> ExpectedRouting(const StepPlan& plan) const { return std::nullopt; }
  // The CUDA graph the model prices `plan` as (servelab's CUDA runner's decode graphs);
  // none when it prices the step as run op by op.
  virtual std::optional<DecodeGraphRun> ExpectedDecodeGraph(const StepPlan& plan) const { return std::nullopt; }
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

// name -> factory(parameters, deployment). The factories live beside their models.
using CostModelRegistry = Registry<CostModel, DeploymentSpec>;
void RegisterBuiltinCostModels(CostModelRegistry& registry);
// The registry with every built-in cost model.
const CostModelRegistry& BuiltinCostModels();

}  // namespace servelab
