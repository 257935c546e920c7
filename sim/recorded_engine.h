#pragma once
// An engine run that `servelab validate` recorded, played back as the engine: a cost
// model validated again, on another machine and without the device, against the very
// steps the engine measured.
//
// What a load's folder of a validation keeps is enough: on `clock: virtual` the engine's
// schedule follows from the requests and its step times alone (the scheduler is the
// simulator's; nothing else moves the clock), so the simulator run on the recorded times
// makes the engine's plans again, step for step, and the engine's end-to-end figures to
// the nanosecond (validate's replay, which matched every step of the H200 runs), but where
// a step copied swapped blocks alone (never recorded: the simulator's time). Each plan
// is checked against the recorded step (its new tokens, sequences and cached tokens); the
// first that differs ends the run with an error naming it: a recording of other requests,
// another policy, a wall clock's or a stop token's schedule.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/status.h"
#include "driver/experiment.h"

namespace servelab {

// One step of the recording: steps_compared.csv's row.
struct RecordedStep {
  int32_t tokens = 0;  // new tokens
  int32_t seqs = 0;
  int64_t context_tokens = 0;  // cached tokens, summed over its sequences
  TimeNs elapsed = 0;          // what the engine measured
  // The CUDA graph the engine replayed it as (graph_measured, "ROWSxCONTEXT_BUCKET"; empty:
  // op by op), when the recording has the column.
  std::optional<DecodeGraphRun> graph;
  int64_t line = 0;  // of the steps file, for messages
};

struct EngineRecording {
  std::string steps_path;  // for messages
  std::vector<RecordedStep> steps;
  bool graphs_recorded = false;  // steps_compared.csv has graph_measured
  int32_t num_gpu_blocks = 0;  // the engine's KV pool, blocks
  int32_t block_size = 0;      // tokens a block
  int32_t max_model_len = 0;   // the context it served
  std::string summary_path;    // the engine's summary.json, for messages
};

// A load's recording in `load_dir` (a validation's DIR/<load>): steps_compared.csv, and
// the engine's summary.json for its KV pool and context (engine/summary.json, or
// engine_summary.json beside the steps, as experiments/gpu/check.sh keeps them). Bad input
// (a file missing, not a regular file, a malformed row, an engine of more than one
// replica): InvalidArgument or NotFound naming the file, line and column.
StatusOr<EngineRecording> ReadEngineRecording(const std::string& load_dir);

// The recording as the engine of `config` (backend: engine, one replica, one pipeline
// stage, `engine.clock: virtual`, the recording's block size): each plan executed by the
// simulator of `config` on the recording's KV pool and context, its time the recorded
// step's once the plan is checked against it. Steps with no new tokens (swap copies alone;
// never recorded) take the simulator's time. Like the engine, it predicts no prefill and
// no decode run; it counts no MoE routing (the recording keeps none to replay); it says the
// CUDA graph each step ran as when the recording does (graphs_recorded). Its
// Execute fails with InvalidArgument, naming the steps file's line, at the first plan the
// recording does not have, or past its last step.
StatusOr<BackendFactory> MakeRecordedEngineFactory(const ExperimentConfig& config,
                                                   std::shared_ptr<const EngineRecording> recording);

}  // namespace servelab
