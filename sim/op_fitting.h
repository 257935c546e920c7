#pragma once
// The least-squares fits of one op's measured times to the forms of op_model.h, for
// FitProfiles (calibration.h): the max() form by alternation, the additive form, the
// two-tier stream form and the split_kv form, each a bounded (non-negative) weighted least
// squares on relative error. Nothing outside calibration.cc and these fits' tests
// includes this.
#include <cstdint>
#include <limits>
#include <vector>

#include "sim/op_model.h"

namespace servelab::calibration_internal {

// One measured row: its median time and the work its op did.
struct Sample {
  double t = 0;  // seconds
  OpWork work;
};

// The fit works in OpCoefficients (seconds per unit of work) and predicts with
// OpSeconds, the calibrated cost model's own formula.
using Coefficients = OpCoefficients;

// The sum over the samples of the squared relative error of OpSeconds(c, work) against
// their times: what every fit minimises.
double Objective(const Coefficients& c, const std::vector<Sample>& samples);

struct FitResult {
  Coefficients c;
  bool memory_fitted = false, compute_fitted = false;
};

// The max() form (or the stream form, bytes alone). The alternation finds a local optimum
// of the max(): it is started from the datasheet roofline's (`start`'s) assignment and
// from splits of the rows by arithmetic intensity (FLOPs per byte; the max() puts every
// row below some intensity on the memory term), up to 64 evenly spaced ones, and the best
// result is kept.
FitResult FitOp(OpForm form, const std::vector<Sample>& samples, const Coefficients& start);

// The additive form: one non-negative least squares over every term.
FitResult FitAdditive(const std::vector<Sample>& samples, const Coefficients& start);

// Coefficients with their objective (infinity: no fit).
struct ScoredFit {
  Coefficients c;
  double objective = std::numeric_limits<double>::infinity();
};

// The two-tier stream form for knees at up to 32 of the measured sizes: fixed + bytes
// below the knee at one rate + bytes above it at another. Returns the best with its
// objective (infinity when none fits).
ScoredFit FitCached(const std::vector<Sample>& samples);

// The split_kv form (op_model.h): fixed + bytes + the grid's CTA bytes in a paired first
// wave and in single ones + waves + the combine kernel + per sequence (row), one
// non-negative least squares; then the same with the paired CTAs' first tokens at a rate
// of their own, for ramps of 1 to 16 whole 128-token blocks shorter than the longest
// paired CTA (the ramp and the rest told apart), kept when better by more than
// `tolerance`. Infinite objective unless both CTA rates are identified (the rows have
// waves of each kind).
ScoredFit FitSplitKv(const std::vector<Sample>& samples, double tolerance);

// A stream fit (fixed + bytes) of a GEMM's single-row measurements; with fewer than
// `min_sizes` distinct sizes the fixed cost cannot be told from the bytes' and the fit
// is bytes alone.
Coefficients FitSingleRow(const std::vector<Sample>& samples, const Coefficients& start,
                          int32_t min_sizes);

}  // namespace servelab::calibration_internal
