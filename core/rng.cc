#include "core/rng.h"

#include <limits>

namespace servelab {
namespace {

constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ULL;

// The SplitMix64 output function: a bijective 64-bit finalizer.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t SplitMix64(uint64_t& state) {
  state += kGoldenGamma;
  return Mix64(state);
}

uint64_t DeriveSeed(uint64_t seed, uint64_t stream) {
  // Two SplitMix64 steps, the stream id folded in between: streams of one seed differ
  // in the second step's input, seeds differ already in the first.
  uint64_t state = seed;
  state = SplitMix64(state) ^ Mix64(stream * kGoldenGamma + 1);
  return SplitMix64(state);
}

int64_t Rng::UniformInt(int64_t lo, int64_t hi) {
  // Width of [lo, hi] minus one, computed in unsigned arithmetic so it cannot overflow.
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (span == std::numeric_limits<uint64_t>::max()) return static_cast<int64_t>(engine_());
  const uint64_t range = span + 1;
  // Accept draws below the largest multiple of `range`, so every residue is equally likely.
  const uint64_t limit = std::numeric_limits<uint64_t>::max() -
                         std::numeric_limits<uint64_t>::max() % range;
  uint64_t x = engine_();
  while (x >= limit) x = engine_();
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + x % range);
}

double Rng::Normal() {
  if (has_spare_normal_) {
    has_spare_normal_ = false;
    return spare_normal_;
  }
  double u = 0.0;
  double v = 0.0;
  double s = 0.0;
  do {
    u = 2.0 * Uniform() - 1.0;
    v = 2.0 * Uniform() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  const double factor = std::sqrt(-2.0 * std::log(s) / s);
  spare_normal_ = v * factor;
  has_spare_normal_ = true;
  return u * factor;
}

double Rng::Gamma(double shape, double scale) {
  if (shape < 1.0) {
    // Boost: X ~ Gamma(shape + 1), U uniform => X * U^(1/shape) ~ Gamma(shape).
    const double x = Gamma(shape + 1.0, 1.0);
    return scale * x * std::pow(UniformPositive(), 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    const double x = Normal();
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    const double u = UniformPositive();
    const double x2 = x * x;
    // Squeeze first (cheap), then the exact log test.
    if (u < 1.0 - 0.0331 * x2 * x2) return scale * d * v;
    if (std::log(u) < 0.5 * x2 + d * (1.0 - v + std::log(v))) return scale * d * v;
  }
}

LogParams LognormalLogParams(double mean, double cv) {
  LogParams p;
  const double sigma2 = std::log1p(cv * cv);
  p.sigma = std::sqrt(sigma2);
  p.mu = std::log(mean) - 0.5 * sigma2;
  return p;
}

}  // namespace servelab
