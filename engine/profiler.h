#pragma once
// `servelab profile`: the engine's runner timed over a grid of steps the scheduler
// produces, per op (when the runner times its ops: the CPU runner does) and per whole
// step (the runner's forward pass and the sampling of its rows), as profile rows
// (driver/profile_table.h) that `servelab calibrate` fits.
//
// The grid:
//   prefill  one sequence's chunk of T tokens after C cached ones: T from 1 to
//            max_tokens (powers of two and the halves between), C in 0, 128, 512, 2048,
//            ... with C + T <= max_context;
//   decode   B sequences of one new token after C cached ones each: B from 1 to
//            max_batch (likewise), C in 15, 63, 255, 1023, ... < max_context;
// skipping what the runner's KV pool cannot hold. Each configuration first runs
// unmeasured for `warmup` runs and `warmup_ms`: after a large step the host's caches and
// clocks take milliseconds to settle (with 2 runs, the CPU runner's one-sequence decodes
// measured 10-20% slower than inside a run; with 25 ms, as fast). Then `repeats` passes
// over the whole grid in grid order (`interleave`, the default), so each median spans the
// whole profile and the host's drift is in every row alike; or each configuration's
// runs back to back, as Vidur profiles. On the shared 2-core VM of 2026-12-02, two
// profiles of one model minutes apart differed by 11.6-18.6% a row back to back and
// by 3.6-7.6% in passes (whole steps: 10-16% against 0.9-4.3%), once each pair's
// common shift (up to 11%: the host's speed that hour) was taken out. (Timing each step
// after a random other one instead, the 11M-parameter model, whose weights fit the CPU's
// L3, measured one-sequence decodes at 0.6-0.86 ms against 0.39-0.61 ms in runs; grid
// order puts a step after its neighbour in the grid.) In a pass each measured run comes
// right after about `settle_ms` of its own configuration back to back: after any change
// of step (a prefill chunk, arithmetic, even sleep) this host ran the next one-sequence
// decodes 17-48% slower, settling within 4-8 of them (8-15 ms), as a serving run's streak
// of decodes does (2026-12-03). An earlier try, a warm-up of the whole configuration
// right before each measured run, on a host whose memory-bound steps then ran at one of
// two speeds, did not bring the 62 MB model's one-sequence decodes to a serving run's.
// After each pass over the grid, decodes timed one by one right after a prefill chunk
// (ProfileOptions::after_prefill_steps), each decode's k-th as a kStepAfterPrefill row.
// Then, in passes over the grid, each measured run's times are divided by the host's speed
// around it, from its neighbours in time (ProfileOptions::drift_window, core/host_drift.h):
// on this VM the host slowed by 25-30% for seconds at a time on every step alike, and a
// profile's rows then spread by a median of 8-12% (4.5 minutes) to 8-32% (8 minutes);
// taken out, 3.2-4.5% and 3.0-8.1%, and the medians of odd and even passes agreed 1.5 to
// 3 times closer (2026-12-05).
// A row gives the median, p10 and p90 of the repeats (numpy's linear percentiles), per
// layer for per-layer ops (the step's total over its layers, divided by them), per step
// otherwise. A whole step's row also says how the runner ran it: the CUDA graph it replayed
// (ModelRunner::LastDecodeGraph: its rows and context bucket, under the runner's
// max_num_seqs and context served) or none (0 and 0: op by op, as every op row).
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "driver/experiment_config.h"
#include "driver/profile_table.h"

namespace servelab {

class EngineModel;  // engine/engine_setup.h

// One configuration of the grid: a prefill chunk of `tokens` tokens of one sequence, or
// a decode of `tokens` sequences, after `context` cached tokens each.
struct ProfilePoint {
  bool decode = false;
  int32_t tokens = 0;
  int32_t context = 0;
};

struct ProfileOptions {
  int32_t warmup = 2;         // unmeasured runs per configuration, at least
  double warmup_ms = 25;      // and at least this long
  int32_t repeats = 7;
  int32_t max_tokens = 0;   // 0: scheduler.max_num_batched_tokens
  int32_t max_batch = 0;    // 0: scheduler.max_num_seqs
  int32_t max_context = 0;  // 0: the context the engine serves
  // true: each configuration's warm-up runs back to back, then `repeats` passes over the
  // whole grid in grid order; false: each configuration's runs back to back.
  bool interleave = true;
  // In passes (interleave), before each measured run the configuration runs back to back
  // for about this long: as many whole runs as fit by its previous run's time, none for a
  // step longer than this. A host (its clocks, caches, power state) takes milliseconds to
  // settle after a step of another size; a serving run's streak of small steps runs in the
  // settled state, which a run right after its grid neighbour does not.
  double settle_ms = 20;
  // Non-empty: these configurations, in this order, instead of the grid (each within the
  // experiment's limits and its KV pool, or InvalidArgument).
  std::vector<ProfilePoint> points;
  // True (and no points): the experiment's HostCheckPoints instead of the grid, a decode's
  // batch halved until the KV pool holds it.
  bool host_check = false;
  // In passes over the full grid (no points, no host check): after each pass, decodes of
  // 1, 4 and max_batch sequences at the host check's one-sequence context, each settled,
  // then the grid's largest prefill chunk from position 0 of at most the host check's
  // tokens (min(128, max_tokens, max_context)), then this many of the decode back to back,
  // each timed: kStepAfterPrefill rows, k = 1 ... this (the first decodes after a
  // compute-bound step run slower than settled ones: sim/after_prefill.h). 0: none; else
  // at least kMinAfterPrefillSteps (FitAfterPrefill's least).
  int32_t after_prefill_steps = 12;
  // In passes over the full grid (no points, no host check): each measured run's times
  // divided by the host's speed around it, HostSpeed (core/host_drift.h) over the measured
  // runs in the order they ran, this many in a window; 0: kept as measured. On the shared
  // 2-core VM the host's speed moves by up to 25-30% in episodes of a fraction of a second
  // to tens of seconds, on every step alike; a row's repeats fall in different episodes.
  int32_t drift_window = 9;
  // Each step's sequences' KV blocks interleaved, block after block, as sequences that grew
  // together got theirs in a serving run (UniformStep's interleave_blocks); else each
  // sequence's blocks in a row.
  bool interleave_blocks = false;
  // Called after each measured run with (done, total) measured runs.
  std::function<void(int64_t, int64_t)> on_progress;
  // Called before each measured run of the grid with its experiment's index
  // (ProfileEngines) and its configuration: the profile's order (not for the decodes timed
  // after a prefill chunk, after_prefill_steps).
  std::function<void(size_t, const ProfilePoint&)> on_measure;
};

// ProfileOptions' ranges: warm-up runs and repeats per configuration, milliseconds of
// warm-up and settling (a minute at most), sizes >= 0 (ProfileEngine also holds them to
// the experiment's scheduler limits).
inline constexpr int32_t kMaxProfileWarmup = 1'000'000;
inline constexpr int32_t kMaxProfileRepeats = 100'000;
inline constexpr double kMaxProfileMs = 60'000;
// Experiments profiled together (ProfileEngines: every model loaded at once).
inline constexpr int32_t kMaxProfileExperiments = 16;
// ProfileOptions::after_prefill_steps, when not 0: at least this many.
inline constexpr int32_t kMinAfterPrefillSteps = 3;
// ProfileOptions::drift_window, when not 0: at least this many (the run and one each side).
inline constexpr int32_t kMinDriftWindow = 3;
// InvalidArgument naming the command-line flag of the first option out of its range.
Status CheckProfileOptions(const ProfileOptions& options);

// The steps `servelab validate` times before and after each load to see whether the
// host changed speed during it (sim/validation.h, HostCheck): a compute-bound step, a
// memory-bound one and one between, in this order: a prefill chunk of
// min(128, max_tokens) tokens from position 0, a decode of max_batch sequences at
// context 255, and a decode of one sequence at context 63 (so that, in passes, the
// one-sequence decode follows a decode, as it does in the grid). Contexts are the grid's
// decode contexts (63 and 255, or the largest below them that max_context leaves, or
// max_context - 1), the chunk at most max_context.
std::vector<ProfilePoint> HostCheckPoints(int32_t max_tokens, int32_t max_batch, int32_t max_context);

// The first KV block of a configuration's sequences in a profile of `grid` (each sequence's
// blocks follow): 0 for a prefill chunk; for a decode, past every block a prefill chunk of
// the grid writes, when the pool of `pool_blocks` blocks of `block_size` tokens holds the
// decode there, else 0. A decode row's sequences attend over what their blocks hold; the
// blocks a long chunk of one sequence wrote would give every sequence of the batch the
// same text to attend to, so that a mixture of experts' router sees them alike and picks
// fewer distinct experts than a serving run's decodes, each over its own context, do
// (2026-12-03, the CPU engine's Mixtral-layout model: decode batches of 8 at context 15
// ran 6.0 of 8 experts in a grid with chunks of up to 256 tokens, 7.3 without them; the
// serving runs' decode batches route as uniform routing does). Where the blocks are does
// not change a step's work.
int32_t FirstBlock(std::span<const ProfilePoint> grid, const ProfilePoint& point, int32_t block_size,
                   int32_t pool_blocks);

// The settling runs before a measured run (ProfileOptions::settle_ms): as many whole runs
// of `last_run_s` as fit in `settle_ms`; none when it is 0 or the run is longer, or its
// time is unknown (0).
int32_t SettleRuns(double settle_ms, double last_run_s);

// A step the profiler timed, and the median of its whole-step times in seconds.
struct TimedStep {
  ProfilePoint point;
  double median_s = 0;
};

// ProfileEngine's whole steps only, each with its configuration (decodes told from
// prefill chunks of one token, which the rows cannot). `options.points` or `host_check`
// usually choose them, and their times stay as measured (over the full grid in passes,
// the host's drift is taken out, as ProfileEngine's). `model`, when given, is the
// experiment's model already loaded (EngineModel::Load(config)), whose runner the steps
// are timed on (an idle one it keeps, engine/idle_runners.h): `servelab validate` times
// its host check on the very runner its engine runs, not on a copy of the weights read
// again (two copies in one process can run at different speeds on the CPU engine,
// experiments/validation/README.md).
StatusOr<std::vector<TimedStep>> TimeSteps(const ExperimentConfig& config, const ProfileOptions& options,
                                           std::shared_ptr<EngineModel> model = nullptr);

// `config` must run on the engine (backend: engine). Errors: the engine's, and options
// out of range (InvalidArgument).
StatusOr<std::vector<ProfileRow>> ProfileEngine(const ExperimentConfig& config,
                                                const ProfileOptions& options);

// What ProfileEngines took out of its rows as the host's drift (ProfileOptions::
// drift_window).
struct ProfileDrift {
  int32_t window = 0;  // 0: nothing taken out (runs back to back, given points, the host check)
  // The host's speed factors of the measured runs (a run's time over its row's usual
  // time, around it: 1.2 = 20% slower): their p10, median and p90.
  double p10 = 1, p50 = 1, p90 = 1;
  // Per experiment, its whole steps' spread with the drift left in (SpreadOf).
  std::vector<ProfileSpread> before;
};

// Several experiments' engines profiled together, every model loaded at once: in passes
// (options.interleave), each pass runs over every experiment's grid in turn, so a change
// of the host's speed during the profile falls on every experiment's rows alike. Profiles
// taken one after the other on a shared host carry that hour's speed each: a fit across
// model shapes then reads the host's change as the shapes' (2026-12-03, this 2-core VM:
// two shapes profiled 15 minutes apart, fitted together, in-sample whole-step bias +5.1%
// and -9.5%, each file's own direction). The rows of configs[i] are the result's [i].
// `drift`, when given, says what was taken out as the host's drift.
StatusOr<std::vector<std::vector<ProfileRow>>> ProfileEngines(std::span<const ExperimentConfig> configs,
                                                              const ProfileOptions& options,
                                                              ProfileDrift* drift = nullptr);

}  // namespace servelab
