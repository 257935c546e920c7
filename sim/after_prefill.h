#pragma once
// The first decode steps after a step that computed prompt tokens run slower than a
// streak's settled ones, by a share that decays step by step:
//
//   time(k) = settled time x (1 + slowdown x exp(-(k - 1) / decay_steps)),  k >= 1
//
// k being the step's place in the streak of decode-only steps since that step
// (StepPlan::steps_since_prefill). A profile times every configuration settled (each run
// after its own configuration, ProfileOptions::settle_ms) and a serving run's decodes
// mostly stream in that state; the first after a prefill chunk do not. On this project's
// 2-core VM the first one-sequence decode after a 512-token chunk took 1.45x its settled
// time and settled within 4-8 decodes (experiments/validation/README.md, State after a
// change of step); in the H200 recording (experiments/results/h200/) the first decode
// after a prefill step was predicted 2-4 points faster than the settled ones, the next
// ten closing that gap. `servelab profile` times decodes k = 1 ... after a chunk
// (kStepAfterPrefill rows); FitAfterPrefill fits the two numbers to them against the same
// decodes' settled rows; the calibrated cost model applies it to decode-only steps.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/status.h"
#include "driver/profile_table.h"

namespace servelab {

struct AfterPrefill {
  double slowdown = 0;     // the first decode's extra time, a share of its settled time
  double decay_steps = 1;  // the extra time's e-folding, in decode-only steps
  // How it was fitted: rows, their chunk's tokens (the smallest and largest), and the
  // fit's error on the rows' times relative to their settled ones (ratio measured / settled
  // against 1 + the fitted share), in percent.
  int64_t rows = 0;
  int32_t prefill_tokens_min = 0, prefill_tokens_max = 0;
  double mape_pct = 0;
  double bias_pct = 0;
  // 1 + slowdown x exp(-(k - 1) / decay_steps) for k >= 1; 1 for k <= 0.
  double Factor(int32_t steps_since_prefill) const;
};

// MODEL.yaml's ranges: a first decode at most 11 times its settled time; an e-folding of
// 0.05 to 10,000 steps.
inline constexpr double kMaxAfterPrefillSlowdown = 10;
inline constexpr double kMinAfterPrefillDecay = 0.05, kMaxAfterPrefillDecay = 1e4;

// Fits `tables`' kStepAfterPrefill rows, each against the "step" row of the same table,
// shape, batch and context (its settled time): the slowdown >= 0 by least squares on the
// ratios' excess over 1 at each decay on a grid of 0.25 to 64 steps, the best kept. None
// when no table has such rows. InvalidArgument naming the file and line of a row with no
// settled row to compare with; naming the rows when they are too few to tell a decay from
// a slowdown (fewer than 4, or fewer than 3 distinct k).
StatusOr<std::optional<AfterPrefill>> FitAfterPrefill(std::span<const ProfileTable> tables);

}  // namespace servelab
