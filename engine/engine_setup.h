#pragma once
// `backend: engine`: the engine's own wiring. The same experiment, scheduler and driver
// as the simulator, with one EngineBackend per replica running each step through a real
// model runner (CPU reference, or CUDA when built with it), each replica its own KV pool.
//
// The model comes from engine.model_path (written there first, with seeded random
// weights for the `model` architecture, when engine.create_model is set and the folder
// is missing), or, on device: cuda with engine.weights: random, is generated on the
// device. The context served is the checkpoint's window (capped by a sliding window,
// which the runners do not implement), or scheduler.max_model_len when lower.
#include <memory>
#include <string>

#include "core/status.h"
#include "driver/driver.h"
#include "driver/experiment_config.h"
#include "engine/idle_runners.h"
#include "engine/model_config.h"
#include "engine/model_runner.h"
#include "engine/model_weights.h"

namespace servelab {

// The engine's model for an experiment, read (or written, or generated) once, and the
// runners made from it.
class EngineModel {
 public:
  // Errors: the engine section's options (InvalidArgument), a missing or malformed
  // model folder (NotFound, InvalidArgument naming file and key).
  static StatusOr<std::shared_ptr<EngineModel>> Load(const ExperimentConfig& config);

  const ModelConfig& Config() const { return model_config_; }
  int32_t MaxModelLen() const { return max_model_len_; }  // the context served
  // "cpu", or the experiment's GPU (hardware.gpu) for the CUDA runner: the device its
  // profiles are measured on.
  std::string Device() const;
  // A runner with its own KV pool, lent (engine/idle_runners.h): one this model, or a
  // copy of it by WithKvBlocks, made before and no one holds now, when its pool is the
  // one this model asks for; else a new one. It goes back to this model's idle runners
  // when destroyed. Errors: device set-up, memory.
  StatusOr<std::unique_ptr<ModelRunner>> MakeRunner() const;
  // The same model with its runners' KV pools of exactly `num_gpu_blocks` blocks
  // (hardware.num_gpu_blocks; what validate pins after its first engine run), sharing
  // the weights already read (the CPU engine's; a CUDA runner reads its own) and the
  // idle runners (a runner whose pool has that many blocks serves it again).
  std::shared_ptr<EngineModel> WithKvBlocks(int64_t num_gpu_blocks) const;
  // Runners made so far in this process, by every model (a runner lent again counts
  // once): what validate reports, so that a run on a runner of its own shows.
  static int64_t RunnersMadeInProcess();

 private:
  explicit EngineModel(ExperimentConfig config) : config_(std::move(config)) {}
  Status LoadModel();
  StatusOr<std::unique_ptr<ModelRunner>> NewRunner() const;

  ExperimentConfig config_;
  ModelConfig model_config_;
  std::shared_ptr<const ModelWeights> weights_;  // cpu: the checkpoint, as float32
  int32_t max_model_len_ = 0;
  std::shared_ptr<IdleRunners> idle_runners_ = IdleRunners::Create();
};

// Checks the engine section at once (what the options allow, without reading the
// model: sweeps check every point before any runs); the model is read, or written, when
// the driver asks for the first replica's backend, and shared by the others.
// `model`, when given, is the experiment's model already loaded (EngineModel::Load(config)),
// for the backends to run instead of reading it again.
StatusOr<BackendFactory> MakeEngineBackendFactory(const ExperimentConfig& config,
                                                  std::shared_ptr<EngineModel> model = nullptr);

}  // namespace servelab
