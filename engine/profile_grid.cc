#include "engine/profile_grid.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/host_drift.h"
#include "core/uniform_step.h"
#include "driver/profile_table.h"

namespace servelab {
namespace {

// 1, 2, 3, 4, 6, 8, 12, 16, ... up to `limit` (and `limit` itself).
std::vector<int32_t> Sizes(int32_t limit) {
  std::vector<int32_t> sizes;
  for (int64_t p = 1; p <= limit; p *= 2) {
    sizes.push_back(static_cast<int32_t>(p));
    const int64_t between = p + p / 2;
    if (p >= 2 && between <= limit) sizes.push_back(static_cast<int32_t>(between));
  }
  if (sizes.back() != limit) sizes.push_back(limit);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

}  // namespace

std::vector<ProfilePoint> ProfileGrid(int32_t max_tokens, int32_t max_batch, int32_t max_context) {
  std::vector<ProfilePoint> grid;
  // Contexts in int64: the next one past a context near INT32_MAX must not wrap.
  for (int64_t context = 0; context < max_context; context = context == 0 ? 128 : context * 4) {
    for (int32_t t : Sizes(max_tokens)) {
      if (context + t <= max_context) grid.push_back(ProfilePoint{false, t, static_cast<int32_t>(context)});
    }
  }
  for (int64_t context = 15; context + 1 <= max_context; context = context * 4 + 3) {
    for (int32_t b : Sizes(max_batch)) grid.push_back(ProfilePoint{true, b, static_cast<int32_t>(context)});
  }
  return grid;
}

std::vector<ProfilePoint> HostCheckPoints(int32_t max_tokens, int32_t max_batch, int32_t max_context) {
  // The grid's decode context at most `want` that leaves room for the new token.
  auto context = [&](int32_t want) {
    for (int32_t c = want; c >= 15; c = (c - 3) / 4) {
      if (c + 1 <= max_context) return c;
    }
    return std::max(0, max_context - 1);
  };
  return {ProfilePoint{false, std::clamp(std::min(max_tokens, max_context), 1, 128), 0},
          ProfilePoint{true, std::max(1, max_batch), context(255)},
          ProfilePoint{true, 1, context(63)}};
}

Status CheckProfileOptions(const ProfileOptions& options) {
  // [lo, hi] (false for NaN), or InvalidArgument naming the flag.
  auto range = [](const char* flag, double value, double lo, double hi, const char* what) -> Status {
    if (value >= lo && value <= hi) return Status::Ok();
    char said[160];  // "%.15g": a count as the user wrote it (2000000000, not 2e+09)
    std::snprintf(said, sizeof said, "%s %.15g: must be in [%.15g, %.15g] %s", flag, value, lo, hi, what);
    return InvalidArgument(said);
  };
  SERVELAB_RETURN_IF_ERROR(range("--warmup", options.warmup, 0, kMaxProfileWarmup, "runs"));
  SERVELAB_RETURN_IF_ERROR(range("--warmup-ms", options.warmup_ms, 0, kMaxProfileMs, "milliseconds"));
  SERVELAB_RETURN_IF_ERROR(range("--settle-ms", options.settle_ms, 0, kMaxProfileMs, "milliseconds"));
  SERVELAB_RETURN_IF_ERROR(range("--repeats", options.repeats, 1, kMaxProfileRepeats, "runs"));
  SERVELAB_RETURN_IF_ERROR(range("--drift-window", options.drift_window, 0, kMaxDriftWindow,
                                 "measured runs (0: none)"));
  if (options.drift_window > 0 && options.drift_window < kMinDriftWindow) {
    return InvalidArgument("--drift-window " + std::to_string(options.drift_window) + ": 0 (none) or at least " +
                           std::to_string(kMinDriftWindow) + ", a run and a neighbour each side");
  }
  SERVELAB_RETURN_IF_ERROR(range("--after-prefill-steps", options.after_prefill_steps, 0, kMaxAfterPrefill,
                                 "decode steps (0: none)"));
  if (options.after_prefill_steps > 0 && options.after_prefill_steps < kMinAfterPrefillSteps) {
    return InvalidArgument("--after-prefill-steps " + std::to_string(options.after_prefill_steps) +
                           ": 0 (none) or at least " + std::to_string(kMinAfterPrefillSteps) +
                           ", for a fit to tell a slowdown from its decay");
  }
  // Their upper bounds are the experiment's (ProfileEngine).
  SERVELAB_RETURN_IF_ERROR(range("--max-tokens", options.max_tokens, 0, INT32_MAX, "(0: the experiment's)"));
  SERVELAB_RETURN_IF_ERROR(range("--max-batch", options.max_batch, 0, INT32_MAX, "(0: the experiment's)"));
  SERVELAB_RETURN_IF_ERROR(range("--max-context", options.max_context, 0, INT32_MAX, "(0: the experiment's)"));
  return Status::Ok();
}

UniformStepShape ShapeOf(const ProfilePoint& c) { return DecodesOrChunk(c.decode, c.tokens, c.context); }

int64_t SequenceBlocks(const ProfilePoint& c, int32_t block_size) {
  return BlocksPerSequence(ShapeOf(c), block_size);
}

int32_t FirstBlock(std::span<const ProfilePoint> grid, const ProfilePoint& point, int32_t block_size,
                   int32_t pool_blocks) {
  if (!point.decode) return 0;
  int64_t prefill = 0;
  for (const ProfilePoint& c : grid) {
    if (!c.decode) prefill = std::max(prefill, SequenceBlocks(c, block_size));
  }
  return prefill + SequenceBlocks(point, block_size) * point.tokens <= pool_blocks ? static_cast<int32_t>(prefill)
                                                                                     : 0;
}

int32_t SettleRuns(double settle_ms, double last_run_s) {
  const double budget_s = settle_ms * 1e-3;
  if (!(last_run_s > 0) || !(budget_s >= last_run_s)) return 0;
  // At most a million: a step of nanoseconds (a stub) within a minute's budget.
  return static_cast<int32_t>(std::min(std::floor(budget_s / last_run_s), 1e6));
}

}  // namespace servelab
