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

StatusOr<RunSummary> RunExperimentToFolder(const ExperimentConfig& config, const std::string& dir,
                                           bool progress) {
  ExperimentConfig located = config;
  located.output.dir = dir;
  auto prepared = PrepareExperiment(located);
  if (!prepared.ok()) return prepared.status();
  auto backends = ChooseBackend(*prepared);
  if (!backends.ok()) return backends.status();
  return RunToFolder(*prepared, *backends, progress);
}

StatusOr<std::string> ResolvedConfigOf(const ExperimentConfig& config, const std::string& dir) {
  ExperimentConfig located = config;
  located.output.dir = dir;
  auto prepared = PrepareExperiment(located);
  if (!prepared.ok()) return prepared.status();
  auto backends = ChooseBackend(*prepared);
  if (!backends.ok()) return backends.status();
  return EmitResolvedConfig(prepared->config);
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
