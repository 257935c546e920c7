#include "sim/calibration.h"

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include "core/percentile.h"
#include "driver/gpu_catalog.h"
#include "sim/fit_evaluation.h"
#include "sim/nonnegative_least_squares.h"

namespace servelab {
namespace {

struct Sample {
  double t = 0;  // seconds
  OpWork work;
};

// The fit works in OpCoefficients (seconds per unit of work) and predicts with
// OpSeconds, the calibrated cost model's own formula.
using Coefficients = OpCoefficients;

double MemoryTerm(const Coefficients& c, const OpWork& w) { return c.MemorySeconds(w.bytes); }
double ComputeTerm(const Coefficients& c, const OpWork& w) {
  return w.flops * c.s_per_flop + w.causal_flops * c.s_per_causal_flop;
}

double Objective(const Coefficients& c, const std::vector<Sample>& samples) {
  double sum = 0;
  for (const Sample& s : samples) {
    const double r = (OpSeconds(c, s.work) - s.t) / s.t;
    sum += r * r;
  }
  return sum;
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
constexpr size_t kRowTerms = 3;
std::array<double, kRowTerms> RowTerms(const OpWork& w) {
  return {w.rows, w.experts, w.single_row_expert_bytes};
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
}

struct FitResult {
  Coefficients c;
  bool memory_fitted = false, compute_fitted = false;
};

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

// The alternation finds a local optimum of the max(): it is started from the datasheet
// roofline's assignment and from splits of the rows by arithmetic intensity (FLOPs per
// byte; the max() puts every row below some intensity on the memory term), up to 64
// evenly spaced ones, and the best result is kept.
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

// The additive form: one non-negative least squares over every term.
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

// Coefficients with their objective (infinity: no fit).
struct ScoredFit {
  Coefficients c;
  double objective = std::numeric_limits<double>::infinity();
};

// The two-tier stream form for knees at up to 32 of the measured sizes: fixed + bytes
// below the knee at one rate + bytes above it at another. Returns the best with its
// objective (infinity when none fits).

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

// The split_kv form (op_model.h): fixed + bytes + the grid's CTA bytes in a paired first
// wave and in single ones + waves + the combine kernel + per sequence (row), one
// non-negative least squares; then the same with the paired CTAs' first tokens at a rate
// of their own, for ramps of 1 to 16 whole 128-token blocks shorter than the longest
// paired CTA (the ramp and the rest told apart), kept when better by more than
// `tolerance`. Infinite objective unless both CTA rates are identified (the rows have
// waves of each kind).
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

// A stream fit (fixed + bytes) of a GEMM's single-row measurements; with fewer than
// `min_sizes` distinct sizes the fixed cost cannot be told from the bytes' and the fit
// is bytes alone.
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

}  // namespace

OpShape ProfileRowShape(const ProfileRow& row) {
  OpShape shape;
  shape.model = row.shape;
  shape.tensor_parallel = row.tp;
  return shape;
}

StatusOr<GpuSpec> DeviceSpec(const std::string& device) {
  if (device == "cpu") {
    GpuSpec cpu;
    cpu.name = "cpu";
    cpu.mem_bandwidth_gbps = 1.0;
    cpu.bf16_tflops = 1e-3;
    cpu.fp32_tflops = 1e-3;
    cpu.interconnect_gbps = 1.0;
    return cpu;
  }
  auto gpu = FindGpu(device);
  if (!gpu.ok()) return InvalidArgument("device '" + device + "': " + gpu.status().message());
  return *gpu;
}

OpWork ProfileRowWork(Op op, const ProfileRow& row, const GpuSpec& gpu,
                      std::span<const CountedRouting> routing) {
  const OpShape shape = ProfileRowShape(row);
  if (op == Op::kMoeMlp && row.experts_run > 0) {  // the routing the engine counted
    const double tokens = static_cast<double>(row.tokens);
    return MoeMlpWork(shape, tokens, 1, tokens * shape.model.num_experts_per_tok, row.experts_run,
                      row.single_row_experts);
  }
  if (op == Op::kMoeMlp && (row.batch == 1 || row.batch == row.tokens)) {
    for (const CountedRouting& counted : routing) {
      if (!counted.Matches(row.shape)) continue;
      const ExpertRouting model(counted.num_experts, counted.experts_per_token, 1, counted.Options());
      return MoeMlpWork(shape, model.Sequences(row.batch, row.tokens / row.batch), model);
    }
  }
  OpWork work = ProfiledWork(op, shape, static_cast<double>(row.tokens),
                             static_cast<double>(row.batch), static_cast<double>(row.context));
  if (op == Op::kAttentionDecode) {
    AddSplitKvWork(work, shape, gpu.sm_count, row.kv_capacity, row.batch,
                   [&](int64_t) { return row.context + 1; });
  }
  return work;
}

std::string_view OpFit::FormName() const {
  if (InfoOf(op).form == OpForm::kStream) return "stream";
  if (split_kv) return "split_kv";
  return additive ? "additive" : "roofline";
}

OpCoefficients OpFit::On(const GpuSpec& gpu, const OpShape& shape) const {
  const OpPeaks peaks = PeaksOf(op, gpu, shape);
  OpCoefficients c;
  c.fixed_s = fixed_us * 1e-6;
  c.additive = additive;
  c.row_tile = row_tile;
  if (cache_bytes > 0 && beyond_cache_memory_efficiency > 0) {
    c.cache_bytes = cache_bytes;
    c.s_per_byte_beyond_cache = 1.0 / (peaks.bytes_per_s * beyond_cache_memory_efficiency);
  }
  c.s_per_byte = memory_efficiency > 0 ? 1.0 / (peaks.bytes_per_s * memory_efficiency) : 0;
  if (InfoOf(op).form == OpForm::kRoofline) {
    if (compute_efficiency > 0) c.s_per_flop = 1.0 / (peaks.flops_per_s * compute_efficiency);
    if (causal_efficiency > 0) c.s_per_causal_flop = 1.0 / (peaks.flops_per_s * causal_efficiency);
    c.s_per_row = per_row_us * 1e-6;
  }
  if (split_kv && gpu.sm_count > 0) {
    // Efficiencies of one SM's share of the bandwidth: one CTA's rate alone, two CTAs'
    // together.
    const double sm_bytes_per_s = peaks.bytes_per_s / gpu.sm_count;
    c.s_per_cta_byte = 1.0 / (sm_bytes_per_s * cta_memory_efficiency);
    c.s_per_pair_byte = 2.0 / (sm_bytes_per_s * pair_memory_efficiency);
    if (pair_ramp_tokens > 0 && pair_ramp_memory_efficiency > 0) {
      c.pair_ramp_tokens = static_cast<double>(pair_ramp_tokens);
      c.s_per_pair_ramp_byte = 2.0 / (sm_bytes_per_s * pair_ramp_memory_efficiency);
    }
    c.s_per_wave = wave_us * 1e-6;
    c.combine_s = combine_us * 1e-6;
    c.combine_s_per_split = combine_per_split_us * 1e-6;
  }
  c.s_per_expert = per_expert_us * 1e-6;
  if (single_row_expert_memory_efficiency > 0) {
    c.s_per_single_row_expert_byte = 1.0 / (peaks.bytes_per_s * single_row_expert_memory_efficiency);
  }
  if (single_row_fitted) {
    c.has_single_row = true;
    c.single_row_fixed_s = single_row_fixed_us * 1e-6;
    c.single_row_s_per_byte = 1.0 / (peaks.bytes_per_s * single_row_memory_efficiency);
  }
  return c;
}

OpFit RooflineFit(Op op, const RooflineOptions& roofline) {
  OpFit f;
  f.op = op;
  const bool attention = op == Op::kAttentionDecode || op == Op::kAttentionPrefill;
  const bool link = op == Op::kAllReduce;
  f.memory_efficiency = link ? roofline.interconnect_efficiency : roofline.memory_efficiency;
  f.compute_efficiency = attention ? roofline.attention_efficiency : roofline.gemm_efficiency;
  f.causal_efficiency = f.compute_efficiency;
  f.fixed_us = link ? roofline.allreduce_latency_us : 0.0;
  return f;
}

StatusOr<CalibratedModel> FitProfiles(const std::vector<ProfileTable>& tables,
                                      const FitOptions& options) {
  CalibratedModel model;
  std::map<Op, std::vector<const ProfileRow*>> by_op;
  std::vector<const ProfileRow*> steps;
  for (const ProfileTable& table : tables) {
    model.fitted_from.push_back(table.path);
    for (const ProfileRow& row : table.rows) {
      if (model.device.empty()) model.device = row.device;
      if (row.device != model.device) {
        return InvalidArgument(table.path + ":" + std::to_string(row.line) + ": device '" +
                               row.device + "' differs from '" + model.device +
                               "': fit one device at a time");
      }
      if (row.op == "step") {  // whole steps: for the step overhead (below)
        if (row.shape.num_hidden_layers > 0 && row.median_ms > 0) steps.push_back(&row);
        continue;
      }
      if (row.median_ms <= 0) continue;  // no relative error to weigh
      by_op[*OpByName(row.op)].push_back(&row);
    }
  }
  auto gpu = DeviceSpec(model.device);
  if (!gpu.ok()) return gpu.status();
  model.routing = CountedRoutingOf(tables, options.routing_skew);
  for (const auto& [op, rows] : by_op) {
    const OpInfo& info = InfoOf(op);
    // moe_mlp also has its cost per expert run and its one-row experts' rate.
    const int32_t coefficients = (info.form == OpForm::kRoofline ? 3 : 2) + (op == Op::kMoeMlp ? 2 : 0);
    std::set<double> sizes;
    std::vector<Sample> samples, single_row;
    OpShape first = ProfileRowShape(*rows.front());
    for (const ProfileRow* r : rows) {
      Sample s;
      s.t = r->median_ms * 1e-3;
      s.work = ProfileRowWork(op, *r, *gpu, model.routing);
      (s.work.single_row ? single_row : samples).push_back(s);
    }
    const auto needed = static_cast<size_t>(coefficients * options.min_points_per_coefficient);
    if (single_row.size() < static_cast<size_t>(options.min_points_per_coefficient) ||
        samples.size() < needed) {
      samples.insert(samples.end(), single_row.begin(), single_row.end());
      single_row.clear();
    }
    for (const Sample& s : samples) sizes.insert(s.work.bytes);
    if (samples.size() < needed || sizes.size() < static_cast<size_t>(options.min_distinct_sizes)) {
      return InvalidArgument("op " + std::string(info.name) + ": " +
                             std::to_string(samples.size()) + " measurements of " +
                             std::to_string(sizes.size()) + " distinct sizes; fitting its " +
                             std::to_string(coefficients) + " coefficients needs at least " +
                             std::to_string(needed) + " measurements of " +
                             std::to_string(options.min_distinct_sizes) +
                             " sizes: measure more sizes or leave the op to the roofline");
    }
    const OpFit roofline = RooflineFit(op, options.defaults);
    const double memory_default = roofline.memory_efficiency;
    const double compute_default = roofline.compute_efficiency;
    const OpPeaks peaks = PeaksOf(op, *gpu, first);
    Coefficients start;
    start.fixed_s = roofline.fixed_us * 1e-6;
    start.s_per_byte = 1.0 / (peaks.bytes_per_s * memory_default);
    start.s_per_flop =
        info.form == OpForm::kRoofline ? 1.0 / (peaks.flops_per_s * compute_default) : 0.0;
    start.s_per_causal_flop = start.s_per_flop;
    // A tie (within rounding: 1e-9 of squared relative error per row) keeps the simpler
    // model: the max() form, the smaller tile.
    const double tolerance = 1e-9 * static_cast<double>(samples.size());
    auto fit_form = [&](const std::vector<Sample>& rows_fitted) {
      FitResult best = FitOp(info.form, rows_fitted, start);
      if (info.form == OpForm::kRoofline) {
        const FitResult additive = FitAdditive(rows_fitted, start);
        if (Objective(additive.c, rows_fitted) < Objective(best.c, rows_fitted) - tolerance) {
          best = additive;
        }
      }
      return best;
    };
    FitResult fit = fit_form(samples);
    if (info.form == OpForm::kStream) {
      const ScoredFit two_tier = FitCached(samples);
      if (two_tier.objective < Objective(fit.c, samples) - tolerance) {
        fit = FitResult{two_tier.c, true, false};
      }
    }
    int32_t row_tile = 1;
    if (IsGemm(op)) {
      double best_objective = Objective(fit.c, samples);
      for (int32_t tile = 2; tile <= 128; tile *= 2) {
        std::vector<Sample> tiled = samples;
        for (Sample& t : tiled) t.work = TileQuantized(t.work, tile);
        const FitResult candidate = fit_form(tiled);
        const double objective = Objective(candidate.c, tiled);
        if (objective < best_objective - tolerance) {
          best_objective = objective;
          fit = candidate;
          row_tile = tile;
        }
      }
    }
    // The split-KV form: fixed, bytes, the grid's CTA bytes in a paired first wave and in
    // single ones, its waves and its combine kernel, one non-negative least squares; kept when
    // both CTA rates are identified (the rows have waves of each kind) and it explains the
    // rows better. Only for rows FlashAttention ran: servelab's own CUDA decode partitions
    // by a rule of its own (kernels/cuda/kernels.h), which this form does not count.
    bool split_kv = false;
    const auto flash_attention = [](const ProfileRow* r) {
      return r->attention_backend.find("FLASH_ATTENTION") != std::string::npos;
    };
    if (op == Op::kAttentionDecode && gpu->sm_count > 0 &&
        std::all_of(rows.begin(), rows.end(), flash_attention)) {
      const ScoredFit grid = FitSplitKv(samples, tolerance);
      if (grid.objective < Objective(fit.c, samples) - tolerance) {
        fit = FitResult{grid.c, grid.c.s_per_byte > 0, false};
        split_kv = true;
      }
    }
    OpFit f;
    f.op = op;
    f.row_tile = row_tile;
    if (split_kv) {
      f.split_kv = true;
      const double sm_bytes_per_s = peaks.bytes_per_s / gpu->sm_count;
      f.cta_memory_efficiency = 1.0 / (fit.c.s_per_cta_byte * sm_bytes_per_s);
      f.pair_memory_efficiency = 2.0 / (fit.c.s_per_pair_byte * sm_bytes_per_s);
      if (fit.c.pair_ramp_tokens > 0) {
        f.pair_ramp_tokens = static_cast<int64_t>(fit.c.pair_ramp_tokens);
        f.pair_ramp_memory_efficiency = 2.0 / (fit.c.s_per_pair_ramp_byte * sm_bytes_per_s);
      }
      f.wave_us = fit.c.s_per_wave * 1e6;
      f.combine_us = fit.c.combine_s * 1e6;
      f.combine_per_split_us = fit.c.combine_s_per_split * 1e6;
    }
    if (fit.c.cache_bytes > 0) {
      f.cache_bytes = fit.c.cache_bytes;
      f.beyond_cache_memory_efficiency = 1.0 / (fit.c.s_per_byte_beyond_cache * peaks.bytes_per_s);
    }
    f.points = static_cast<int64_t>(samples.size());
    if (IsGemm(op)) {
      std::set<double> weights;
      for (const ProfileRow* r : rows) weights.insert(RowsWork(op, ProfileRowShape(*r), 0).bytes);
      f.weight_sizes = static_cast<int64_t>(weights.size());
    }
    if (!single_row.empty()) {
      const Coefficients gemv =
          FitSingleRow(single_row, start, options.min_distinct_sizes);
      f.single_row_fitted = true;
      f.single_row_fixed_us = gemv.fixed_s * 1e6;
      f.single_row_memory_efficiency = 1.0 / (gemv.s_per_byte * peaks.bytes_per_s);
      f.single_row_points = static_cast<int64_t>(single_row.size());
    }
    f.fixed_us = fit.c.fixed_s * 1e6;
    f.additive = fit.c.additive;
    const double unbounded = std::numeric_limits<double>::infinity();
    f.memory_efficiency = fit.memory_fitted ? 1.0 / (fit.c.s_per_byte * peaks.bytes_per_s)
                          : f.additive      ? unbounded
                                            : memory_default;
    f.memory_fitted = fit.memory_fitted || f.additive;
    if (info.form == OpForm::kRoofline) {
      f.compute_efficiency = fit.compute_fitted ? 1.0 / (fit.c.s_per_flop * peaks.flops_per_s)
                             : f.additive       ? unbounded
                                                : compute_default;
      f.compute_fitted = fit.compute_fitted || f.additive;
      if (op == Op::kAttentionPrefill) {
        const double yc = fit.c.s_per_causal_flop;
        f.causal_efficiency = yc > 0       ? 1.0 / (yc * peaks.flops_per_s)
                              : f.additive ? unbounded
                                           : compute_default;
      }
      f.per_row_us = fit.c.s_per_row * 1e6;  // attention only (other ops have no rows)
    }
    f.per_expert_us = fit.c.s_per_expert * 1e6;  // moe_mlp only (other ops run no experts)
    if (fit.c.s_per_single_row_expert_byte > 0) {
      f.single_row_expert_memory_efficiency =
          1.0 / (fit.c.s_per_single_row_expert_byte * peaks.bytes_per_s);
    }
    model.ops[op] = f;
  }
  if (model.ops.empty()) return InvalidArgument("no op measurements to fit");
  if (options.gemm_corrections) {
    std::vector<GemmRatio> ratios;
    for (const auto& [op, rows] : by_op) {
      if (!IsGemm(op)) continue;
      for (const ProfileRow* r : rows) {
        const OpWork w = ProfileRowWork(op, *r, *gpu, model.routing);
        // One-row products with a matrix-vector fit of their own: another kernel, whose
        // form is fitted on its own rows (and not interpolated with the GEMM's).
        if (w.single_row && model.ops.at(op).single_row_fitted) continue;
        // A shape split unevenly over TP (vocab / tp) is no whole matrix to key.
        if (w.gemm_k != std::floor(w.gemm_k) || w.gemm_n != std::floor(w.gemm_n)) continue;
        const double fitted = PredictRow(model, *gpu, op, *r, GemmCorrectionUse::kNone);
        if (fitted <= 0) continue;
        ratios.push_back(GemmRatio{op, std::llround(w.gemm_k), std::llround(w.gemm_n),
                                   std::llround(w.gemm_rows), r->median_ms * 1e-3 / fitted});
      }
    }
    model.gemm_corrections = GemmCorrectionsOf(std::move(ratios), options.min_distinct_sizes);
  }
  std::vector<double> residuals;
  for (const ProfileRow* row : steps) {
    residuals.push_back(row->median_ms * 1e-3 - PredictOps(model, *gpu, *row));
  }
  if (!residuals.empty()) {
    std::sort(residuals.begin(), residuals.end());
    model.has_step_overhead = true;
    model.step_overhead_us = std::max(0.0, PercentileOfSorted(residuals, 50)) * 1e6;
  }
  return model;
}

}  // namespace servelab
