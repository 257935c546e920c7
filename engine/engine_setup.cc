#include "engine/engine_setup.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>

#include "driver/experiment.h"
#include "engine/cpu_model_runner.h"
#if SERVELAB_HAS_CUDA
#include "engine/cuda/cuda_model_runner.h"
#endif
#include "engine/engine_backend.h"
#include "engine/random_model.h"

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
  // The family whose checkpoint has this shape: Qwen2's for q/k/v biases, and for experts
  // Qwen2-MoE's (a shared expert, or biases) or Mixtral's (every expert as wide as the
  // MLP: intermediate_size takes the experts' width, and no dense layer is left to use
  // the old one).
  if (config.model.IsMoe()) {
    const bool qwen = config.model.shared_expert_intermediate_size > 0 ||
                      config.model.attention_bias;
    model.family = qwen ? ModelFamily::kQwen2Moe : ModelFamily::kMixtral;
    if (qwen) {
      model.spec.moe_intermediate_size = config.model.ExpertWidth();
      model.norm_topk_prob = false;
    } else {
      model.spec.intermediate_size = config.model.ExpertWidth();
      model.spec.moe_intermediate_size = 0;
    }
  } else {
    model.family = config.model.attention_bias ? ModelFamily::kQwen2 : ModelFamily::kLlama;
  }
  model.eos_token_ids = {config.model.vocab_size - 1};
  model.torch_dtype = DType::kBf16;
  return model;
}

// Writes a random-weight model for `spec` at `dir` when asked to and it is missing.
Status EnsureModel(const ExperimentConfig& config) {
  const EngineConfig& engine = config.engine;
  if (fs::exists(fs::path(engine.model_path) / "config.json")) return Status::Ok();
  if (!engine.create_model) {
    return NotFound(config.Where("engine.model_path") + ": " + engine.model_path +
                    " holds no config.json (set engine.create_model: true to write a "
                    "seeded random model there, run `servelab make-model`, or, on "
                    "device: cuda, set engine.weights: random)");
  }
  RandomModelOptions options;
  options.config = RandomModelConfig(config);
  options.seed = static_cast<uint64_t>(engine.model_seed);
  // Several runs may create the same model at once (the points of a sweep): each stages
  // its own copy and renames it in, config.json last (WriteRandomModelInto).
  auto written = WriteRandomModelInto(options, fs::path(engine.model_path));
  if (!written.ok()) {
    return Status(written.status().code(), config.Where("engine.model_path") + ": " + written.status().message());
  }
  return Status::Ok();
}

// Host memory for swapped-out KV blocks: hardware.swap_space_gib, when swap preemption
// may use it.
int64_t SwapSpaceBytes(const ExperimentConfig& config) {
  if (config.scheduler.preemption != PreemptionMode::kSwap) return 0;
  return static_cast<int64_t>(config.hardware.swap_space_gib * (1 << 30));
}

Status CheckEngineSection(const ExperimentConfig& config) {
  if (!config.has_engine) {
    return InvalidArgument(config.Where("backend") + ": engine needs an `engine` section "
                           "(engine.model_path at least)");
  }
  const EngineConfig& engine = config.engine;
  if (config.model.IsMoe() && engine.device == EngineDevice::kCuda) {
    return InvalidArgument(config.Where("engine.device") + ": " + config.model.name +
                           " is a mixture of experts, which the CUDA runner does not run yet; "
                           "use device: cpu (the simulator runs it on any GPU)");
  }
  if (config.model.IsMla() || config.model.first_k_dense_replace > 0) {
    return InvalidArgument(config.Where("model") + ": " + config.model.name +
                           " has latent attention or dense layers before its experts "
                           "(DeepSeek's); the engine runs Llama, Mistral, Qwen2, Mixtral and "
                           "Qwen2-MoE shapes (the simulator runs it)");
  }
  if (engine.weights == EngineWeights::kRandom && engine.device != EngineDevice::kCuda) {
    return InvalidArgument(config.Where("engine.weights") + ": random needs "
                           "engine.device: cuda (for the cpu engine, engine.create_model "
                           "writes a seeded random checkpoint instead)");
  }
  if (config.workload.has_sessions && config.workload.sessions.reuse_answers &&
      config.scheduler.PrefixCaching() != PrefixCacheType::kNone) {
    return InvalidArgument(config.Where("workload.sessions.reuse_answers") + ": the engine "
                           "cannot feed a turn the answer it sampled for the previous one, so "
                           "that answer's blocks must not be reused; set reuse_answers: false");
  }
#if !SERVELAB_HAS_CUDA
  if (engine.device == EngineDevice::kCuda) {
    return InvalidArgument(config.Where("engine.device") + ": cuda, but this servelab "
                           "was built without CUDA (no nvcc when it was configured); use "
                           "device: cpu, or rebuild where /usr/local/cuda exists");
  }
#endif
  return Status::Ok();
}

EngineBackendOptions BackendOptions(const ExperimentConfig& config) {
  EngineBackendOptions options;
  options.seed = static_cast<uint64_t>(config.seed);
  options.sampling.temperature = static_cast<float>(config.engine.sampling.temperature);
  options.sampling.top_k = config.engine.sampling.top_k;
  options.sampling.top_p = static_cast<float>(config.engine.sampling.top_p);
  options.ignore_eos = config.engine.ignore_eos;
  return options;
}

}  // namespace

StatusOr<std::shared_ptr<EngineModel>> EngineModel::Load(const ExperimentConfig& config) {
  SERVELAB_RETURN_IF_ERROR(CheckEngineSection(config));
  std::shared_ptr<EngineModel> model(new EngineModel(config));
  SERVELAB_RETURN_IF_ERROR(model->LoadModel());
  return model;
}

Status EngineModel::LoadModel() {
  const EngineConfig& engine = config_.engine;
  if (engine.weights == EngineWeights::kRandom) {
    model_config_ = RandomModelConfig(config_);
    SERVELAB_RETURN_IF_ERROR(ValidateModelConfig(model_config_, config_.source_path));
  } else if (engine.device == EngineDevice::kCuda) {
    // The CUDA runner reads the checkpoint itself, straight to the device.
    SERVELAB_RETURN_IF_ERROR(EnsureModel(config_));
    auto model = LoadModelConfig(engine.model_path);
    if (!model.ok()) return model.status();
    model_config_ = std::move(model).value();
  } else {
    SERVELAB_RETURN_IF_ERROR(EnsureModel(config_));
    auto loaded = LoadModelWeights(engine.model_path);
    if (!loaded.ok()) return loaded.status();
    weights_ = std::make_shared<const ModelWeights>(std::move(loaded).value());
    model_config_ = weights_->config;
  }
  auto context = ServedContextLen(config_, model_config_.ServedContextLen(),
                                  model_config_.spec.name);
  if (!context.ok()) return context.status();
  max_model_len_ = *context;
  return Status::Ok();
}

std::shared_ptr<EngineModel> EngineModel::WithKvBlocks(int64_t num_gpu_blocks) const {
  SERVELAB_CHECK(num_gpu_blocks >= 0);
  std::shared_ptr<EngineModel> model(new EngineModel(*this));
  model->config_.hardware.num_gpu_blocks = num_gpu_blocks;
  return model;
}

std::string EngineModel::Device() const {
  return config_.engine.device == EngineDevice::kCuda ? config_.hardware.gpu.name : "cpu";
}

namespace {
std::atomic<int64_t> runners_made{0};
}  // namespace

int64_t EngineModel::RunnersMadeInProcess() { return runners_made.load(); }

StatusOr<std::unique_ptr<ModelRunner>> EngineModel::MakeRunner() const {
  return idle_runners_->Lend(config_.hardware.num_gpu_blocks,
                             [this]() -> StatusOr<std::unique_ptr<ModelRunner>> {
                               auto runner = NewRunner();
                               if (runner.ok()) ++runners_made;
                               return runner;
                             });
}

StatusOr<std::unique_ptr<ModelRunner>> EngineModel::NewRunner() const {
  const EngineConfig& engine = config_.engine;
#if SERVELAB_HAS_CUDA
  if (engine.device == EngineDevice::kCuda) {
    CudaRunnerOptions options;
    options.block_size = config_.scheduler.block_size;
    options.memory_utilization = config_.hardware.memory_utilization;
    options.swap_space_bytes = SwapSpaceBytes(config_);
    options.max_num_seqs = config_.scheduler.max_num_seqs;
    options.max_num_batched_tokens = config_.scheduler.max_num_batched_tokens;
    options.max_model_len = max_model_len_;
    options.cuda_graphs = engine.cuda_graphs;
    // Set: exactly this many blocks (what validate pins after its first engine run, so
    // later runs do not size the pool by what the device has free at that moment).
    options.num_blocks = static_cast<int32_t>(config_.hardware.num_gpu_blocks);
    auto runner = engine.weights == EngineWeights::kRandom
                      ? CudaModelRunner::CreateRandom(model_config_,
                                                      static_cast<uint64_t>(engine.model_seed),
                                                      0.02, options)
                      : CudaModelRunner::CreateFromCheckpoint(engine.model_path, options);
    if (!runner.ok()) return runner.status();
    return std::unique_ptr<ModelRunner>(std::move(runner).value());
  }
#endif
  CpuRunnerOptions options;
  options.block_size = config_.scheduler.block_size;
  options.kv_cache_bytes = static_cast<int64_t>(engine.kv_cache_gib * (1 << 30));
  options.num_blocks = static_cast<int32_t>(config_.hardware.num_gpu_blocks);  // set: wins
  options.swap_space_bytes = SwapSpaceBytes(config_);
  auto runner = CpuModelRunner::Create(weights_, options);
  if (!runner.ok() && runner.status().IsBadInput()) {
    // What the runner refuses is the pool these settings size.
    return InvalidArgument(config_.Where(options.num_blocks > 0 ? "hardware.num_gpu_blocks"
                                                                : "engine.kv_cache_gib") +
                           ": " + runner.status().message());
  }
  if (!runner.ok()) return runner.status();
  return std::unique_ptr<ModelRunner>(std::move(runner).value());
}

StatusOr<BackendFactory> MakeEngineBackendFactory(const ExperimentConfig& config,
                                                  std::shared_ptr<EngineModel> model) {
  SERVELAB_RETURN_IF_ERROR(CheckEngineSection(config));
  struct Shared {
    ExperimentConfig config;
    EngineBackendOptions options;
    std::shared_ptr<EngineModel> model;  // given, or loaded for the first replica
  };
  auto shared = std::make_shared<Shared>(Shared{config, BackendOptions(config), std::move(model)});
  return BackendFactory([shared](int32_t) -> StatusOr<std::unique_ptr<Backend>> {
    if (shared->model == nullptr) {
      auto model = EngineModel::Load(shared->config);
      if (!model.ok()) return model.status();
      shared->model = std::move(model).value();
    }
    auto runner = shared->model->MakeRunner();
    if (!runner.ok()) return runner.status();
    auto backend = std::make_unique<EngineBackend>(std::move(runner).value(), shared->options,
                                                   shared->model->MaxModelLen());
    if (shared->config.engine.warmup) {
      const SchedulerConfig& scheduler = shared->config.scheduler;
      const Status warmed = backend->WarmUp(scheduler.max_num_batched_tokens, scheduler.max_num_seqs);
      if (!warmed.ok()) return Status(warmed.code(), "engine warm-up: " + warmed.message());
    }
    return std::unique_ptr<Backend>(std::move(backend));
  });
}

}  // namespace servelab
