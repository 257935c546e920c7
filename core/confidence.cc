#include "core/confidence.h"

#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <vector>

#include "core/status.h"

namespace servelab {

Estimate MeanWithInterval(std::span<const double> values, double level) {
  SERVELAB_CHECK(level > 0 && level < 1);
  Estimate e;
  e.n = static_cast<int64_t>(values.size());
  if (e.n == 0) return e;
  double sum = 0;
  for (const double v : values) sum += v;
  e.mean = sum / static_cast<double>(e.n);
  if (e.n < 2) return e;
  double squares = 0;
  for (const double v : values) squares += (v - e.mean) * (v - e.mean);
  const double sd = std::sqrt(squares / static_cast<double>(e.n - 1));
  const boost::math::students_t t(static_cast<double>(e.n - 1));
  e.half_width = boost::math::quantile(t, 1 - (1 - level) / 2) * sd / std::sqrt(static_cast<double>(e.n));
  return e;
}

Estimate PairedDifference(std::span<const double> a, std::span<const double> b, double level) {
  SERVELAB_CHECK(a.size() == b.size());
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = b[i] - a[i];
  return MeanWithInterval(d, level);
}

}  // namespace servelab
