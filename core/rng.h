#pragma once
// Deterministic random numbers for workloads.
//
// Same seed and stream id => the same sequence on every compiler and standard library:
// the engine is std::mt19937_64 (its output is fully specified by the standard) and every
// transform below is written here; std::*_distribution is never used because its output
// is implementation-defined. The transforms call std::log / std::exp / std::sqrt /
// std::pow; sqrt is exact (IEEE 754), the others are accurate to about 1 ulp in every
// mainstream libm, so a different libm may change a sample in its last bit, which the
// rounding of lengths and nanosecond times hides in all but vanishingly rare cases.
//
// One Rng per purpose (arrivals, input lengths, output lengths, clients): each is
// seeded by DeriveSeed(experiment seed, stream id), so adding draws to one stream
// never shifts another.
#include <cmath>
#include <cstdint>
#include <random>

namespace servelab {

// Stream ids of the workload's independent random streams.
enum class RngStream : uint64_t {
  kArrivals = 1,
  kInputLengths = 2,
  kOutputLengths = 3,
  kClients = 4,
  kPrefixChoice = 5,   // which shared system prompt a request starts with
  kPrefixLengths = 6,  // the shared system prompts' lengths
  kSessions = 7,       // a session's turns, think times and lengths (one derived stream
                       // per session: DeriveSeed(seed, kSessions) ^ session)
};

// SplitMix64: advances `state` by the golden-ratio increment and returns its mix.
uint64_t SplitMix64(uint64_t& state);
// A 64-bit seed for stream `stream` of experiment seed `seed`; distinct streams of one
// seed (and one stream of distinct seeds) give unrelated seeds.
uint64_t DeriveSeed(uint64_t seed, uint64_t stream);

class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream) : engine_(DeriveSeed(seed, stream)) {}
  Rng(uint64_t seed, RngStream stream) : Rng(seed, static_cast<uint64_t>(stream)) {}

  uint64_t NextU64() { return engine_(); }
  // Uniform in [0, 1), a multiple of 2^-53 (the top 53 bits of one draw).
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform in (0, 1]: safe to take the log of.
  double UniformPositive() { return 1.0 - Uniform(); }
  // Uniform integer in [lo, hi], unbiased (rejection). REQUIRES: lo <= hi.
  int64_t UniformInt(int64_t lo, int64_t hi);
  // Exponential with the given mean (> 0), by inversion: -mean * ln(U), U in (0, 1].
  double Exponential(double mean) { return -mean * std::log(UniformPositive()); }
  // Standard normal by the Marsaglia polar method; every second call returns the
  // spare value of the pair computed by the first.
  double Normal();
  double Normal(double mean, double stddev) { return mean + stddev * Normal(); }
  // Gamma(shape, scale), mean shape * scale. Marsaglia–Tsang for shape >= 1; for
  // shape < 1, Gamma(shape + 1) * U^(1/shape). REQUIRES: shape > 0, scale > 0.
  double Gamma(double shape, double scale);
  // exp(Normal(mu, sigma)): mu and sigma are of the log (see LognormalLogParams).
  double Lognormal(double mu, double sigma) { return std::exp(Normal(mu, sigma)); }

 private:
  std::mt19937_64 engine_;
  bool has_spare_normal_ = false;
  double spare_normal_ = 0.0;
};

// The (mu, sigma) of ln X for a lognormal X with the given mean (> 0) and coefficient
// of variation cv = std / mean (>= 0): sigma^2 = ln(1 + cv^2), mu = ln(mean) - sigma^2/2.
struct LogParams {
  double mu = 0.0;
  double sigma = 0.0;
};
LogParams LognormalLogParams(double mean, double cv);

}  // namespace servelab
