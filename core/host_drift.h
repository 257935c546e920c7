#pragma once
// The host's speed along a run of timings, from the timings themselves: randomized-block
// style, each timing compared with its own row's median (a row: one configuration timed
// again and again, in passes), so that what one timing says of the host is its ratio to
// that median, whatever its configuration.
//
// Why: on a shared host (the 2-core VM this was written on, 2026-12-05) the speed moves
// in episodes of a fraction of a second to tens of seconds, by up to 25-30%, on every
// configuration alike. A profile in passes puts each row's repeats in different episodes,
// so p10-p90 within a row is mostly the host: the profile's whole steps spread by a median
// of 8.0-12.2% over four model shapes, 12-44% in the longer profiles of that day. The
// ratio of the runs timed around a run to their rows' medians says how fast the host was
// then; dividing it out took the spread to 3.2-4.5% and the disagreement of the medians
// of odd and even passes from 1.3-2.6% to 0.5-1.1% (9 runs a window).
#include <cstdint>
#include <span>
#include <vector>

namespace servelab {

// The longest HostSpeed window.
inline constexpr int32_t kMaxDriftWindow = 1001;

// For timings in the order they were taken, `rows[i]` the row of timing i (any ints) and
// `seconds[i]` its time: the host's speed factor at each timing, the median over the
// `window - 1` other timings nearest it in that order (half before it, half after; at the
// ends, the nearest window - 1 on one side and the other; every other one when there are
// no more) of their ratio to their row's median. 1.0 means as fast as usual; 1.25, every
// timing around it 25% slower than its row's median. Timings whose time or row median is
// not positive and finite say nothing (a factor with none to go by is 1.0). A timing's
// own ratio is not in its factor, so a row's own deviation is not taken for the host's.
// REQUIRES: rows.size() == seconds.size(); 3 <= window <= kMaxDriftWindow.
std::vector<double> HostSpeed(std::span<const int32_t> rows, std::span<const double> seconds, int32_t window);

// A sample a timed run wrote: `values[index]`.
struct SampleRef {
  std::vector<double>* values = nullptr;
  size_t index = 0;
};

// A timed run, in the order they ran: its row and time (HostSpeed's) and the samples it
// wrote (a whole step's time, its ops' times), each where it was written.
struct LoggedRun {
  int32_t row = 0;
  double seconds = 0;
  std::vector<SampleRef> samples;
};

// Divides each run's samples by its HostSpeed factor over `runs` (each sample once: a
// sample two runs name is divided by both); returns the factors, one a run. REQUIRES:
// every SampleRef within its vector; HostSpeed's window.
std::vector<double> DivideByHostSpeed(std::span<const LoggedRun> runs, int32_t window);

}  // namespace servelab
