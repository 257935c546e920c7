#pragma once
// A Backend executes one iteration and reports how long it took: predicted by a cost
// model (simulator) or measured (engine). Backends own time; the scheduler owns mechanics.
#include <cstdint>
#include <string_view>

#include "core/step_plan.h"

namespace servelab {

struct KvCapacity {
  int32_t num_gpu_blocks = 0;  // device KV blocks
  int32_t block_size = 16;     // tokens per block
  int32_t num_cpu_blocks = 0;  // host swap space, in blocks
  int64_t bytes_per_block = 0;  // K and V, all layers of this replica's shard
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view Name() const = 0;
  virtual KvCapacity Capacity() const = 0;
  // REQUIRES: plan is not empty. Swap copies in the plan happen before its compute.
  virtual StepResult Execute(const StepPlan& plan) = 0;
  // The request finished (Scheduler::Commit returned it): per-request state the backend
  // keeps (the engine's token ids) can go. Default: nothing kept.
  virtual void OnRequestFinished(int64_t request_id) {}
};

}  // namespace servelab
