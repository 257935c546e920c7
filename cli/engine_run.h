#pragma once
// `backend: engine`: the same experiment, the same scheduler and driver, with the real
// engine executing each step. The model comes from engine.model_path (written there
// first, with seeded random weights for the `model` architecture, when
// engine.create_model is set and the folder is missing). clock: virtual advances a
// virtual clock by each step's measured time (a reproducible schedule); clock: wall
// releases requests at their arrival times in real time.
#include <functional>

#include "core/metrics.h"
#include "core/status.h"
#include "sim/experiment.h"

namespace servelab {

StatusOr<RunSummary> RunEngine(const PreparedExperiment& experiment, const MetricsSinks& sinks,
                               const std::function<void(const SimulationProgress&)>& on_progress);

// Sim or engine, as experiment.config.backend says.
StatusOr<RunSummary> RunBackend(const PreparedExperiment& experiment, const MetricsSinks& sinks,
                                const std::function<void(const SimulationProgress&)>& on_progress);

}  // namespace servelab
