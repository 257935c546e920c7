#pragma once
// `servelab profile`: the engine's runner timed over a grid of steps the scheduler
// produces, per op (when the runner times its ops: the CPU runner does) and per whole
// step (the runner's forward pass and the sampling of its rows), as profile rows
// (driver/profile_table.h) that `servelab calibrate` fits.
//
// The grid (engine/profile_grid.h): prefill chunks of one sequence and decode batches,
// each after a number of cached tokens, skipping what the runner's KV pool cannot hold. Each configuration first runs
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
#include "engine/profile_grid.h"

namespace servelab {

class EngineModel;  // engine/engine_setup.h

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
