#include "sim/sim_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

namespace servelab {
namespace {

std::string Gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / kBytesPerGib);
  return buf;
}

}  // namespace

DeploymentSpec DeploymentOf(const ExperimentConfig& config) {
  DeploymentSpec d;
  d.model = config.model;
  d.gpu = config.hardware.gpu;
  d.tensor_parallel = config.hardware.tensor_parallel;
  d.pipeline_parallel = config.hardware.pipeline_parallel;
  d.expert_parallel = config.hardware.expert_parallel;
  d.gpus_per_node = config.hardware.gpus_per_node;
  d.network_gbps = config.hardware.NetworkGbps();
  d.network_latency_us = config.hardware.NetworkLatencyUs();
  d.weight_dtype = config.precision.weights;
  d.kv_dtype = config.precision.kv_cache;
  d.max_num_seqs = config.scheduler.max_num_seqs;
  // The context served (ServedContextLen's, unchecked here: SimReplicaOf checks it).
  d.max_model_len = config.scheduler.max_model_len > 0 ? config.scheduler.max_model_len
                                                       : config.model.max_position_embeddings;
  return d;
}

StatusOr<SimReplica> SimReplicaOf(const ExperimentConfig& config) {
  const ModelSpec& model = config.model;
  const HardwareConfig& hw = config.hardware;
  SimReplica r;
  r.deployment = DeploymentOf(config);

  MemoryOptions mem;
  mem.tensor_parallel = hw.tensor_parallel;
  mem.pipeline_parallel = hw.pipeline_parallel;
  mem.weight_dtype = config.precision.weights;
  mem.kv_dtype = config.precision.kv_cache;
  mem.memory_utilization = hw.memory_utilization;
  mem.framework_overhead_gib = hw.framework_overhead_gib;
  mem.max_num_batched_tokens = config.scheduler.max_num_batched_tokens;
  mem.max_num_seqs = config.scheduler.max_num_seqs;
  mem.block_size = config.scheduler.block_size;
  r.memory = EstimateMemory(model, hw.gpu, mem);
  if (!r.memory.fits && hw.num_gpu_blocks == 0) {
    return InvalidArgument(
        config.Where("model") + ": " + model.name + " (" + std::string(DTypeName(mem.weight_dtype)) +
        ") does not fit on " + hw.gpu.name + " x" +
        std::to_string(hw.tensor_parallel * hw.pipeline_parallel) + ": short by " +
        Gib(r.memory.shortfall) + " per GPU (weights " + Gib(r.memory.weights) +
        " + activations " + Gib(r.memory.activations) + " + overhead " +
        Gib(r.memory.overhead) + " vs budget " + Gib(r.memory.budget) + " = " +
        std::to_string(hw.memory_utilization) + " x " + Gib(r.memory.total) +
        "); try more tensor_parallel, a smaller weight dtype or a larger GPU");
  }

  const int32_t gpus = hw.tensor_parallel * hw.pipeline_parallel;
  r.kv_bytes_per_block_per_gpu = static_cast<int64_t>(
      KvBytesPerTokenPerGpu(model, config.precision.kv_cache, hw.tensor_parallel,
                            hw.pipeline_parallel) *
      config.scheduler.block_size);
  r.capacity.block_size = config.scheduler.block_size;
  const int64_t blocks = hw.num_gpu_blocks > 0 ? hw.num_gpu_blocks : r.memory.kv_blocks;
  if (blocks > kMaxKvBlocks) {
    return InvalidArgument(config.Where(hw.num_gpu_blocks > 0 ? "hardware.num_gpu_blocks" : "hardware") +
                           ": a KV cache of " + std::to_string(blocks) + " blocks, more than " +
                           std::to_string(kMaxKvBlocks) + " (a larger block_size holds more)");
  }
  r.capacity.num_gpu_blocks = static_cast<int32_t>(blocks);
  r.capacity.bytes_per_block = r.kv_bytes_per_block_per_gpu * gpus;
  const double host_blocks =
      std::floor(hw.swap_space_gib * kBytesPerGib / static_cast<double>(r.kv_bytes_per_block_per_gpu));
  if (config.scheduler.preemption == PreemptionMode::kSwap && host_blocks > kMaxKvBlocks) {
    return InvalidArgument(config.Where("hardware.swap_space_gib") + ": " + std::to_string(hw.swap_space_gib) +
                           " GiB is " + std::to_string(host_blocks) + " KV blocks, more than " +
                           std::to_string(kMaxKvBlocks));
  }
  r.capacity.num_cpu_blocks = static_cast<int32_t>(std::min<double>(host_blocks, kMaxKvBlocks));
  if (config.scheduler.preemption == PreemptionMode::kSwap) {
    if (hw.gpu.pcie_gbps <= 0) {
      return InvalidArgument(config.Where("scheduler.preemption") + ": swap needs hardware.gpu.pcie_gbps > 0");
    }
    r.swap_ns_per_block = static_cast<double>(r.kv_bytes_per_block_per_gpu) / hw.gpu.pcie_gbps;
  }
  auto context = ServedContextLen(config, model.max_position_embeddings, model.name);
  if (!context.ok()) return context.status();
  r.max_model_len = *context;
  return r;
}

Status ResolveCostModel(ExperimentConfig& config) {
  NamedParams resolved;
  auto model = BuiltinCostModels().Make(config.cost_model, DeploymentOf(config), &resolved);
  if (!model.ok()) return config.Locate(model.status());
  config.cost_model = std::move(resolved);
  return Status::Ok();
}

std::optional<TimeNs> SimBackend::PredictPrefillTime(int32_t num_tokens) const {
  Request probe;
  probe.prompt_len = num_tokens;
  probe.target_output_len = 1;
  StepPlan plan;
  plan.seqs.push_back(ScheduledRequest{&probe, num_tokens, 0, true, false});
  plan.num_prefill_tokens = num_tokens;
  plan.num_emitting = 1;
  return cost_model_->StepTime(plan);
}

StatusOr<TimeNs> SimBackend::CheckedStepTime(TimeNs compute, TimeNs swap) const {
  if (!(compute >= 0 && compute <= kMaxStepTime && swap >= 0 && swap <= kMaxStepTime)) {
    return InvalidArgument("the cost model predicts a step of " +
                           std::to_string(ToSeconds(compute)) + " s (+ " +
                           std::to_string(ToSeconds(swap)) + " s of swap), more than " +
                           std::to_string(ToSeconds(kMaxStepTime)) +
                           " s: check the cost model's and the GPU's figures");
  }
  return compute + swap;
}

StatusOr<StepResult> SimBackend::Execute(const StepPlan& plan) {
  StepResult result;
  TimeNs compute;
  if (stages_ > 1) {
    // Costed once, by stage: the stage times sum to StepTime exactly.
    result.stages.resize(static_cast<size_t>(stages_));
    cost_model_->StageTimes(plan, result.stages);
    compute = std::accumulate(result.stages.begin(), result.stages.end(), TimeNs{0});
  } else {
    compute = cost_model_->StepTime(plan);
  }
  const TimeNs swap = SwapTime(plan);
  auto elapsed = CheckedStepTime(compute, swap);
  if (!elapsed.ok()) return elapsed.status();
  result.elapsed = *elapsed;
  if (stages_ > 1) result.stages.front() += swap;  // the copies precede the first stage
  return result;
}

void SimBackend::BeginDecodeRun(const StepPlan& plan) {
  run_seqs_ = static_cast<int64_t>(plan.seqs.size());
  run_context_ = 0;
  for (const ScheduledRequest& seq : plan.seqs) run_context_ += CostedContextLen(seq);
  if (!cost_model_->TimesDecodeBatches()) {
    run_plan_ = plan;
    run_iteration_ = 0;
  }
}

StatusOr<TimeNs> SimBackend::DecodeRunStepTime(int32_t j) {
  if (cost_model_->TimesDecodeBatches()) {
    return CheckedStepTime(cost_model_->DecodeStepTime(run_seqs_, run_context_ + run_seqs_ * j), 0);
  }
  const int32_t delta = j - run_iteration_;
  for (ScheduledRequest& seq : run_plan_.seqs) seq.num_computed_tokens += delta;
  run_plan_.steps_since_prefill = static_cast<int32_t>(
      std::min<int64_t>(int64_t{run_plan_.steps_since_prefill} + delta, kMaxStepsSincePrefill));
  run_iteration_ = j;
  return CheckedStepTime(cost_model_->StepTime(run_plan_), 0);
}

TimeNs SimBackend::SwapTime(const StepPlan& plan) const {
  const auto blocks = static_cast<double>(plan.swap_out.size() + plan.swap_in.size());
  return static_cast<TimeNs>(std::llround(blocks * swap_ns_per_block_));
}

StatusOr<BackendFactory> MakeSimBackendFactory(const ExperimentConfig& config) {
  auto replica = SimReplicaOf(config);
  if (!replica.ok()) return replica.status();
  const DeploymentSpec deployment = DeploymentOf(config);
  if (auto cost = BuiltinCostModels().Make(config.cost_model, deployment); !cost.ok()) {
    return config.Locate(cost.status());
  }
  return BackendFactory([replica = std::move(replica).value(), deployment,
                         cost_model = config.cost_model](int32_t) -> StatusOr<std::unique_ptr<Backend>> {
    auto cost = BuiltinCostModels().Make(cost_model, deployment);
    if (!cost.ok()) return cost.status();
    return std::unique_ptr<Backend>(std::make_unique<SimBackend>(std::move(cost).value(), replica));
  });
}

StatusOr<RunOutcome> RunSimulation(const ExperimentConfig& config, const MetricsSinks& sinks) {
  auto prepared = PrepareExperiment(config);
  if (!prepared.ok()) return prepared.status();
  SERVELAB_RETURN_IF_ERROR(ResolveCostModel(prepared->config));
  auto backends = MakeSimBackendFactory(prepared->config);
  if (!backends.ok()) return backends.status();
  return RunExperiment(*prepared, *backends, sinks);
}

}  // namespace servelab
