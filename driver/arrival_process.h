#pragma once
// Arrival times of a synthetic workload (ArrivalConfig is the spec).
//   poisson   exponential gaps with mean 1/rate (CV 1)
//   gamma     gamma gaps with mean 1/rate and coefficient of variation cv:
//             shape k = 1/cv^2, scale = 1/(rate k)   (cv > 1: burstier than Poisson)
//   constant  gaps of exactly 1/rate: arrival i (1-based) is at round(i / rate) seconds
//             in ns, computed from i, so no rounding error accumulates
//   burst     every arrival at t = 0
// The first arrival comes one gap after t = 0 (burst: at 0); times never decrease.
// Random gaps are summed in double seconds and rounded to ns per arrival, so times
// stay within 1 ns of the exact sum (doubles hold 0.1 ns at 10^6 s).
#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "core/time.h"
#include "core/rng.h"
#include "driver/workload_config.h"

namespace servelab {

// Named ...Generator: `ArrivalProcess` is the config enum.
class ArrivalGenerator {
 public:
  // Validates `config` (rate > 0 and finite unless burst; gamma cv > 0); errors name
  // `key` (e.g. "workload.arrival").
  static StatusOr<ArrivalGenerator> Make(const ArrivalConfig& config, std::string_view key);

  // The next arrival time in ns. Draws from `rng` only (poisson and gamma).
  TimeNs Next(Rng& rng);

  ArrivalProcess process() const { return process_; }

 private:
  ArrivalProcess process_ = ArrivalProcess::kPoisson;
  double rate_ = 1.0;            // requests per second
  double mean_gap_s_ = 1.0;      // 1 / rate
  double gamma_shape_ = 1.0;     // k = 1 / cv^2
  double gamma_scale_s_ = 1.0;   // 1 / (rate k)
  double clock_s_ = 0.0;         // poisson, gamma: sum of the gaps so far
  int64_t count_ = 0;            // arrivals returned so far
};

}  // namespace servelab
