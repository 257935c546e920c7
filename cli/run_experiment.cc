#include "cli/run_experiment.h"

#include "driver/config_yaml.h"
#include "driver/result_folder.h"
#include "engine/engine_setup.h"
#include "sim/sim_backend.h"

namespace servelab {

StatusOr<BackendFactory> ChooseBackend(PreparedExperiment& experiment) {
  SERVELAB_RETURN_IF_ERROR(ResolveCostModel(experiment.config));
  if (experiment.config.backend == BackendKind::kEngine) {
    return MakeEngineBackendFactory(experiment.config);
  }
  return MakeSimBackendFactory(experiment.config);
}

Status CheckExperiment(const ExperimentConfig& config) {
  auto prepared = PrepareExperiment(config);
  if (!prepared.ok()) return prepared.status();
  auto backends = ChooseBackend(*prepared);
  return backends.ok() ? Status::Ok() : backends.status();
}

namespace {

// `config` with output.dir = `dir`, prepared, and its backend chosen (its cost model
// resolved): what a run into `dir` starts from.
struct Located {
  PreparedExperiment prepared;
  BackendFactory backends;
};
StatusOr<Located> Locate(const ExperimentConfig& config, const std::string& dir) {
  ExperimentConfig located = config;
  located.output.dir = dir;
  auto prepared = PrepareExperiment(located);
  if (!prepared.ok()) return prepared.status();
  auto backends = ChooseBackend(*prepared);
  if (!backends.ok()) return backends.status();
  return Located{std::move(prepared).value(), std::move(backends).value()};
}

}  // namespace

StatusOr<RunSummary> RunExperimentToFolder(const ExperimentConfig& config, const std::string& dir,
                                           bool progress) {
  auto run = Locate(config, dir);
  if (!run.ok()) return run.status();
  return RunToFolder(run->prepared, run->backends, progress);
}

StatusOr<std::string> ResolvedConfigOf(const ExperimentConfig& config, const std::string& dir) {
  auto run = Locate(config, dir);
  if (!run.ok()) return run.status();
  return EmitResolvedConfig(run->prepared.config);
}

StatusOr<RunSummary> RunExperimentInMemory(const ExperimentConfig& config) {
  auto prepared = PrepareExperiment(config);
  if (!prepared.ok()) return prepared.status();
  auto backends = ChooseBackend(*prepared);
  if (!backends.ok()) return backends.status();
  auto outcome = RunExperiment(*prepared, *backends, MetricsSinks{});
  if (!outcome.ok()) return outcome.status();
  return std::move(outcome->summary);
}

}  // namespace servelab
