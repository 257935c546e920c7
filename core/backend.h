#pragma once
// A Backend executes one iteration and reports how long it took: predicted by a cost
// model (simulator) or measured (engine). Backends own time and their own facts (the KV
// pool they hold, the context they serve); the scheduler owns mechanics.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/step_plan.h"
#include "core/time.h"

namespace servelab {

struct KvCapacity {
  int32_t num_gpu_blocks = 0;  // device KV blocks
  int32_t block_size = 16;     // tokens per block
  int32_t num_cpu_blocks = 0;  // host swap space, in blocks
  // Bytes of one block over the whole replica (K and V of every layer, each GPU its
  // shard, KV heads replicated by tensor parallelism counted on every GPU that holds
  // them): what one swap copy of a block moves between device and host memory.
  int64_t bytes_per_block = 0;
};

// A mixture of experts' routing in one step, the mean over its MoE layers: the distinct
// experts a layer ran, and of them those given one token x expert row (a runner that runs
// each expert on its own runs those as matrix-vector products).
struct ExpertsRun {
  double run = 0;
  double single_row = 0;
};

// A step run as a CUDA graph: servelab's CUDA runner replays a pure-decode step as the graph
// of its padded batch and context bucket (kernels/decode_graph_shape.h); the graph's rows
// (the step's sequences and the padding after them) and the context bucket it was
// launched for.
struct DecodeGraphRun {
  int32_t rows = 0;
  int32_t context_bucket = 0;
  bool operator==(const DecodeGraphRun&) const = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view Name() const = 0;  // "sim", "engine-cpu", "engine-cuda"
  // The KV pool this backend holds. Fixed for its lifetime.
  virtual KvCapacity Capacity() const = 0;
  // The longest prompt + output it serves: its model's context window, or the
  // experiment's lower scheduler.max_model_len. Fixed for its lifetime.
  virtual int32_t MaxModelLen() const = 0;
  // Runs one iteration. REQUIRES: plan is not empty. Swap copies in the plan happen
  // before its compute. An error (a CUDA failure, a runner fault) ends the run at this
  // step; result.elapsed >= 0 otherwise.
  virtual StatusOr<StepResult> Execute(const StepPlan& plan) = 0;
  // The request finished (Scheduler::Commit returned it): per-request state the backend
  // keeps (the engine's token ids) can go. Default: nothing kept.
  virtual void OnRequestFinished(int64_t request_id) {}
  // Predicted time to prefill `num_tokens` prompt tokens of one request alone, for
  // policies that size quanta by it (MLFQ). Empty when the backend cannot predict (the
  // engine measures; it does not predict).
  virtual std::optional<TimeNs> PredictPrefillTime(int32_t num_tokens) const {
    return std::nullopt;
  }
  // Decode runs (Scheduler::BeginDecodeRun): a backend that can tell the time of a run's
  // iterations without executing them says so here (the simulator; the engine computes,
  // so it cannot). Fixed for its lifetime.
  virtual bool PredictsDecodeRuns() const { return false; }
  // The run about to be advanced: `plan` is its first iteration. Iteration j is `plan`
  // with every seq's context j tokens longer.
  virtual void BeginDecodeRun(const StepPlan& plan) {}
  // Iteration j's time (j = 0, 1, ... in order), exactly what Execute() would report for
  // it; an error where Execute() would fail (the caller then steps, and Execute() says it).
  virtual StatusOr<TimeNs> DecodeRunStepTime(int32_t j) {
    return Internal("this backend does not predict decode runs");
  }
  // What the backend is made of, when its name does not say it all (the simulator's
  // calibrated cost model: which ops are fitted). Empty by default.
  virtual std::string Describe() const { return ""; }
  // A mixture of experts: the routing of `plan`, the step Execute() last ran, as the
  // engine counted it (a runner that counts) or as the simulator expects it (a cost model
  // that routes); none for a dense model or a backend that cannot say.
  virtual std::optional<ExpertsRun> Routing(const StepPlan& plan) const { return std::nullopt; }
  // The CUDA graph `plan`, the step Execute() last ran, ran as: the one the engine's runner
  // replayed, or the one the simulator's cost model prices it as; none when it ran op by op
  // (or the backend cannot say).
  virtual std::optional<DecodeGraphRun> DecodeGraph(const StepPlan& plan) const { return std::nullopt; }
  // Whether DecodeGraph says how each step ran (an engine, the simulator), or cannot say
  // (a recording made without it): only then is its "none" a step run op by op.
  virtual bool ReportsDecodeGraphs() const { return false; }
};

}  // namespace servelab
