#pragma once
// One experiment into one result folder: the part of `servelab run` that `sweep` and
// `compare` repeat for every point.
#include <string>

#include "core/metrics.h"
#include "core/status.h"
#include "sim/experiment_config.h"

namespace servelab {

// Prepares and simulates `config`, writing into `dir` (created with its parents):
// requests.csv, clients.csv, steps.csv (if output.steps_csv), trace.json (if
// output.trace_json), summary.json, summary.md and config.resolved.yaml (which records
// output.dir = dir).
// Every file goes to a temporary and is renamed into place only when the whole run
// succeeded; an earlier run's optional files that this run does not produce are removed.
// `progress` draws a progress line on stderr; the caller decides (stderr is a terminal,
// one run at a time). Safe to call from several threads with different folders.
// Bad input (a model that does not fit, an unknown policy) is an InvalidArgument.
StatusOr<RunSummary> RunToFolder(const ExperimentConfig& config, const std::string& dir,
                                 bool progress);

}  // namespace servelab
