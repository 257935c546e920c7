#pragma once
// From a parsed ExperimentConfig to a run, for any backend. PrepareExperiment validates
// what only makes sense across sections and does not depend on the backend (tensor
// parallelism divides the heads, the token budget covers max_num_seqs, the policy,
// router and workload can be built), builds the workload once, and fills the driver's
// options. What depends on the backend (KV capacity, the context served, the cost model)
// is the backend's: sim/sim_backend.h, engine/engine_setup.h.
//
// Nothing here touches the file system except reading the workload's inputs: the caller
// decides where outputs go (MetricsSinks); tests run everything in memory.
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "driver/clock.h"
#include "driver/driver.h"
#include "driver/experiment_config.h"
#include "driver/metrics.h"
#include "driver/workload.h"

namespace servelab {

struct PreparedExperiment {
  ExperimentConfig config;
  DriverOptions driver;
  std::unique_ptr<Workload> workload;  // made once from config.workload; a run consumes it
};

// The hardware's ranges (HardwareConfig's bounds, for values that did not come through
// the YAML parser) and how it splits the model: tensor_parallel divides the attention
// heads, pipeline_parallel <= layers. Messages start with `prefix` ("exp.yaml:
// hardware."). PrepareExperiment and `servelab memory` share it.
Status CheckParallelism(const ModelSpec& model, const HardwareConfig& hw, const std::string& prefix);

// The seed of replicate `r` of an experiment seeded `seed`: `seed` itself for r = 0 (so
// one replicate is the experiment as it always ran), else a seed derived from both,
// non-negative like every seed a config holds.
int64_t ReplicateSeed(int64_t seed, int32_t r);
// `config` as its replicate `r`: that seed, one replicate.
ExperimentConfig ReplicateOf(const ExperimentConfig& config, int32_t r);

// Bad input (an unknown policy, a broken trace, tp not dividing the heads) is an
// InvalidArgument naming file, line and key.
StatusOr<PreparedExperiment> PrepareExperiment(const ExperimentConfig& config);

// The context a backend serves: its model's `window` (the model's
// max_position_embeddings, or less when the backend cannot attend further), lowered to
// scheduler.max_model_len when that is set. InvalidArgument naming the key when
// scheduler.max_model_len asks for more than `window`.
StatusOr<int32_t> ServedContextLen(const ExperimentConfig& config, int32_t window,
                                   const std::string& model_name);

// The experiment's clock: wall for the engine with `engine.clock: wall`, else virtual.
std::unique_ptr<Clock> MakeClock(const ExperimentConfig& config);

struct RunOutcome {
  RunSummary summary;
  ServedFacts served;  // what the backends reported: KV pool, context served
};

// Runs `experiment` (consuming its workload) on `backends`, streaming into `sinks`.
StatusOr<RunOutcome> RunExperiment(PreparedExperiment& experiment, const BackendFactory& backends,
                                   const MetricsSinks& sinks,
                                   const std::function<void(const DriverProgress&)>& on_progress = {});

}  // namespace servelab
