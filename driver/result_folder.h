#pragma once
// One prepared experiment into one result folder: the part of `servelab run` that
// `sweep` and `compare` repeat for every point.
#include "core/status.h"
#include "driver/driver.h"
#include "driver/experiment.h"
#include "driver/metrics.h"

namespace servelab {

// Runs `experiment` on `backends`, writing into experiment.config.output.dir (created
// with its parents): requests.csv, clients.csv, steps.csv (if output.steps_csv),
// trace.json (if output.trace_json), summary.json (the run header, with the KV pool and
// context the backends reported, then the metrics), summary.md and config.resolved.yaml.
// Every file goes to a temporary and is renamed into place only when the whole run
// succeeded; an earlier run's optional files that this run does not produce are removed.
// `progress` draws a progress line on stderr; the caller decides (stderr is a terminal,
// one run at a time). Safe to call from several threads with different folders.
StatusOr<RunSummary> RunToFolder(PreparedExperiment& experiment, const BackendFactory& backends,
                                 bool progress);

}  // namespace servelab
