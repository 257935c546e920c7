#pragma once
// Simulated and measured time: int64 nanoseconds everywhere (DESIGN.md "Time").
#include <cmath>
#include <cstdint>

namespace servelab {

using TimeNs = int64_t;

inline constexpr TimeNs kNsPerUs = 1'000;
inline constexpr TimeNs kNsPerMs = 1'000'000;
inline constexpr TimeNs kNsPerSec = 1'000'000'000;
inline constexpr TimeNs kNever = -1;  // "has not happened"
// The latest time a run may reach (4e18 ns, ~126 years; exact as a double): the sum of two
// such times still fits an int64, so `now + elapsed` is checked against it rather than
// overflowing.
inline constexpr TimeNs kMaxTime = 4'000'000'000'000'000'000;
static_assert(kMaxTime < INT64_MAX - kMaxTime);

inline constexpr double ToSeconds(TimeNs t) { return static_cast<double>(t) * 1e-9; }
// Rounds to the nearest nanosecond, saturating at +-kMaxTime (NaN gives kMaxTime): a
// conversion never overflows.
inline TimeNs FromSeconds(double s) {
  const double ns = s * 1e9;
  if (!(ns < static_cast<double>(kMaxTime))) return kMaxTime;
  if (ns <= -static_cast<double>(kMaxTime)) return -kMaxTime;
  return static_cast<TimeNs>(std::llround(ns));
}

}  // namespace servelab
