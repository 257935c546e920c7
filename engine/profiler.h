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
// measured 10-20% slower than inside a run; with 25 ms, as fast). Then `repeats` measured
// runs, back to back as Vidur profiles (serving runs similar steps in streaks: decodes
// follow decodes), or with `interleave` in passes over the whole grid, so each median
// spans the whole profile and slow drift of the host is in every one alike. (Timing each
// step after a random other one instead, the 11M-parameter model, whose weights fit the
// CPU's L3, measured one-sequence decodes at 0.6-0.86 ms against 0.39-0.61 ms in runs.)
// A row gives the median, p10 and p90 of the repeats (numpy's linear percentiles), per
// layer for per-layer ops (the step's total over its layers, divided by them), per step
// otherwise.
#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "driver/experiment_config.h"
#include "driver/profile_table.h"

namespace servelab {

struct ProfileOptions {
  int32_t warmup = 2;         // unmeasured runs per configuration, at least
  double warmup_ms = 25;      // and at least this long
  int32_t repeats = 7;
  int32_t max_tokens = 0;   // 0: scheduler.max_num_batched_tokens
  int32_t max_batch = 0;    // 0: scheduler.max_num_seqs
  int32_t max_context = 0;  // 0: the context the engine serves
  // false: each configuration's runs back to back; true: its warm-up runs back to back,
  // then `repeats` passes over the whole grid in grid order.
  bool interleave = false;
  // Called after each configuration with (done, total).
  std::function<void(int32_t, int32_t)> on_progress;
};

// `config` must run on the engine (backend: engine). Errors: the engine's, and options
// out of range (InvalidArgument).
StatusOr<std::vector<ProfileRow>> ProfileEngine(const ExperimentConfig& config,
                                                const ProfileOptions& options);

}  // namespace servelab
