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
// skipping what the runner's KV pool cannot hold. Each configuration runs `warmup`
// times unmeasured, then `repeats` times, back to back, as Vidur profiles: serving runs
// similar steps in streaks (decodes follow decodes), so caches are as warm as this
// leaves them. (Measured on the CPU runner with the 11M-parameter model: timing each
// step after a random other one made one-sequence decodes 0.6-0.86 ms, against
// 0.39-0.61 ms inside runs and 0.36-0.53 ms back to back.) A row gives the median, p10
// and p90 of the repeats (numpy's linear percentiles), per layer for per-layer ops (the
// step's total over its layers, divided by them), per step otherwise.
#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "driver/experiment_config.h"
#include "driver/profile_table.h"

namespace servelab {

struct ProfileOptions {
  int32_t warmup = 2;
  int32_t repeats = 7;
  int32_t max_tokens = 0;   // 0: scheduler.max_num_batched_tokens
  int32_t max_batch = 0;    // 0: scheduler.max_num_seqs
  int32_t max_context = 0;  // 0: the context the engine serves
  // Called after each configuration with (done, total).
  std::function<void(int32_t, int32_t)> on_progress;
};

// `config` must run on the engine (backend: engine). Errors: the engine's, and options
// out of range (InvalidArgument).
StatusOr<std::vector<ProfileRow>> ProfileEngine(const ExperimentConfig& config,
                                                const ProfileOptions& options);

}  // namespace servelab
