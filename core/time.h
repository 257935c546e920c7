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

inline constexpr double ToSeconds(TimeNs t) { return static_cast<double>(t) * 1e-9; }
// Rounds to the nearest nanosecond.
inline TimeNs FromSeconds(double s) { return static_cast<TimeNs>(std::llround(s * 1e9)); }

}  // namespace servelab
