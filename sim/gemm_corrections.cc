#include "sim/gemm_corrections.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/status.h"
#include "core/percentile.h"

namespace servelab {
namespace {

// Linear between (m0, f0) and (m1, f1) at m, m0 < m1.
double Between(double m, double m0, double f0, double m1, double f1) {
  return f0 + (f1 - f0) * (m - m0) / (m1 - m0);
}

}  // namespace

double GemmCorrection::At(double m) const {
  SERVELAB_CHECK(!rows.empty());
  if (m <= static_cast<double>(rows.front())) return factor.front();
  if (m >= static_cast<double>(rows.back())) return factor.back();
  // The first measured row above m: m lies between it and the one before.
  const auto above = std::upper_bound(rows.begin(), rows.end(), m,
                                      [](double v, int64_t r) { return v < static_cast<double>(r); });
  const size_t i = static_cast<size_t>(above - rows.begin());
  return Between(m, static_cast<double>(rows[i - 1]), factor[i - 1], static_cast<double>(rows[i]),
                 factor[i]);
}

double GemmCorrection::LeaveOneOut(double m) const {
  SERVELAB_CHECK(rows.size() >= 2);
  const auto it = std::lower_bound(rows.begin(), rows.end(), m,
                                   [](int64_t r, double v) { return static_cast<double>(r) < v; });
  if (it == rows.end() || static_cast<double>(*it) != m) return At(m);
  const size_t i = static_cast<size_t>(it - rows.begin());
  if (i == 0) return factor[1];
  if (i + 1 == rows.size()) return factor[i - 1];
  return Between(m, static_cast<double>(rows[i - 1]), factor[i - 1],
                 static_cast<double>(rows[i + 1]), factor[i + 1]);
}

std::vector<GemmCorrection> GemmCorrectionsOf(std::vector<GemmRatio> ratios, int32_t min_rows) {
  auto key = [](const GemmRatio& r) { return std::tie(r.op, r.k, r.n, r.rows); };
  std::sort(ratios.begin(), ratios.end(), [&](const GemmRatio& a, const GemmRatio& b) {
    return key(a) < key(b) || (key(a) == key(b) && a.ratio < b.ratio);
  });
  std::vector<GemmCorrection> out;
  std::vector<double> same_rows;
  for (size_t i = 0; i < ratios.size();) {
    const size_t begin = i;
    const GemmRatio& first = ratios[i];
    GemmCorrection c;
    c.op = first.op;
    c.k = first.k;
    c.n = first.n;
    for (; i < ratios.size() && ratios[i].op == c.op && ratios[i].k == c.k && ratios[i].n == c.n;) {
      const int64_t m = ratios[i].rows;
      same_rows.clear();
      for (; i < ratios.size() && ratios[i].op == c.op && ratios[i].k == c.k &&
             ratios[i].n == c.n && ratios[i].rows == m;
           ++i) {
        same_rows.push_back(ratios[i].ratio);  // sorted: the key, then the ratio
      }
      c.rows.push_back(m);
      // To 1e-6 (a ratio's noise is far above it): MODEL.yaml then holds it exactly.
      c.factor.push_back(std::round(PercentileOfSorted(same_rows, 50) * 1e6) / 1e6);
    }
    if (c.rows.size() < static_cast<size_t>(std::max(min_rows, 2))) continue;
    // A ratio beyond 1e-3 .. 1e3 is a broken measurement, not a kernel's step (and past
    // what MODEL.yaml reads back).
    if (std::any_of(c.factor.begin(), c.factor.end(), [](double f) { return f < 1e-3 || f > 1e3; })) {
      continue;
    }
    // Kept when it predicts the shape's rows from their neighbours better than the form
    // does: noise alone, interpolated, would predict them worse.
    double form_error = 0, loo_error = 0;
    for (size_t j = begin; j < i; ++j) {
      form_error += std::abs(1.0 / ratios[j].ratio - 1.0);
      loo_error += std::abs(c.LeaveOneOut(static_cast<double>(ratios[j].rows)) / ratios[j].ratio - 1.0);
    }
    if (loo_error < form_error) out.push_back(std::move(c));
  }
  return out;
}

const GemmCorrection* FindGemmCorrection(std::span<const GemmCorrection> corrections, Op op,
                                         double k, double n) {
  for (const GemmCorrection& c : corrections) {
    if (c.op == op && static_cast<double>(c.k) == k && static_cast<double>(c.n) == n) return &c;
  }
  return nullptr;
}

}  // namespace servelab
