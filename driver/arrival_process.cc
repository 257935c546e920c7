#include "driver/arrival_process.h"

#include <cmath>
#include <string>

namespace servelab {

StatusOr<ArrivalGenerator> ArrivalGenerator::Make(const ArrivalConfig& config,
                                                  std::string_view key) {
  ArrivalGenerator g;
  g.process_ = config.process;
  if (config.process == ArrivalProcess::kBurst) return g;
  if (!(config.rate > 0) || !std::isfinite(config.rate)) {
    return InvalidArgument(std::string(key) + ".rate: must be > 0, got " +
                           std::to_string(config.rate));
  }
  g.rate_ = config.rate;
  g.mean_gap_s_ = 1.0 / config.rate;
  if (config.process == ArrivalProcess::kGamma) {
    if (!(config.cv > 0) || !std::isfinite(config.cv)) {
      return InvalidArgument(std::string(key) + ".cv: must be > 0, got " +
                             std::to_string(config.cv));
    }
    g.gamma_shape_ = 1.0 / (config.cv * config.cv);
    g.gamma_scale_s_ = 1.0 / (config.rate * g.gamma_shape_);
  }
  return g;
}

TimeNs ArrivalGenerator::Next(Rng& rng) {
  ++count_;
  switch (process_) {
    case ArrivalProcess::kPoisson:
      clock_s_ += rng.Exponential(mean_gap_s_);
      return FromSeconds(clock_s_);
    case ArrivalProcess::kGamma:
      clock_s_ += rng.Gamma(gamma_shape_, gamma_scale_s_);
      return FromSeconds(clock_s_);
    case ArrivalProcess::kConstant:
      return FromSeconds(static_cast<double>(count_) / rate_);
    case ArrivalProcess::kBurst:
      return 0;
  }
  return 0;
}

}  // namespace servelab
