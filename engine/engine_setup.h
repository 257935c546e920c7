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
#include "core/status.h"
#include "driver/driver.h"
#include "driver/experiment_config.h"

namespace servelab {

// Checks the engine section at once (what the options allow, without reading the
// model: sweeps check every point before any runs); the model is read, or written, when
// the driver asks for the first replica's backend, and shared by the others.
StatusOr<BackendFactory> MakeEngineBackendFactory(const ExperimentConfig& config);

}  // namespace servelab
