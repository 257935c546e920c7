// The per-op least-squares fits (op_fitting.h).
#include "sim/op_fitting.h"

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include "sim/nonnegative_least_squares.h"
#include "sim/split_kv_grid.h"

namespace servelab::calibration_internal {
namespace {

double MemoryTerm(const Coefficients& c, const OpWork& w) { return c.MemorySeconds(w.bytes); }
double ComputeTerm(const Coefficients& c, const OpWork& w) {
  return w.flops * c.s_per_flop + w.causal_flops * c.s_per_causal_flop;
}

// Weighted least squares t_i / t_i ~ sum_j A_ij theta_j / t_i over the columns in
// `active`, theta >= 0 (NonNegativeLeastSquares: the constrained optimum). Each column is
// scaled to a largest entry of 1 first. Returns theta for every column (0 where inactive
// or at the bound).
std::vector<double> SolveNonNegative(const std::vector<std::vector<double>>& columns,
                                     const std::vector<Sample>& samples, const std::vector<bool>& active) {
  const size_t n = samples.size(), k = columns.size();
  Eigen::MatrixXd a(n, k);
  Eigen::VectorXd b(n);
  std::vector<double> scale(k, 0.0);
  for (size_t c = 0; c < k; ++c) {
    for (size_t i = 0; i < n; ++i) scale[c] = std::max(scale[c], std::abs(columns[c][i]));
    if (scale[c] == 0) scale[c] = 1;
  }
  for (size_t i = 0; i < n; ++i) {
    const double w = 1.0 / samples[i].t;
    b(static_cast<Eigen::Index>(i)) = 1.0;  // t_i * w
    for (size_t c = 0; c < k; ++c) {
      a(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(c)) = columns[c][i] * w / scale[c];
    }
  }
  const Eigen::VectorXd solved = NonNegativeLeastSquares(a, b, active);
  std::vector<double> theta(k, 0.0);
  for (size_t c = 0; c < k; ++c) theta[c] = solved(static_cast<Eigen::Index>(c)) / scale[c];
  return theta;
}

// The terms every form charges whatever bounds a row, after fixed, bytes, FLOPs and causal
// FLOPs (columns 0-3): per query row (attention), per expert run and the one-row experts'
// bytes (moe_mlp); which of them the samples have; their fitted values, 0 where absent.
constexpr size_t kRowTerms = 6;
std::array<double, kRowTerms> RowTerms(const OpWork& w) {
  return {w.rows, w.experts, w.single_row_expert_bytes, w.cta_tokens, w.reduce, w.partitions};
}
std::array<bool, kRowTerms> RowTermsPresent(const std::vector<Sample>& samples) {
  std::array<bool, kRowTerms> present{};
  for (const Sample& s : samples) {
    const auto terms = RowTerms(s.work);
    for (size_t j = 0; j < kRowTerms; ++j) present[j] = present[j] || terms[j] > 0;
  }
  return present;
}
void SetRowTerms(OpCoefficients& c, const std::array<bool, kRowTerms>& present,
                 const std::vector<double>& theta, size_t first) {
  auto value = [&](size_t j) { return present[j] ? theta[first + j] : 0.0; };
  c.s_per_row = value(0);
  c.s_per_expert = value(1);
  c.s_per_single_row_expert_byte = value(2);
  c.s_per_cta_token = value(3);
  c.reduce_s = value(4);
  c.s_per_partition = value(5);
}

// Alternates from `memory_bound` (the first assignment of rows to terms) between
// solving the weighted least squares that assignment gives and reassigning each row to
// the term that dominates it, until the assignment holds; the best iterate.
FitResult Alternate(OpForm form, const std::vector<Sample>& samples, const Coefficients& start,
                    std::vector<bool> memory_bound) {
  const size_t n = samples.size();
  bool has_causal = false;
  for (const Sample& s : samples) has_causal = has_causal || s.work.causal_flops > 0;
  const std::array<bool, kRowTerms> row_terms = RowTermsPresent(samples);
  FitResult best{start, false, false};
  double best_objective = std::numeric_limits<double>::infinity();
  Coefficients c = start;
  // Whether x and y have come from the data yet (a term keeps its last fitted value
  // while no row is bound by it).
  bool x_fitted = false, y_fitted = false;
  std::vector<bool> previous;
  for (int iteration = 0; iteration < 100; ++iteration) {
    if (iteration > 0) {
      for (size_t i = 0; i < n; ++i) {
        memory_bound[i] =
            form == OpForm::kStream || MemoryTerm(c, samples[i].work) >= ComputeTerm(c, samples[i].work);
      }
    }
    if (memory_bound == previous) break;
    previous = memory_bound;
    bool any_memory = false, any_compute = false;
    for (size_t i = 0; i < n; ++i) {
      any_memory = any_memory || memory_bound[i];
      any_compute = any_compute || !memory_bound[i];
    }
    // Columns: fixed, bytes (memory-bound rows), flops and causal flops (compute-bound
    // rows), then the row terms (every row).
    std::vector<std::vector<double>> columns(4 + kRowTerms, std::vector<double>(n, 0.0));
    for (size_t i = 0; i < n; ++i) {
      const OpWork& w = samples[i].work;
      columns[0][i] = 1.0;
      columns[1][i] = memory_bound[i] ? w.bytes : 0.0;
      columns[2][i] = memory_bound[i] ? 0.0 : w.flops;
      columns[3][i] = memory_bound[i] ? 0.0 : w.causal_flops;
      const auto terms = RowTerms(w);
      for (size_t j = 0; j < kRowTerms; ++j) columns[4 + j][i] = terms[j];
    }
    std::vector<bool> active = {true, any_memory, any_compute, any_compute && has_causal};
    active.insert(active.end(), row_terms.begin(), row_terms.end());
    const std::vector<double> theta = SolveNonNegative(columns, samples, active);
    Coefficients next = c;
    next.fixed_s = theta[0];
    // A term dropped or unbound keeps its previous (at first, the roofline's) value.
    const bool memory_ok = any_memory && theta[1] > 0;
    const bool compute_ok = any_compute && theta[2] > 0;
    if (memory_ok) next.s_per_byte = theta[1];
    if (compute_ok) next.s_per_flop = theta[2];
    if (compute_ok && has_causal && theta[3] > 0) next.s_per_causal_flop = theta[3];
    SetRowTerms(next, row_terms, theta, 4);
    x_fitted = x_fitted || memory_ok;
    y_fitted = y_fitted || compute_ok;
    const double objective = Objective(next, samples);
    if (objective < best_objective) {
      best_objective = objective;
      best = FitResult{next, x_fitted, y_fitted};
    }
    c = next;
  }
  return best;
}

}  // namespace

double Objective(const Coefficients& c, const std::vector<Sample>& samples) {
  double sum = 0;
  for (const Sample& s : samples) {
    const double r = (OpSeconds(c, s.work) - s.t) / s.t;
    sum += r * r;
  }
  return sum;
}

FitResult FitOp(OpForm form, const std::vector<Sample>& samples, const Coefficients& start) {
  const size_t n = samples.size();
  std::vector<bool> assignment(n);
  for (size_t i = 0; i < n; ++i) {
    assignment[i] =
        form == OpForm::kStream ||
        MemoryTerm(start, samples[i].work) >= ComputeTerm(start, samples[i].work);
  }
  FitResult best = Alternate(form, samples, start, assignment);
  if (form == OpForm::kStream) return best;
  double best_objective = Objective(best.c, samples);
  std::vector<double> intensity(n);
  for (size_t i = 0; i < n; ++i) {
    const OpWork& w = samples[i].work;
    intensity[i] = (w.flops + w.causal_flops) / std::max(w.bytes, 1.0);
  }
  std::vector<double> sorted = intensity;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  const size_t splits = std::min<size_t>(sorted.size(), 64);
  for (size_t k = 0; k <= splits; ++k) {
    // Rows at or below the threshold are memory-bound; k = 0: none, k = splits: all.
    const double threshold = k == 0 ? -1.0 : sorted[(k * sorted.size()) / splits - 1];
    for (size_t i = 0; i < n; ++i) assignment[i] = intensity[i] <= threshold;
    const FitResult fit = Alternate(form, samples, start, assignment);
    const double objective = Objective(fit.c, samples);
    if (objective < best_objective) {
      best_objective = objective;
      best = fit;
    }
  }
  return best;
}

FitResult FitAdditive(const std::vector<Sample>& samples, const Coefficients& start) {
  const size_t n = samples.size();
  std::vector<std::vector<double>> columns(4 + kRowTerms, std::vector<double>(n, 0.0));
  bool has_causal = false;
  for (size_t i = 0; i < n; ++i) {
    const OpWork& w = samples[i].work;
    columns[0][i] = 1.0;
    columns[1][i] = w.bytes;
    columns[2][i] = w.flops;
    columns[3][i] = w.causal_flops;
    const auto terms = RowTerms(w);
    for (size_t j = 0; j < kRowTerms; ++j) columns[4 + j][i] = terms[j];
    has_causal = has_causal || w.causal_flops > 0;
  }
  const std::array<bool, kRowTerms> row_terms = RowTermsPresent(samples);
  std::vector<bool> active = {true, true, true, has_causal};
  active.insert(active.end(), row_terms.begin(), row_terms.end());
  const std::vector<double> theta = SolveNonNegative(columns, samples, active);
  Coefficients c = start;
  c.additive = true;
  c.fixed_s = theta[0];
  // A dropped term costs nothing in this form: an infinite efficiency.
  c.s_per_byte = theta[1];
  c.s_per_flop = theta[2];
  c.s_per_causal_flop = has_causal ? theta[3] : 0.0;
  SetRowTerms(c, row_terms, theta, 4);
  return FitResult{c, theta[1] > 0, theta[2] > 0};
}

ScoredFit FitCached(const std::vector<Sample>& samples) {
  std::vector<double> sizes;
  for (const Sample& s : samples) sizes.push_back(s.work.bytes);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  ScoredFit best;
  if (sizes.size() < 6) return best;
  const size_t knees = std::min<size_t>(32, sizes.size() - 4);
  const size_t n = samples.size();
  for (size_t k = 0; k < knees; ++k) {
    // Knees between the 2nd and the 3rd-to-last size: each tier keeps two sizes.
    const double knee = sizes[2 + (k * (sizes.size() - 4)) / knees];
    std::vector<std::vector<double>> columns(3, std::vector<double>(n, 0.0));
    for (size_t i = 0; i < n; ++i) {
      const double b = samples[i].work.bytes;
      columns[0][i] = 1.0;
      columns[1][i] = std::min(b, knee);
      columns[2][i] = std::max(0.0, b - knee);
    }
    const std::vector<double> theta = SolveNonNegative(columns, samples, {true, true, true});
    if (theta[1] <= 0 || theta[2] <= 0) continue;
    ScoredFit fit;
    fit.c.fixed_s = theta[0];
    fit.c.s_per_byte = theta[1];
    fit.c.cache_bytes = knee;
    fit.c.s_per_byte_beyond_cache = theta[2];
    fit.objective = Objective(fit.c, samples);
    if (fit.objective < best.objective) best = fit;
  }
  return best;
}

ScoredFit FitSplitKv(const std::vector<Sample>& samples, double tolerance) {
  const size_t n = samples.size();
  double longest_pair_tokens = 0;
  for (const Sample& s : samples) {
    if (s.work.pair_bytes > 0 && s.work.cta_bytes_per_token > 0) {
      longest_pair_tokens =
          std::max(longest_pair_tokens, s.work.pair_bytes / s.work.cta_bytes_per_token);
    }
  }
  // Columns 2 (paired bytes past the ramp) and 8 (the ramp's) change with the ramp.
  std::vector<std::vector<double>> columns(9, std::vector<double>(n, 0.0));
  for (size_t i = 0; i < n; ++i) {
    const OpWork& w = samples[i].work;
    columns[0][i] = 1.0;
    columns[1][i] = w.bytes;
    columns[3][i] = w.single_bytes;
    columns[4][i] = w.waves;
    columns[5][i] = w.combine;
    columns[6][i] = w.combine_splits;
    columns[7][i] = w.rows;
  }
  ScoredFit best;
  // ramp_tokens 0: every paired byte at one rate.
  for (int64_t blocks = 0; blocks <= 16; ++blocks) {
    const double ramp_tokens = static_cast<double>(blocks * kFlashDecodeBlockTokens);
    if (blocks > 0 && ramp_tokens >= longest_pair_tokens) break;
    for (size_t i = 0; i < n; ++i) {
      const OpWork& w = samples[i].work;
      const double ramp = std::min(w.pair_bytes, ramp_tokens * w.cta_bytes_per_token);
      columns[2][i] = w.pair_bytes - ramp;
      columns[8][i] = ramp;
    }
    std::vector<bool> active(9, true);
    active[8] = blocks > 0;
    const std::vector<double> theta = SolveNonNegative(columns, samples, active);
    if (theta[2] <= 0 || theta[3] <= 0 || (blocks > 0 && theta[8] <= 0)) continue;
    ScoredFit fit;
    fit.c.additive = true;
    fit.c.fixed_s = theta[0];
    fit.c.s_per_byte = theta[1];
    fit.c.s_per_pair_byte = theta[2];
    fit.c.s_per_cta_byte = theta[3];
    fit.c.s_per_wave = theta[4];
    fit.c.combine_s = theta[5];
    fit.c.combine_s_per_split = theta[6];
    fit.c.s_per_row = theta[7];
    fit.c.pair_ramp_tokens = ramp_tokens;
    fit.c.s_per_pair_ramp_byte = theta[8];
    fit.objective = Objective(fit.c, samples);
    if (fit.objective < best.objective - (blocks > 0 ? tolerance : 0.0)) best = fit;
  }
  return best;
}

Coefficients FitSingleRow(const std::vector<Sample>& samples, const Coefficients& start,
                          int32_t min_sizes) {
  std::set<double> sizes;
  for (const Sample& s : samples) sizes.insert(s.work.bytes);
  if (sizes.size() >= static_cast<size_t>(min_sizes)) {
    return FitOp(OpForm::kStream, samples, start).c;
  }
  // min sum ((x b - t) / t)^2: x = sum(b / t) / sum((b / t)^2).
  double num = 0, den = 0;
  for (const Sample& s : samples) {
    const double q = s.work.bytes / s.t;
    num += q;
    den += q * q;
  }
  Coefficients c = start;
  c.fixed_s = 0;
  c.s_per_byte = den > 0 ? num / den : start.s_per_byte;
  return c;
}

}  // namespace servelab::calibration_internal
