#include "driver/experiment.h"

#include <cstdlib>
#include <string>

#include "core/rng.h"
#include "policies/registry.h"

namespace servelab {

Status ExperimentConfig::Locate(const Status& status) const {
  static const std::vector<std::string> roots = [] {
    ExperimentConfig config;
    KeyNames names;
    config.VisitFields(names);
    return names.keys;
  }();
  return locations.Locate(status, roots);
}

Status CheckParallelism(const ModelSpec& model, const HardwareConfig& hw,
                        const std::string& prefix) {
  BoundsCheck bounds;
  HardwareConfig copy = hw;
  copy.VisitFields(bounds);
  if (!bounds.error.empty()) return InvalidArgument(prefix + bounds.error);
  if (model.num_attention_heads % hw.tensor_parallel != 0) {
    return InvalidArgument(prefix + "tensor_parallel: " + std::to_string(hw.tensor_parallel) +
                           " does not divide the " + std::to_string(model.num_attention_heads) +
                           " attention heads of " + model.name);
  }
  if (hw.expert_parallel > 1) {
    if (!model.IsMoe()) {
      return InvalidArgument(prefix + "expert_parallel: " + std::to_string(hw.expert_parallel) +
                             ", but " + model.name + " has no experts");
    }
    if (hw.expert_parallel != hw.tensor_parallel) {
      return InvalidArgument(prefix + "expert_parallel: " + std::to_string(hw.expert_parallel) +
                             " must equal tensor_parallel (" + std::to_string(hw.tensor_parallel) +
                             "): the experts spread over the GPUs that split attention");
    }
    if (model.num_experts % hw.expert_parallel != 0) {
      return InvalidArgument(prefix + "expert_parallel: " + std::to_string(hw.expert_parallel) +
                             " does not divide the " + std::to_string(model.num_experts) +
                             " experts of " + model.name);
    }
  }
  if (hw.pipeline_parallel > model.num_hidden_layers) {
    return InvalidArgument(prefix + "pipeline_parallel: " + std::to_string(hw.pipeline_parallel) +
                           " stages for " + std::to_string(model.num_hidden_layers) + " layers");
  }
  return Status::Ok();
}

int64_t ReplicateSeed(int64_t seed, int32_t r) {
  if (r == 0) return seed;
  constexpr uint64_t kReplicateStreams = uint64_t{1} << 40;  // past every RngStream
  const uint64_t derived = DeriveSeed(static_cast<uint64_t>(seed), kReplicateStreams + static_cast<uint64_t>(r));
  return static_cast<int64_t>(derived >> 1);
}

ExperimentConfig ReplicateOf(const ExperimentConfig& config, int32_t r) {
  ExperimentConfig replicate = config;
  replicate.seed = ReplicateSeed(config.seed, r);
  replicate.replicates = 1;
  return replicate;
}

StatusOr<PreparedExperiment> PrepareExperiment(const ExperimentConfig& config) {
  PreparedExperiment p;
  p.config = config;
  const ModelSpec& model = config.model;
  const HardwareConfig& hw = config.hardware;

  SERVELAB_RETURN_IF_ERROR(config.Locate(CheckParallelism(model, hw, "hardware.")));
  if (config.scheduler.max_num_batched_tokens < config.scheduler.max_num_seqs) {
    return InvalidArgument(config.Where("scheduler.max_num_batched_tokens") + " (" +
                           std::to_string(config.scheduler.max_num_batched_tokens) +
                           ") must be >= scheduler.max_num_seqs (" +
                           std::to_string(config.scheduler.max_num_seqs) +
                           "): every running request needs a token each step");
  }

  // Pipeline parallelism keeps pp batches in flight on the simulator (the engine runs
  // every layer on one device, one batch at a time).
  const bool pipelined = config.backend == BackendKind::kSim && hw.pipeline_parallel > 1;
  if (pipelined && config.scheduler.batching == Batching::kStatic) {
    return InvalidArgument(config.Where("scheduler.batching") +
                           ": static batching runs one batch at a time; pipeline_parallel " +
                           std::to_string(hw.pipeline_parallel) +
                           " keeps a batch in flight on each stage: use continuous batching");
  }
  DriverOptions& d = p.driver;
  d.scheduler = config.scheduler;
  d.scheduler.batches_in_flight = pipelined ? hw.pipeline_parallel : 1;
  d.num_replicas = config.cluster.replicas;
  // Outputs are identical either way: the switch exists to show it (tests, README).
  if (const char* runs = std::getenv("SERVELAB_DECODE_RUNS"); runs != nullptr && std::string(runs) == "0") {
    d.decode_runs = false;
  }
  d.router = config.cluster.router;
  d.policy_context.seed = static_cast<uint64_t>(config.seed);
  for (const auto& c : config.workload.clients) {
    d.policy_context.clients.push_back(PolicyClient{c.name, c.priority, c.weight});
  }

  // Surface every construction error now, before anything runs or is written. (A
  // one-block KV manager with the configured prefix cache stands in for the replicas'
  // for policies that order by it.)
  {
    const KvCacheManager probe_kv(1, config.scheduler.block_size, 0, 0,
                                  config.scheduler.PrefixCaching());
    PolicyContext probe = d.policy_context;
    probe.kv = &probe_kv;
    if (auto policy = BuiltinPolicies().Make(config.scheduler.policy, probe); !policy.ok()) {
      return config.Locate(policy.status());
    }
  }
  if (auto router = BuiltinRouters().Make(config.cluster.router); !router.ok()) {
    return config.Locate(router.status());
  }
  auto workload = MakeWorkload(config.workload, static_cast<uint64_t>(config.seed));
  if (!workload.ok()) return config.Locate(workload.status());
  p.workload = std::move(workload).value();

  MetricsOptions& m = d.metrics;
  m.sessions = !config.workload.has_trace && config.workload.has_sessions;
  m.run_name = config.name;
  for (const auto& c : config.workload.clients) {
    m.client_names.push_back(c.name);
    m.client_weights.push_back(c.weight);
  }
  m.slo_ttft_s = config.slo.ttft_ms * 1e-3;
  m.slo_tpot_s = config.slo.tpot_ms * 1e-3;
  m.slo_e2e_s = config.slo.e2e_ms * 1e-3;
  m.num_replicas = config.cluster.replicas;
  m.gpus_per_replica = hw.tensor_parallel * hw.pipeline_parallel;
  m.stages = d.scheduler.batches_in_flight;
  m.price_per_gpu_hour = hw.gpu.price_per_hour;
  return p;
}

StatusOr<int32_t> ServedContextLen(const ExperimentConfig& config, int32_t window,
                                   const std::string& model_name) {
  const int32_t limit = config.scheduler.max_model_len;
  if (limit == 0) return window;
  if (limit > window) {
    return InvalidArgument(config.Where("scheduler.max_model_len") + ": " +
                           std::to_string(limit) + " exceeds the context window of " +
                           model_name + " (" + std::to_string(window) + ")");
  }
  return limit;
}

std::unique_ptr<Clock> MakeClock(const ExperimentConfig& config) {
  if (config.backend == BackendKind::kEngine && config.engine.clock == EngineClock::kWall) {
    return std::make_unique<WallClock>();
  }
  return std::make_unique<VirtualClock>();
}

StatusOr<RunOutcome> RunExperiment(PreparedExperiment& experiment, const BackendFactory& backends,
                                   const MetricsSinks& sinks,
                                   const std::function<void(const DriverProgress&)>& on_progress) {
  SERVELAB_CHECK_MSG(experiment.workload != nullptr, "a prepared experiment runs once");
  std::unique_ptr<Clock> clock = MakeClock(experiment.config);
  auto driver = Driver::Create(experiment.driver, std::move(experiment.workload), backends,
                               RegistryPolicyMaker(BuiltinPolicies(),
                                                   experiment.config.scheduler.policy),
                               *clock, sinks);
  if (!driver.ok()) return driver.status();
  auto summary = (*driver)->Run(on_progress);
  if (!summary.ok()) return summary.status();
  return RunOutcome{std::move(summary).value(), (*driver)->Served()};
}

}  // namespace servelab
