#pragma once
// From a parsed ExperimentConfig to a runnable simulation: derives the deployment, the
// KV capacity from the memory formula, the effective context window; validates what
// only makes sense across sections (the model fits, TP divides the heads, the policy,
// router, cost model and workload can be built); then runs it.
//
// Nothing here touches the file system except reading the workload's inputs: the CLI
// decides where outputs go (MetricsSinks), tests run everything in memory.
#include <functional>

#include "core/backend.h"
#include "core/metrics.h"
#include "core/status.h"
#include "sim/cost_model.h"
#include "sim/experiment_config.h"
#include "sim/memory.h"
#include "sim/simulator.h"

namespace servelab {

struct PreparedExperiment {
  ExperimentConfig config;
  DeploymentSpec deployment;
  MemoryEstimate memory;      // per GPU of one replica
  KvCapacity capacity;        // per replica
  int64_t kv_bytes_per_block_per_gpu = 0;  // one GPU's shard of a block
  double swap_ns_per_block = 0;  // one block's shard over one GPU's PCIe link
  SimulationOptions simulation;
  MetricsOptions metrics;
};

// Bad input (a model that does not fit, an unknown policy, a broken trace) is an
// InvalidArgument naming the key.
StatusOr<PreparedExperiment> PrepareExperiment(const ExperimentConfig& config);

// One SimBackend per replica, each with its own cost model.
BackendFactory MakeSimBackendFactory(const PreparedExperiment& experiment);

// Runs the experiment on the simulator, streaming outputs into `sinks`.
StatusOr<RunSummary> RunSimulation(
    const PreparedExperiment& experiment, const MetricsSinks& sinks,
    const std::function<void(const SimulationProgress&)>& on_progress = {});

}  // namespace servelab
