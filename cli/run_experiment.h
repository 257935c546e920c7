#pragma once
// What `run`, `sweep` and `compare` do with one experiment: prepare it (driver), choose
// its backend (config.backend: the simulator's or the engine's), run it into a folder.
#include <string>

#include "core/status.h"
#include "driver/driver.h"
#include "driver/experiment.h"
#include "driver/metrics.h"

namespace servelab {

// The backend `experiment.config.backend` names. First checks the experiment's cost
// model and fills in its defaults (the resolved config lists them whichever backend
// runs). Cheap: nothing is read or built until the driver asks for a backend.
StatusOr<BackendFactory> ChooseBackend(PreparedExperiment& experiment);

// Everything but the run: bad input is reported here, before anything is written.
Status CheckExperiment(const ExperimentConfig& config);

// Prepares `config`, chooses its backend and runs it into `dir` (RunToFolder; the
// resolved config records output.dir = dir).
StatusOr<RunSummary> RunExperimentToFolder(const ExperimentConfig& config, const std::string& dir,
                                           bool progress);

// The config.resolved.yaml RunExperimentToFolder(config, dir) writes (the cost model's
// parameters resolved): how a resumed sweep knows a folder holds this very run.
StatusOr<std::string> ResolvedConfigOf(const ExperimentConfig& config, const std::string& dir);

// The same with no files: prepares `config`, chooses its backend and runs it in memory
// (a replicate whose files are not kept).
StatusOr<RunSummary> RunExperimentInMemory(const ExperimentConfig& config);

}  // namespace servelab
