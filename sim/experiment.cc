#include "sim/experiment.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "policies/registry.h"
#include "sim/router.h"
#include "sim/sim_backend.h"
#include "sim/workload.h"

namespace servelab {
namespace {

std::string Gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / kBytesPerGib);
  return buf;
}

}  // namespace

StatusOr<PreparedExperiment> PrepareExperiment(const ExperimentConfig& config) {
  PreparedExperiment p;
  p.config = config;
  const std::string& src = config.source_path;
  const ModelSpec& model = config.model;
  const HardwareConfig& hw = config.hardware;

  if (model.num_attention_heads % hw.tensor_parallel != 0) {
    return InvalidArgument(src + ": hardware.tensor_parallel: " +
                           std::to_string(hw.tensor_parallel) + " does not divide the " +
                           std::to_string(model.num_attention_heads) + " attention heads of " +
                           model.name);
  }
  if (hw.pipeline_parallel > model.num_hidden_layers) {
    return InvalidArgument(src + ": hardware.pipeline_parallel: " +
                           std::to_string(hw.pipeline_parallel) + " stages for " +
                           std::to_string(model.num_hidden_layers) + " layers");
  }

  p.deployment.model = model;
  p.deployment.gpu = hw.gpu;
  p.deployment.tensor_parallel = hw.tensor_parallel;
  p.deployment.pipeline_parallel = hw.pipeline_parallel;
  p.deployment.weight_dtype = config.precision.weights;
  p.deployment.kv_dtype = config.precision.kv_cache;

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
  p.memory = EstimateMemory(model, hw.gpu, mem);
  if (!p.memory.fits && hw.num_gpu_blocks == 0) {
    return InvalidArgument(
        src + ": model: " + model.name + " (" + std::string(DTypeName(mem.weight_dtype)) +
        ") does not fit on " + hw.gpu.name + " x" +
        std::to_string(hw.tensor_parallel * hw.pipeline_parallel) + ": short by " +
        Gib(p.memory.shortfall) + " per GPU (weights " + Gib(p.memory.weights) +
        " + activations " + Gib(p.memory.activations) + " + overhead " +
        Gib(p.memory.overhead) + " vs budget " + Gib(p.memory.budget) +
        " = " + std::to_string(hw.memory_utilization) + " x " + Gib(p.memory.total) +
        "); try more tensor_parallel, a smaller weight dtype or a larger GPU");
  }

  p.capacity.block_size = config.scheduler.block_size;
  p.capacity.num_gpu_blocks = static_cast<int32_t>(
      hw.num_gpu_blocks > 0 ? hw.num_gpu_blocks : p.memory.kv_blocks);
  p.capacity.bytes_per_block = static_cast<int64_t>(
      model.KvBytesPerToken(config.precision.kv_cache) * config.scheduler.block_size);
  p.kv_bytes_per_block_per_gpu = static_cast<int64_t>(
      KvBytesPerTokenPerGpu(model, config.precision.kv_cache, hw.tensor_parallel,
                            hw.pipeline_parallel) *
      config.scheduler.block_size);
  p.capacity.num_cpu_blocks = static_cast<int32_t>(
      std::floor(hw.swap_space_gib * kBytesPerGib / static_cast<double>(p.kv_bytes_per_block_per_gpu)));
  if (config.scheduler.preemption == PreemptionMode::kSwap) {
    if (hw.gpu.pcie_gbps <= 0) {
      return InvalidArgument(src + ": scheduler.preemption: swap needs hardware.gpu.pcie_gbps > 0");
    }
    p.swap_ns_per_block = static_cast<double>(p.kv_bytes_per_block_per_gpu) / hw.gpu.pcie_gbps;
  }

  int32_t max_model_len = model.max_position_embeddings;
  if (config.scheduler.max_model_len > 0) {
    if (config.scheduler.max_model_len > model.max_position_embeddings) {
      return InvalidArgument(src + ": scheduler.max_model_len: " +
                             std::to_string(config.scheduler.max_model_len) +
                             " exceeds the context window of " + model.name + " (" +
                             std::to_string(model.max_position_embeddings) + ")");
    }
    max_model_len = config.scheduler.max_model_len;
  }
  if (config.scheduler.max_num_batched_tokens < config.scheduler.max_num_seqs) {
    return InvalidArgument(src + ": scheduler.max_num_batched_tokens (" +
                           std::to_string(config.scheduler.max_num_batched_tokens) +
                           ") must be >= scheduler.max_num_seqs (" +
                           std::to_string(config.scheduler.max_num_seqs) +
                           "): every running request needs a token each step");
  }

  p.simulation.scheduler = config.scheduler;
  p.simulation.max_model_len = max_model_len;
  p.simulation.num_replicas = config.cluster.replicas;
  p.simulation.router = config.cluster.router;
  p.simulation.policy_context.seed = static_cast<uint64_t>(config.seed);
  for (const auto& c : config.workload.clients) {
    p.simulation.policy_context.clients.push_back(PolicyClient{c.name, c.priority, c.weight});
  }

  // Surface every construction error now, before anything runs or is written.
  if (auto policy = BuiltinPolicies().Make(config.scheduler.policy, p.simulation.policy_context);
      !policy.ok()) {
    return policy.status();
  }
  if (auto router = MakeRouter(config.cluster.router); !router.ok()) return router.status();
  if (auto cost = MakeCostModel(config.cost_model, p.deployment); !cost.ok()) return cost.status();
  if (auto workload = MakeWorkload(config.workload, static_cast<uint64_t>(config.seed));
      !workload.ok()) {
    return workload.status();
  }

  // Policies that size quanta by prefill time ask the cost model (a pure function).
  auto estimator = MakeCostModel(config.cost_model, p.deployment);
  std::shared_ptr<CostModel> shared_cost(std::move(estimator).value().release());
  p.simulation.policy_context.prefill_time_s = [shared_cost](int32_t tokens) {
    Request probe;
    probe.prompt_len = tokens;
    probe.target_output_len = 1;
    StepPlan plan;
    plan.seqs.push_back(ScheduledRequest{&probe, tokens, 0, true, false});
    plan.num_prefill_tokens = tokens;
    plan.num_emitting = 1;
    return ToSeconds(shared_cost->StepTime(plan));
  };

  MetricsOptions& m = p.metrics;
  m.run_name = config.name;
  for (const auto& c : config.workload.clients) m.client_names.push_back(c.name);
  m.slo_ttft_s = config.slo.ttft_ms * 1e-3;
  m.slo_tpot_s = config.slo.tpot_ms * 1e-3;
  m.slo_e2e_s = config.slo.e2e_ms * 1e-3;
  m.num_replicas = config.cluster.replicas;
  m.gpus_per_replica = hw.tensor_parallel * hw.pipeline_parallel;
  m.price_per_gpu_hour = hw.gpu.price_per_hour;
  m.kv_blocks_per_replica = p.capacity.num_gpu_blocks;
  // What one block copy moves over one GPU's PCIe link (the figure SimBackend times swaps
  // with): the shard of the GPU holding the most layers, KV heads replicated when TP
  // exceeds them. swap_bytes = blocks x this x GPUs per replica.
  m.kv_bytes_per_block_per_gpu = p.kv_bytes_per_block_per_gpu;
  for (const auto& c : config.workload.clients) m.client_weights.push_back(c.weight);
  // Service is counted in the units the VTC policy charges, when it runs (its registry has
  // already validated the values); otherwise VTC's defaults.
  if (config.scheduler.policy.name == "vtc") {
    for (const Param& param : config.scheduler.policy.params) {
      double value = 0;
      const char* end = param.value.data() + param.value.size();
      const auto [ptr, ec] = std::from_chars(param.value.data(), end, value);
      if (ec != std::errc() || ptr != end || !(value >= 0)) continue;
      if (param.key == "input_weight") m.service_input_weight = value;
      if (param.key == "output_weight") m.service_output_weight = value;
    }
  }
  return p;
}

BackendFactory MakeSimBackendFactory(const PreparedExperiment& experiment) {
  return [&experiment](int32_t) -> StatusOr<std::unique_ptr<Backend>> {
    auto cost = MakeCostModel(experiment.config.cost_model, experiment.deployment);
    if (!cost.ok()) return cost.status();
    return std::unique_ptr<Backend>(std::make_unique<SimBackend>(
        std::move(cost).value(), experiment.capacity, experiment.swap_ns_per_block));
  };
}

StatusOr<RunSummary> RunSimulation(
    const PreparedExperiment& experiment, const MetricsSinks& sinks,
    const std::function<void(const SimulationProgress&)>& on_progress) {
  auto workload = MakeWorkload(experiment.config.workload,
                               static_cast<uint64_t>(experiment.config.seed));
  if (!workload.ok()) return workload.status();
  MetricsCollector metrics(experiment.metrics, sinks);
  auto sim = Simulator::Create(experiment.simulation, std::move(workload).value(),
                               MakeSimBackendFactory(experiment), &metrics);
  if (!sim.ok()) return sim.status();
  SERVELAB_RETURN_IF_ERROR((*sim)->Run(on_progress));
  return metrics.Finish();
}

}  // namespace servelab
