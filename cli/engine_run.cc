#include "cli/engine_run.h"

#include <cmath>
#include <filesystem>

#include "engine/cpu_model_runner.h"
#include "engine/engine_backend.h"
#include "engine/model_weights.h"
#include "engine/random_model.h"
#include "sim/workload.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;

// Writes a random-weight model for `spec` at `dir` when asked to and it is missing.
Status EnsureModel(const ExperimentConfig& config) {
  const EngineConfig& engine = config.engine;
  if (fs::exists(fs::path(engine.model_path) / "config.json")) return Status::Ok();
  if (!engine.create_model) {
    return NotFound(config.source_path + ": engine.model_path: " + engine.model_path +
                    " holds no config.json (set engine.create_model: true to write a "
                    "seeded random model there, or run `servelab make-model`)");
  }
  RandomModelOptions options;
  options.config.spec = config.model;
  options.config.spec.name = fs::path(engine.model_path).filename().string();
  options.config.family = config.model.attention_bias ? ModelFamily::kQwen2 : ModelFamily::kLlama;
  options.config.eos_token_ids = {config.model.vocab_size - 1};
  options.config.torch_dtype = DType::kBf16;
  options.seed = static_cast<uint64_t>(engine.model_seed);
  auto written = WriteRandomModel(options, engine.model_path);
  return written.ok() ? Status::Ok() : written.status();
}

}  // namespace

StatusOr<RunSummary> RunEngine(const PreparedExperiment& experiment, const MetricsSinks& sinks,
                               const std::function<void(const SimulationProgress&)>& on_progress) {
  const ExperimentConfig& config = experiment.config;
  if (!config.has_engine) {
    return InvalidArgument(config.source_path + ": backend: engine needs an `engine` section "
                           "(engine.model_path at least)");
  }
  if (config.engine.device == EngineDevice::kCuda) {
    return InvalidArgument(config.source_path + ": engine.device: cuda is not built into this "
                           "servelab yet; use device: cpu");
  }
  SERVELAB_RETURN_IF_ERROR(EnsureModel(config));
  auto loaded = LoadModelWeights(config.engine.model_path);
  if (!loaded.ok()) return loaded.status();
  auto weights = std::make_shared<const ModelWeights>(std::move(loaded).value());

  CpuRunnerOptions runner_options;
  runner_options.block_size = config.scheduler.block_size;
  runner_options.kv_cache_bytes = static_cast<int64_t>(config.engine.kv_cache_gib * (1 << 30));
  if (config.scheduler.preemption == PreemptionMode::kSwap) {
    const double block_bytes = 2.0 * weights->config.spec.num_hidden_layers *
                               config.scheduler.block_size * weights->config.spec.KvDim() * 4;
    runner_options.num_cpu_blocks = static_cast<int32_t>(
        std::floor(config.hardware.swap_space_gib * (1 << 30) / block_bytes));
  }
  EngineBackendOptions backend_options;
  backend_options.seed = static_cast<uint64_t>(config.seed);
  backend_options.sampling.temperature = static_cast<float>(config.engine.sampling.temperature);
  backend_options.sampling.top_k = config.engine.sampling.top_k;
  backend_options.sampling.top_p = static_cast<float>(config.engine.sampling.top_p);
  backend_options.ignore_eos = config.engine.ignore_eos;

  std::vector<EngineBackend*> backends;
  BackendFactory factory = [&](int32_t) -> StatusOr<std::unique_ptr<Backend>> {
    auto runner = CpuModelRunner::Create(weights, runner_options);
    if (!runner.ok()) return runner.status();
    auto backend = std::make_unique<EngineBackend>(std::move(runner).value(), backend_options);
    backends.push_back(backend.get());
    return std::unique_ptr<Backend>(std::move(backend));
  };

  SimulationOptions options = experiment.simulation;
  options.wall_clock = config.engine.clock == EngineClock::kWall;
  options.max_model_len =
      std::min(options.max_model_len, weights->config.spec.max_position_embeddings);
  MetricsOptions metrics_options = experiment.metrics;
  auto workload = MakeWorkload(config.workload, static_cast<uint64_t>(config.seed));
  if (!workload.ok()) return workload.status();
  auto probe = CpuModelRunner::Create(weights, runner_options);
  if (!probe.ok()) return probe.status();
  metrics_options.kv_blocks_per_replica = (*probe)->Capacity().num_gpu_blocks;
  probe->reset();
  MetricsCollector metrics(metrics_options, sinks);
  auto sim = Simulator::Create(options, std::move(workload).value(), factory, &metrics);
  if (!sim.ok()) return sim.status();
  SERVELAB_RETURN_IF_ERROR((*sim)->Run(on_progress));
  for (const EngineBackend* b : backends) {
    if (!b->error().ok()) return b->error();
  }
  return metrics.Finish();
}

StatusOr<RunSummary> RunBackend(const PreparedExperiment& experiment, const MetricsSinks& sinks,
                                const std::function<void(const SimulationProgress&)>& on_progress) {
  if (experiment.config.backend == BackendKind::kEngine) {
    return RunEngine(experiment, sinks, on_progress);
  }
  return RunSimulation(experiment, sinks, on_progress);
}

}  // namespace servelab
