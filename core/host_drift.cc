#include "core/host_drift.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/percentile.h"
#include "core/status.h"

namespace servelab {

std::vector<double> HostSpeed(std::span<const int32_t> rows, std::span<const double> seconds, int32_t window) {
  SERVELAB_CHECK(rows.size() == seconds.size());
  SERVELAB_CHECK(window >= 3 && window <= kMaxDriftWindow);
  const auto usable = [](double s) { return std::isfinite(s) && s > 0; };
  std::unordered_map<int32_t, std::vector<double>> by_row;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (usable(seconds[i])) by_row[rows[i]].push_back(seconds[i]);
  }
  std::unordered_map<int32_t, double> median;
  for (auto& [row, values] : by_row) {
    std::sort(values.begin(), values.end());
    median[row] = PercentileOfSorted(values, 50);
  }
  // Each timing's ratio to its row's median; NaN where it says nothing.
  const size_t n = rows.size();
  std::vector<double> ratio(n, std::nan(""));
  for (size_t i = 0; i < n; ++i) {
    if (!usable(seconds[i])) continue;
    const double m = median.at(rows[i]);
    if (usable(m)) ratio[i] = seconds[i] / m;
  }
  const size_t others = static_cast<size_t>(window) - 1;
  const size_t before = others / 2;
  std::vector<double> factor(n, 1.0);
  std::vector<double> around;
  around.reserve(others);
  for (size_t i = 0; i < n; ++i) {
    // [lo, lo + others] holds i and `others` more, as centred on i as the ends allow.
    size_t lo = i >= before ? i - before : 0;
    if (lo + others >= n) lo = n > others ? n - 1 - others : 0;
    const size_t hi = std::min(n - 1, lo + others);
    around.clear();
    for (size_t j = lo; j <= hi; ++j) {
      if (j != i && !std::isnan(ratio[j])) around.push_back(ratio[j]);
    }
    if (around.empty()) continue;
    std::sort(around.begin(), around.end());
    factor[i] = PercentileOfSorted(around, 50);
  }
  return factor;
}

std::vector<double> DivideByHostSpeed(std::span<const LoggedRun> runs, int32_t window) {
  std::vector<int32_t> rows;
  std::vector<double> seconds;
  rows.reserve(runs.size());
  seconds.reserve(runs.size());
  for (const LoggedRun& run : runs) {
    rows.push_back(run.row);
    seconds.push_back(run.seconds);
  }
  std::vector<double> factors = HostSpeed(rows, seconds, window);
  for (size_t i = 0; i < runs.size(); ++i) {
    for (const SampleRef& sample : runs[i].samples) {
      SERVELAB_CHECK(sample.values != nullptr && sample.index < sample.values->size());
      (*sample.values)[sample.index] /= factors[i];
    }
  }
  return factors;
}

}  // namespace servelab
