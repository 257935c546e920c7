#include "core/percentile.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace servelab {
namespace {

// numpy's virtual index for the 'linear' method and its split into floor + fraction.
struct Rank {
  int64_t lo = 0;  // index of the lower neighbour, in [0, n-1]
  int64_t hi = 0;  // lo + 1, clipped to n - 1
  double t = 0;    // fraction in [0, 1)
};

Rank LinearRank(int64_t n, double p) {
  const double q = p / 100.0;
  const double index = static_cast<double>(n - 1) * q;
  const double floor_index = std::floor(index);
  Rank rank;
  rank.lo = std::clamp<int64_t>(static_cast<int64_t>(floor_index), 0, n - 1);
  rank.hi = std::min<int64_t>(rank.lo + 1, n - 1);
  rank.t = index - floor_index;
  return rank;
}

}  // namespace

double NumpyLerp(double a, double b, double t) {
  const double diff = b - a;
  return t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
}

double PercentileOfSorted(std::span<const double> sorted, double p) {
  assert(!sorted.empty());
  const Rank r = LinearRank(static_cast<int64_t>(sorted.size()), p);
  return NumpyLerp(sorted[r.lo], sorted[r.hi], r.t);
}

void SortAndMerge(std::vector<WeightedValue>& values) {
  std::sort(values.begin(), values.end(),
            [](const WeightedValue& x, const WeightedValue& y) { return x.value < y.value; });
  size_t out = 0;
  for (const WeightedValue& v : values) {
    if (v.count <= 0) continue;
    if (out > 0 && values[out - 1].value == v.value) {
      values[out - 1].count += v.count;
    } else {
      values[out++] = v;
    }
  }
  values.resize(out);
}

double WeightedPercentileOfSorted(std::span<const WeightedValue> sorted, double p) {
  int64_t total = 0;
  for (const WeightedValue& v : sorted) total += v.count;
  assert(total > 0);
  const Rank r = LinearRank(total, p);
  // Walk the cumulative counts to the pairs holding expanded indices lo and hi.
  double a = sorted.back().value;
  double b = a;
  int64_t seen = 0;  // expanded elements before the current pair
  bool found_a = false;
  for (const WeightedValue& v : sorted) {
    const int64_t end = seen + v.count;  // expanded indices [seen, end) hold v.value
    if (!found_a && r.lo < end) {
      a = v.value;
      found_a = true;
    }
    if (r.hi < end) {
      b = v.value;
      break;
    }
    seen = end;
  }
  return NumpyLerp(a, b, r.t);
}

void WeightedSample::Add(double value, int64_t count) {
  if (count <= 0) return;
  total_ += count;
  if (!values_.empty() && values_.back().value == value) {
    values_.back().count += count;
    return;
  }
  if (!values_.empty() && value < values_.back().value) sorted_ = false;
  values_.push_back({value, count});
  if (values_.size() >= compact_at_) {
    Compact();
    compact_at_ = std::max(compact_at_, 2 * values_.size());
  }
}

void WeightedSample::Compact() {
  if (!sorted_) {
    // The prefix is sorted already: sort the tail added since, merge the two runs, then
    // merge equal neighbours (O(tail log tail + size), not a sort of everything).
    const auto by_value = [](const WeightedValue& x, const WeightedValue& y) {
      return x.value < y.value;
    };
    const auto middle = values_.begin() + static_cast<std::ptrdiff_t>(merged_);
    std::sort(middle, values_.end(), by_value);
    std::inplace_merge(values_.begin(), middle, values_.end(), by_value);
    size_t out = 0;
    for (const WeightedValue& v : values_) {
      if (out > 0 && values_[out - 1].value == v.value) {
        values_[out - 1].count += v.count;
      } else {
        values_[out++] = v;
      }
    }
    values_.resize(out);
    sorted_ = true;
  }
  // Ascending; equal neighbours were merged here or by Add.
  merged_ = values_.size();
}

std::span<const WeightedValue> WeightedSample::Sorted() {
  Compact();
  return values_;
}

double WeightedSample::Percentile(double p) { return WeightedPercentileOfSorted(Sorted(), p); }

double WeightedSample::Mean() {
  if (total_ == 0) return 0;
  double sum = 0;
  for (const WeightedValue& v : Sorted()) sum += v.value * static_cast<double>(v.count);
  return sum / static_cast<double>(total_);
}

double WeightedSample::Max() { return total_ == 0 ? 0 : Sorted().back().value; }

}  // namespace servelab
