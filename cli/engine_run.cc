#include "cli/engine_run.h"

#include <cmath>
#include <filesystem>

#include "engine/cpu_model_runner.h"
#if SERVELAB_HAS_CUDA
#include "engine/cuda/cuda_model_runner.h"
#endif
#include "engine/engine_backend.h"
#include "engine/model_weights.h"
#include "engine/random_model.h"
#include "sim/workload.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;

// The engine's ModelConfig for the experiment's `model` architecture (random weights).
ModelConfig RandomModelConfig(const ExperimentConfig& config) {
  ModelConfig model;
  model.spec = config.model;
  model.spec.name = config.engine.model_path.empty()
                        ? config.model.name
                        : fs::path(config.engine.model_path).filename().string();
  model.family = config.model.attention_bias ? ModelFamily::kQwen2 : ModelFamily::kLlama;
  model.eos_token_ids = {config.model.vocab_size - 1};
  model.torch_dtype = DType::kBf16;
  return model;
}

// Writes a random-weight model for `spec` at `dir` when asked to and it is missing.
Status EnsureModel(const ExperimentConfig& config) {
  const EngineConfig& engine = config.engine;
  if (fs::exists(fs::path(engine.model_path) / "config.json")) return Status::Ok();
  if (!engine.create_model) {
    return NotFound(config.source_path + ": engine.model_path: " + engine.model_path +
                    " holds no config.json (set engine.create_model: true to write a "
                    "seeded random model there, run `servelab make-model`, or, on "
                    "device: cuda, set engine.weights: random)");
  }
  RandomModelOptions options;
  options.config = RandomModelConfig(config);
  options.seed = static_cast<uint64_t>(engine.model_seed);
  auto written = WriteRandomModel(options, engine.model_path);
  return written.ok() ? Status::Ok() : written.status();
}

// Host swap blocks for `swap_space_gib` at `bytes_per_element` per cached element.
int32_t SwapBlocks(const ExperimentConfig& config, const ModelSpec& spec, int bytes_per_element) {
  if (config.scheduler.preemption != PreemptionMode::kSwap) return 0;
  const double block_bytes = 2.0 * spec.num_hidden_layers * config.scheduler.block_size *
                             static_cast<double>(spec.KvDim()) * bytes_per_element;
  return static_cast<int32_t>(std::floor(config.hardware.swap_space_gib * (1 << 30) / block_bytes));
}

// Makes one runner per replica (each its own KV pool): CPU, or CUDA when built with it.
class RunnerMaker {
 public:
  static StatusOr<RunnerMaker> ForExperiment(const ExperimentConfig& config) {
    RunnerMaker maker;
    maker.device_ = config.engine.device;
    const bool random = config.engine.weights == EngineWeights::kRandom;
    if (random && maker.device_ != EngineDevice::kCuda) {
      return InvalidArgument(config.source_path + ": engine.weights: random needs "
                             "engine.device: cuda (for the cpu engine, engine.create_model "
                             "writes a seeded random checkpoint instead)");
    }
#if !SERVELAB_HAS_CUDA
    if (maker.device_ == EngineDevice::kCuda) {
      return InvalidArgument(config.source_path + ": engine.device: cuda, but this servelab "
                             "was built without CUDA (no nvcc when it was configured); use "
                             "device: cpu, or rebuild where /usr/local/cuda exists");
    }
#endif
    if (random) {
      maker.model_config_ = RandomModelConfig(config);
      SERVELAB_RETURN_IF_ERROR(ValidateModelConfig(maker.model_config_, config.source_path));
      maker.random_seed_ = static_cast<uint64_t>(config.engine.model_seed);
    } else if (maker.device_ == EngineDevice::kCuda) {
      // The CUDA runner reads the checkpoint itself, straight to the device.
      SERVELAB_RETURN_IF_ERROR(EnsureModel(config));
      auto model = LoadModelConfig(config.engine.model_path);
      if (!model.ok()) return model.status();
      maker.model_config_ = std::move(model).value();
      maker.checkpoint_ = config.engine.model_path;
    } else {
      SERVELAB_RETURN_IF_ERROR(EnsureModel(config));
      auto loaded = LoadModelWeights(config.engine.model_path);
      if (!loaded.ok()) return loaded.status();
      maker.weights_ = std::make_shared<const ModelWeights>(std::move(loaded).value());
      maker.model_config_ = maker.weights_->config;
    }
    const ModelSpec& spec = maker.model_config_.spec;
    maker.cpu_.block_size = config.scheduler.block_size;
    maker.cpu_.kv_cache_bytes = static_cast<int64_t>(config.engine.kv_cache_gib * (1 << 30));
    maker.cpu_.num_cpu_blocks = SwapBlocks(config, spec, 4);
#if SERVELAB_HAS_CUDA
    maker.cuda_.block_size = config.scheduler.block_size;
    maker.cuda_.memory_utilization = config.hardware.memory_utilization;
    maker.cuda_.swap_space_bytes = config.scheduler.preemption == PreemptionMode::kSwap
                                       ? static_cast<int64_t>(config.hardware.swap_space_gib * (1 << 30))
                                       : 0;
    maker.cuda_.max_num_seqs = config.scheduler.max_num_seqs;
    maker.cuda_.max_num_batched_tokens = config.scheduler.max_num_batched_tokens;
    maker.cuda_.cuda_graphs = config.engine.cuda_graphs;
#endif
    return maker;
  }

  const ModelConfig& Model() const { return model_config_; }

  StatusOr<std::unique_ptr<ModelRunner>> Make(int32_t max_model_len) const {
#if SERVELAB_HAS_CUDA
    if (device_ == EngineDevice::kCuda) {
      CudaRunnerOptions options = cuda_;
      options.max_model_len = max_model_len;
      auto runner = checkpoint_.empty()
                        ? CudaModelRunner::CreateRandom(model_config_, random_seed_, 0.02, options)
                        : CudaModelRunner::CreateFromCheckpoint(checkpoint_, options);
      if (!runner.ok()) return runner.status();
      return std::unique_ptr<ModelRunner>(std::move(runner).value());
    }
#endif
    auto runner = CpuModelRunner::Create(weights_, cpu_);
    if (!runner.ok()) return runner.status();
    return std::unique_ptr<ModelRunner>(std::move(runner).value());
  }

 private:
  EngineDevice device_ = EngineDevice::kCpu;
  ModelConfig model_config_;
  std::shared_ptr<const ModelWeights> weights_;  // cpu: the checkpoint, as float32
  std::string checkpoint_;  // cuda: the checkpoint folder; empty: random weights
  uint64_t random_seed_ = 0;
  CpuRunnerOptions cpu_;
#if SERVELAB_HAS_CUDA
  CudaRunnerOptions cuda_;
#endif
};

}  // namespace

StatusOr<RunSummary> RunEngine(const PreparedExperiment& experiment, const MetricsSinks& sinks,
                               const std::function<void(const SimulationProgress&)>& on_progress) {
  const ExperimentConfig& config = experiment.config;
  if (!config.has_engine) {
    return InvalidArgument(config.source_path + ": backend: engine needs an `engine` section "
                           "(engine.model_path at least)");
  }
  auto maker = RunnerMaker::ForExperiment(config);
  if (!maker.ok()) return maker.status();
  EngineBackendOptions backend_options;
  backend_options.seed = static_cast<uint64_t>(config.seed);
  backend_options.sampling.temperature = static_cast<float>(config.engine.sampling.temperature);
  backend_options.sampling.top_k = config.engine.sampling.top_k;
  backend_options.sampling.top_p = static_cast<float>(config.engine.sampling.top_p);
  backend_options.ignore_eos = config.engine.ignore_eos;

  SimulationOptions options = experiment.simulation;
  options.wall_clock = config.engine.clock == EngineClock::kWall;
  options.max_model_len =
      std::min(options.max_model_len, maker->Model().spec.max_position_embeddings);
  // The first replica's runner is made here, so its capacity (the KV blocks the device
  // memory holds) reaches the summary; the factory hands it to replica 0.
  auto first = maker->Make(options.max_model_len);
  if (!first.ok()) return first.status();
  std::unique_ptr<ModelRunner> first_runner = std::move(first).value();
  MetricsOptions metrics_options = experiment.metrics;
  metrics_options.kv_blocks_per_replica = first_runner->Capacity().num_gpu_blocks;

  std::vector<EngineBackend*> backends;
  BackendFactory factory = [&](int32_t) -> StatusOr<std::unique_ptr<Backend>> {
    std::unique_ptr<ModelRunner> runner = std::move(first_runner);
    if (runner == nullptr) {
      auto made = maker->Make(options.max_model_len);
      if (!made.ok()) return made.status();
      runner = std::move(made).value();
    }
    auto backend = std::make_unique<EngineBackend>(std::move(runner), backend_options);
    backends.push_back(backend.get());
    return std::unique_ptr<Backend>(std::move(backend));
  };
  auto workload = MakeWorkload(config.workload, static_cast<uint64_t>(config.seed));
  if (!workload.ok()) return workload.status();
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
