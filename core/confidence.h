#pragma once
// The mean of independent replicates and its confidence interval, and the same for
// paired differences: what servelab's error bars are.
//
// Student's t interval: mean +- t(1 - (1 - level) / 2, n - 1) * s / sqrt(n), with s the
// sample standard deviation (n - 1 in the denominator). Exact for normal replicates and
// close for means of many requests (the central limit theorem); it assumes the
// replicates independent (distinct seeds), not the requests inside one run.
#include <cstdint>
#include <span>

namespace servelab {

struct Estimate {
  int64_t n = 0;
  double mean = 0;
  double half_width = 0;  // 0 when n < 2 (no interval)
  double low() const { return mean - half_width; }
  double high() const { return mean + half_width; }
  // The interval excludes `value` (n >= 2): a difference is significant when it
  // excludes 0.
  bool Excludes(double value) const { return n >= 2 && (value < low() || value > high()); }
};

inline constexpr double kConfidenceLevel = 0.95;

// REQUIRES: 0 < level < 1. An empty span gives n = 0.
Estimate MeanWithInterval(std::span<const double> values, double level = kConfidenceLevel);

// Of b[i] - a[i] (REQUIRES: equal sizes): the paired comparison of two configurations
// run on the same replicates' requests.
Estimate PairedDifference(std::span<const double> a, std::span<const double> b,
                          double level = kConfidenceLevel);

}  // namespace servelab
