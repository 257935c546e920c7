#pragma once
// The first decode steps after a step that computed prompt tokens run slower than a
// streak's settled ones, by a share that decays step by step:
//
//   time(k) = settled time x (1 + slowdown(B) x exp(-(k - 1) / decay_steps)),  k >= 1
//
// k being the step's place in the streak of decode-only steps since that step
// (StepPlan::steps_since_prefill), B its sequences. A profile times every configuration
// settled (each run after its own configuration, ProfileOptions::settle_ms) and a serving
// run's decodes mostly stream in that state; the first after a prefill chunk do not. On
// this project's 2-core VM the first one-sequence decode after a 512-token chunk took 1.45x
// its settled time and settled within 4-8 decodes (experiments/validation/README.md,
// State after a change of step), decodes of 4 or more sequences (GEMMs, not the
// matrix-vector products that stream every weight) not measurably; in the H200 recording
// (experiments/results/h200/) the first decode after a prefill step was predicted 2-4
// points faster than the settled ones overall, at every batch size. `servelab profile` times
// decodes k = 1 ... after a chunk (kStepAfterPrefill rows) at a few batch sizes;
// FitAfterPrefill fits one decay and a slowdown per batch size to them against the same
// decodes' settled rows; the calibrated cost model applies it to decode-only steps, the
// slowdown between two fitted batch sizes interpolated in log(B), beyond them the nearest.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "driver/profile_table.h"

namespace servelab {

struct AfterPrefill {
  // The fitted batch sizes, increasing, and the first decode's extra time at each, a share
  // of its settled time.
  std::vector<int64_t> batches;
  std::vector<double> slowdown;
  double decay_steps = 1;  // the extra time's e-folding, in decode-only steps
  // How it was fitted: rows, their chunk's tokens (the smallest and largest), and the
  // fit's error on the rows' times relative to their settled ones (ratio measured / settled
  // against 1 + the fitted share), in percent.
  int64_t rows = 0;
  int32_t prefill_tokens_min = 0, prefill_tokens_max = 0;
  double mape_pct = 0;
  double bias_pct = 0;
  // slowdown at `seqs` sequences: interpolated in log(seqs) between the fitted sizes, the
  // nearest's beyond them; 0 with none fitted.
  double SlowdownAt(int64_t seqs) const;
  // 1 + SlowdownAt(seqs) x exp(-(k - 1) / decay_steps) for k >= 1; 1 for k <= 0.
  double Factor(int32_t steps_since_prefill, int64_t seqs) const;
  // "10.3% at 1, 1.8% at 4, 0.0% at 16 sequences, decaying over 4.00 steps"
  std::string Said() const;
};

// MODEL.yaml's ranges: a first decode at most 11 times its settled time; an e-folding of
// 0.05 to 10,000 steps; at most 64 batch sizes.
inline constexpr double kMaxAfterPrefillSlowdown = 10;
inline constexpr size_t kMaxAfterPrefillBatches = 64;
inline constexpr double kMinAfterPrefillDecay = 0.05, kMaxAfterPrefillDecay = 1e4;

// Fits `tables`' kStepAfterPrefill rows, each against the "step" row of the same table,
// shape, batch and context (its settled time): at each decay on a grid of 0.25 to 64
// steps, each batch size's slowdown >= 0 by least squares on its rows' ratios' excess
// over 1 (every shape's rows of that size together); the decay of the least squares over
// all rows kept (at most kMaxAfterPrefillBatches sizes, else InvalidArgument). None
// when no table has such rows. InvalidArgument naming the file and line of a row with no
// settled row to compare with, or more than 1 + kMaxAfterPrefillSlowdown times it (a
// settled median of 0 among them); naming the rows when they are too few to tell a decay
// from a slowdown (fewer than 3 distinct k).
StatusOr<std::optional<AfterPrefill>> FitAfterPrefill(std::span<const ProfileTable> tables);

}  // namespace servelab
