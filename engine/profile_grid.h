#pragma once
// What `servelab profile` times (engine/profiler.h): the grid of configurations, the
// options of a profile and their ranges, the host check's reference steps, where a
// configuration's KV blocks go and how many runs settle it. The grid:
//   prefill  one sequence's chunk of T tokens after C cached ones: T from 1 to
//            max_tokens (powers of two and the halves between), C in 0, 128, 512, 2048,
//            ... with C + T <= max_context;
//   decode   B sequences of one new token after C cached ones each: B from 1 to
//            max_batch (likewise), C in 15, 63, 255, 1023, ... < max_context.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/uniform_step.h"

namespace servelab {

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

// A configuration's step, as UniformStep builds it.
UniformStepShape ShapeOf(const ProfilePoint& c);
// The KV blocks one of `c`'s sequences holds: its context and its new tokens.
int64_t SequenceBlocks(const ProfilePoint& c, int32_t block_size);

// The grid above, in order: the prefill chunks by context, then the decodes by context.
std::vector<ProfilePoint> ProfileGrid(int32_t max_tokens, int32_t max_batch, int32_t max_context);

}  // namespace servelab
