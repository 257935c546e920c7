#pragma once
// The simulator's Backend: an iteration takes what the cost model predicts (with
// pipeline parallelism, stage by stage: CostModel::StageTimes), plus the time its swap
// copies take over PCIe (blocks x bytes per block per GPU / PCIe
// bandwidth; the GPUs of a replica copy their shards in parallel, and vLLM performs the
// copies before the forward pass, so they do not overlap it).
//
// Its facts come from the experiment once (SimReplicaOf): the deployment, the KV pool
// the memory formula leaves on each GPU (or hardware.num_gpu_blocks), the host swap
// space, the context served (the model's window or scheduler.max_model_len).
#include <memory>
#include <optional>

#include "core/backend.h"
#include "driver/driver.h"
#include "driver/experiment.h"
#include "driver/experiment_config.h"
#include "sim/cost_model.h"
#include "sim/memory.h"

namespace servelab {

// What the experiment's `model`, `hardware` and `precision` describe.
DeploymentSpec DeploymentOf(const ExperimentConfig& config);

// One simulated replica, derived from the experiment.
struct SimReplica {
  DeploymentSpec deployment;
  MemoryEstimate memory;   // per GPU
  KvCapacity capacity;     // bytes_per_block: the whole replica's (per GPU x GPUs)
  int64_t kv_bytes_per_block_per_gpu = 0;  // one GPU's shard of a block (the most layers)
  double swap_ns_per_block = 0;  // one block's shard over one GPU's PCIe link
  int32_t max_model_len = 0;
};

// InvalidArgument naming the key when the model does not fit (and hardware.num_gpu_blocks
// is not set), swap preemption has no PCIe bandwidth, or scheduler.max_model_len exceeds
// the model's window.
StatusOr<SimReplica> SimReplicaOf(const ExperimentConfig& config);

// Checks config.cost_model against its registry and replaces its parameters by the
// resolved ones (every parameter, defaults filled in), for config.resolved.yaml. The
// experiment's cost model is checked whichever backend runs it.
Status ResolveCostModel(ExperimentConfig& config);

// The longest step a simulated replica may take (a million seconds).
inline constexpr TimeNs kMaxStepTime = TimeNs{1'000'000} * kNsPerSec;

class SimBackend final : public Backend {
 public:
  SimBackend(std::unique_ptr<CostModel> cost_model, const SimReplica& replica)
      : cost_model_(std::move(cost_model)),
        capacity_(replica.capacity),
        max_model_len_(replica.max_model_len),
        swap_ns_per_block_(replica.swap_ns_per_block),
        stages_(replica.deployment.pipeline_parallel) {}

  std::string_view Name() const override { return "sim"; }
  KvCapacity Capacity() const override { return capacity_; }
  int32_t MaxModelLen() const override { return max_model_len_; }
  // A step predicted longer than kMaxStepTime is an error naming it (a cost model or GPU
  // with figures out of any real range), never a time that overflows.
  StatusOr<StepResult> Execute(const StepPlan& plan) override;
  // The cost model's time for one request's prefill of `num_tokens` alone.
  std::optional<TimeNs> PredictPrefillTime(int32_t num_tokens) const override;
  std::string Describe() const override { return cost_model_->Describe(); }
  std::optional<ExpertsRun> Routing(const StepPlan& plan) const override {
    return cost_model_->ExpectedRouting(plan);
  }
  std::optional<DecodeGraphRun> DecodeGraph(const StepPlan& plan) const override {
    return cost_model_->ExpectedDecodeGraph(plan);
  }
  bool ReportsDecodeGraphs() const override { return true; }
  // Decode runs: in O(1) per iteration when the cost model times decode batches from
  // their aggregates (CostModel::TimesDecodeBatches), else by costing each iteration's plan.
  bool PredictsDecodeRuns() const override { return true; }
  void BeginDecodeRun(const StepPlan& plan) override;
  StatusOr<TimeNs> DecodeRunStepTime(int32_t j) override;

  TimeNs SwapTime(const StepPlan& plan) const;

 private:
  // compute + swap, or the error Execute() reports for a step past kMaxStepTime.
  StatusOr<TimeNs> CheckedStepTime(TimeNs compute, TimeNs swap) const;

  std::unique_ptr<CostModel> cost_model_;
  KvCapacity capacity_;
  int32_t max_model_len_;
  double swap_ns_per_block_;
  int32_t stages_;  // pipeline stages: > 1 fills StepResult::stages (swaps on the first)
  // The decode run being advanced: its first iteration's seqs and summed contexts, and
  // (for a cost model that needs whole plans) the plan of iteration run_iteration_.
  int64_t run_seqs_ = 0;
  int64_t run_context_ = 0;
  StepPlan run_plan_;
  int32_t run_iteration_ = 0;
};

// One SimBackend per replica, each with its own cost model (config.cost_model, as
// ResolveCostModel left it). Validates everything up front (SimReplicaOf, the cost
// model); building a backend then cannot fail.
StatusOr<BackendFactory> MakeSimBackendFactory(const ExperimentConfig& config);

// The whole simulator in one call, in memory (tests, benchmarks): prepares `config`,
// resolves its cost model, builds the SimBackends and runs, streaming into `sinks`.
StatusOr<RunOutcome> RunSimulation(const ExperimentConfig& config, const MetricsSinks& sinks = {});

}  // namespace servelab
