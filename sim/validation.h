#pragma once
// Validating the simulator against the engine, the way BLIS and Vidur report fidelity:
// the same experiment (same seed, so the same requests, scheduler and policy) runs on
// the engine and on the simulator, and the simulator's errors are measured twice:
//
//   step time   on the engine's own step plans: each plan the engine executed is also
//               costed by the simulator's backend (its cost model plus its swap
//               copies), so scheduling differences cannot hide or create error;
//   end to end  TTFT, TPOT, ITL and E2E (mean, p50, p90, p99) and throughput of the
//               simulated run against the engine's, as relative errors
//               (simulated - measured) / measured.
//
// The simulated run gets the engine's KV pool (hardware.num_gpu_blocks = the runner's
// blocks) and the context it serves (scheduler.max_model_len), so both schedule over the
// same memory. For validation the engine should run on `engine.clock: virtual` (each
// step advances time by its measured duration): with `wall`, host time between steps
// (the driver, the scheduler) also passes, which the simulator does not model.
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/status.h"
#include "driver/driver.h"
#include "driver/experiment_config.h"
#include "driver/metrics.h"
#include "sim/calibration.h"
#include "sim/fit_evaluation.h"

namespace servelab {

// One step the engine executed: what it measured and what the simulator predicts.
struct StepComparison {
  int32_t tokens = 0;  // new tokens in the step
  int32_t seqs = 0;
  bool decode_only = false;  // every sequence brought one token
  double measured_s = 0, predicted_s = 0;
  // A mixture of experts whose engine counts its routing (Backend::Routing): what its MoE
  // layers ran, and what the simulator's cost model expects of the step.
  std::optional<ExpertsRun> experts_measured, experts_predicted;
  int64_t context_tokens = 0;  // the tokens already in its sequences' KV cache before it, summed
  // The CUDA graph the step ran as (Backend::DecodeGraph): as the engine's runner replayed
  // it, and as the simulator's cost model priced it; none: op by op. graphs_reported:
  // whether the engine says (a recording made without it does not).
  std::optional<DecodeGraphRun> graph_measured = std::nullopt, graph_predicted = std::nullopt;
  bool graphs_reported = true;
  // Static batching's padding sequences in the step: the engine's runner computes nothing
  // for them, the simulator prices each as a sequence of one token.
  int32_t padding = 0;
  // Its place in the streak of decode-only steps since the last step with a prefill chunk
  // (StepPlan::steps_since_prefill; 0: a step with one).
  int32_t after_prefill = 0;
};

// How a run's steps ran as CUDA graphs, the engine's against the simulator's pricing
// (StepComparison::graph_measured, graph_predicted): the steps the engine replayed as a
// graph, and of them those the simulator priced as the same graph (rows and context
// bucket), as another graph, or as run op by op; the steps the simulator priced as a graph
// that the engine ran op by op; the first step where the two differ, said. Any(): a step
// of either ran as a graph (a CUDA engine with decode graphs, or a model fitted on one).
// Left out: steps whose engine does not say how it ran them (graphs_reported false; counted
// in unreported when the simulator priced them as a graph), and steps with static
// batching's padding (counted in padded), which the two run differently whatever the
// graphs (StepComparison::padding).
struct GraphAgreement {
  int64_t engine_graphs = 0, same = 0, other_graph = 0, priced_eager = 0, sim_only = 0;
  int64_t priced_graphs = 0;     // compared steps the simulator priced as a graph
  int64_t unreported = 0;        // steps priced as a graph whose engine did not say
  int64_t padded = 0;            // steps with padding, left out
  std::string first_difference;  // "" when none
  bool Any() const { return engine_graphs > 0 || priced_graphs > 0; }
};
GraphAgreement GraphAgreementOf(std::span<const StepComparison> steps);

// Which of a run's steps a figure is over: every step, the decode-only ones (every
// sequence brought one token), or the others (a prefill chunk in them).
enum class StepKind { kAll, kDecodeOnly, kMixed };

// A step's place among a run's kinds of step: decode-only steps by their batch's range
// (1, 2, 3-4, 5-8, ...: `top` the range's top, a power of two; `name` "decode_1",
// "decode_3-4"), or the steps with a prefill chunk (top 0, "mixed").
struct StepRange {
  int64_t top = 0;
  std::string name;
};
StepRange StepRangeOf(const StepComparison& step);

// The step-time error over each kind of step of a run (StepRangeOf: decode ranges in
// order, then the mixed steps), with their mean measured and predicted times: a cost
// model's residual by configuration. On this project's VM the memory-bound kinds
// (one-sequence decodes: every weight streamed by a matrix-vector product) move with the
// host's memory bandwidth while the others hold.
struct StepRangeError {
  int64_t top = 0;  // StepRange::top
  std::string steps;
  ErrorStats error;
  double measured_s = 0, predicted_s = 0;
};
std::vector<StepRangeError> StepErrorsByRange(std::span<const StepComparison> steps);
// The decode-only steps' error by their place after the last step with a prefill chunk
// (StepComparison::after_prefill): k = 1, 2, 3, 4-7, 8-15, 16 and later (top: the range's
// last k, 0 for the last range), in that order, those with steps. A model that prices
// every decode as settled is fast on the first few (sim/after_prefill.h).
std::vector<StepRangeError> DecodeErrorsAfterPrefill(std::span<const StepComparison> steps);

struct MetricComparison {
  std::string metric;     // ttft, tpot, itl, e2e, output_throughput, request_throughput
  std::string statistic;  // mean, p50, p90, p99 (throughputs: value)
  double engine = 0, sim = 0;  // seconds (throughputs: per second)
  double error_pct = 0;        // (sim - engine) / engine x 100; 0 when both are 0, +inf
                               // when only the engine's is (CSV "inf", markdown "+inf")
};

// A host check: a few fixed steps of the engine (engine/profiler.h, HostCheckPoints),
// timed as the profile times its rows, right before and right after a load's run. A
// run's steps are compared with a cost model fitted earlier; when the host itself changes
// speed (a shared machine's neighbours, its clocks), that shows up as the model's error.
// The same steps timed before and after say whether the host drifted during the run, and
// the simulator's error on them how far the host then was from the one the model was
// fitted on (on a profiled shape they are, or are near, profiled steps, timed in passes
// as the profile's rows are, though after other neighbours).
struct ReferenceStep {
  bool decode = false;
  int32_t tokens = 0;   // a decode: its sequences; a prefill: its chunk
  int32_t context = 0;  // cached tokens per sequence
  double before_s = 0, after_s = 0;  // the engine's medians
  double predicted_s = 0;            // the simulator's time for the step

  // "decode-16@255" (16 sequences at context 255), "prefill-128@0" (a chunk of 128 tokens
  // after 0 cached).
  std::string Label() const;
};

struct HostCheck {
  std::vector<ReferenceStep> steps;  // empty: not checked

  // Summed over the steps, in seconds.
  double Before() const;
  double After() const;
  double Predicted() const;
  // The mean over the steps of (after - before) / before, percent (each step weighs the
  // same: a decode's few milliseconds as much as a chunk's tens); 0 without steps.
  double DriftPct() const;
  // The largest |after - before| / before over the steps, percent; 0 without steps.
  double MaxDriftPct() const;
  // The mean over the steps of (predicted - measured) / measured, before or after the
  // run, percent; 0 without steps.
  double ErrorPct(bool after) const;
  // True when some step changed by more than max_drift_pct (MaxDriftPct): a step that
  // slowed and one that sped up do not cancel.
  bool Drifted(double max_drift_pct) const;
};

// How the decode-only steps' errors move through a run, in step order. Neighbouring steps
// share their configuration (a decode's batch, its context one longer), so any error that
// follows the configuration makes them alike too: the autocorrelation alone does not tell
// the host from the model. The stretches do: on a steady workload each stretch of the run
// mixes the same configurations, so a model's error is much the same from one to the
// next, while a host that changes speed during the run (memory-bound decodes are the
// first to show it) parts their means.
struct ErrorWander {
  int32_t window = 100;  // decode-only steps a stretch
  int32_t windows = 0;   // whole stretches (0: fewer than `window` decode-only steps)
  // The lag-one autocorrelation of consecutive decode-only steps' errors (mixed steps in
  // between skipped); 0 with fewer than three, or when they are alike to within 0.01%
  // (standard deviation: the steps' rounding, not wander).
  double autocorrelation = 0;
  // The lowest and highest mean error over consecutive stretches of `window`, percent (a
  // last, partial stretch left out); 0 without a whole one.
  double window_min_pct = 0, window_max_pct = 0;

  // window_max_pct - window_min_pct, percentage points: how far apart the stretches'
  // means lie; 0 with fewer than two whole stretches (one cannot wander from itself).
  double SpreadPct() const { return windows > 1 ? window_max_pct - window_min_pct : 0; }
  // True when the stretches' means span more than max_spread_pct points (SpreadPct).
  bool Wandered(double max_spread_pct) const { return SpreadPct() > max_spread_pct; }

  // Of relative errors (predicted - measured) / measured, as fractions, in step order; a
  // window below 1 counts as 1.
  static ErrorWander Of(std::span<const double> relative_errors, int32_t window = 100);
};

// The simulated run again on the engine's own step times (`ValidateLoad`): each step takes
// the time the engine measured for the same step (the same requests with the same tokens
// and contexts, the same swap copies, in the same order, per replica); everything else is
// the simulator's (its swaps, its prefill predictions for the policies that ask, and no
// stop tokens: it does not sample). On `clock: virtual`, while the schedules stay one,
// every step also starts when the engine's did, so the figures are the engine's to the
// nanosecond and the simulated run's end-to-end error is wholly its cost model's step
// times. A step of the same work starting at another time is counted (`shifted`): on
// `clock: wall`, the host's time between steps, which the simulator does not have. Where
// the schedules part, at the step `parted` names, the rest runs on the simulator's own
// times, and the figures mix the two: a request the engine stopped on a stop token
// (engine.ignore_eos: false), a wall clock's shifts that changed a batch, a policy that
// schedules by predictions the engine cannot make.
struct StepReplay {
  int64_t steps = 0;     // the engine's steps, every replica's (swap-only ones too)
  int64_t replayed = 0;  // the replay's own steps
  int64_t matched = 0;   // of them, replayed as the engine's before the schedules parted
  int64_t shifted = 0;   // of the matched, those that started at another time than the engine's
  double largest_shift_s = 0;  // the largest such difference, seconds
  std::string parted;   // where the schedules parted and how; empty when they never did
  RunSummary summary;
  std::vector<MetricComparison> metrics;  // CompareRuns(engine, this run)

  // The engine's schedule step for step, each step starting when the engine's did.
  bool Identical() const { return parted.empty() && shifted == 0; }
  // validation.md's account: "one", "the same work, 12 steps started at other times (up
  // to 0.140 ms)", or "parted: <parted>".
  std::string Account() const;
  // The end-to-end figure whose error is largest in magnitude, that signed error in
  // percent; 0 without figures.
  double LargestErrorPct() const;
};

struct LoadValidation {
  std::string label;  // the sweep point's folder name
  RunSummary engine, sim;
  std::vector<StepComparison> steps;
  ErrorStats step_error, decode_step_error, mixed_step_error;  // percent
  ErrorWander decode_wander;
  std::vector<MetricComparison> metrics;
  std::string sim_cost_model;  // what the simulated backend describes itself as
  // The recording the engine was played back from (validate --recorded), else empty.
  std::string recorded_from;
  ExperimentConfig sim_config;  // the simulated run's experiment (SimulatedTwin)
  std::optional<StepReplay> replay;  // a first run's (ValidateLoad); none for reruns
  HostCheck host;
  // The runs of the load this one is the last of: `servelab validate --retries` runs a
  // load again when its host check drifted or its decode errors wandered (ErrorWander),
  // and keeps the last.
  int32_t attempts = 1;
  // The engine's runs of one load (`servelab validate --engine-runs`): the first is
  // validated as above; each further one, right after it, is a LoadValidation of its own
  // in `reruns` (run 2, 3, ...: its engine, its steps costed by the simulator, its errors
  // against the first's simulated run, no host check) with `run_to_run`, its engine's
  // figures against the first run's, (this - first) / first: how far the engine moves
  // from run to run on the same requests, the floor under any simulator's error.
  int32_t run = 1;
  std::vector<MetricComparison> run_to_run;  // CompareRuns(first's engine, this engine)
  std::vector<LoadValidation> reruns;

  // The simulated run against the mean of the engine's runs' figures (this run's and its
  // reruns'): with the host's run-to-run noise averaged down, the better estimate of the
  // simulator's own error. `metrics` itself without reruns.
  std::vector<MetricComparison> AgainstEngineMean() const;

  // The error of `metric` at `statistic` (CompareRuns' names); NaN when absent.
  double ErrorPct(const std::string& metric, const std::string& statistic) const;

  // Over the steps of `kind` with a measured time: their mean measured (or predicted)
  // time, seconds; and their summed predicted time against their summed measured time,
  // percent (what the end-to-end figures move with: a step weighs by its length). 0 with
  // none.
  double MeanStepS(StepKind kind, bool predicted) const;
  double TimeErrorPct(StepKind kind) const;

  // The decode-only steps' ErrorWander over stretches of `window` steps (decode_wander's
  // is 100).
  ErrorWander DecodeWander(int32_t window) const;
};

// (to - from) / from, a fraction; 0 when `from` is not positive.
double RelativeChange(double from, double to);

// The simulator's experiment for `engine_config`: backend sim, with the engine's KV pool
// and served context.
ExperimentConfig SimulatedTwin(const ExperimentConfig& engine_config, const KvCapacity& capacity,
                               int32_t max_model_len);

// Runs `config` on `engine` (one Backend per replica; the real engine's factory, or a
// test's) into dir/engine, on the simulator into dir/sim, and on the simulator with the
// engine's step times (StepReplay) into dir/replay, and compares them.
// Errors: the runs' (bad input is caught before anything runs).
StatusOr<LoadValidation> ValidateLoad(const ExperimentConfig& config, const BackendFactory& engine,
                                      const std::string& dir, bool progress);

// The folder of a load's engine run `run` (2, 3, ...) in the load's folder: "run-2".
std::string RerunFolder(int32_t run);

// The engine's run `run` (2, 3, ...) of the load `first` validated: `config` on `engine`
// again, into dir/engine, its steps costed as ValidateLoad's, compared end to end with
// `first`'s simulated run (the same requests on the same pool: the simulator's run would
// be the same to the byte), and run_to_run set; labelled "<first's label>/run-K"
// (RerunFolder). Errors: the run's; Internal when the engine's KV pool or context
// differs from the first run's.
StatusOr<LoadValidation> ValidateLoadAgain(const ExperimentConfig& config, const BackendFactory& engine,
                                           const std::string& dir, const LoadValidation& first,
                                           int32_t run, bool progress);

// Each step's predicted_s: its time on a fresh backend of `sim_config` (the simulator's
// cost model, as on the run's step plans). Errors: the backend's.
Status PredictReferenceSteps(const ExperimentConfig& sim_config, std::vector<ReferenceStep>& steps);

// Relative errors of the two runs' latency distributions and throughputs.
std::vector<MetricComparison> CompareRuns(const RunSummary& engine, const RunSummary& sim);

}  // namespace servelab
