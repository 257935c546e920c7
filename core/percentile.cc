#include "core/percentile.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>

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

namespace {

// The linear-method percentile of (value, count) pairs sorted by value, total count
// `total`: the pairs holding expanded indices lo and hi, found by walking the cumulative
// counts, and numpy's lerp between their values (`value_of` gives a pair's value).
template <class Pair, class ValueOf>
double WeightedPercentile(std::span<const Pair> sorted, int64_t total, double p, ValueOf value_of) {
  assert(total > 0);
  const Rank r = LinearRank(total, p);
  const Pair* a = &sorted.back();
  const Pair* b = a;
  int64_t seen = 0;  // expanded elements before the current pair
  bool found_a = false;
  for (const Pair& v : sorted) {
    const int64_t end = seen + v.count;  // expanded indices [seen, end) hold its value
    if (!found_a && r.lo < end) {
      a = &v;
      found_a = true;
    }
    if (r.hi < end) {
      b = &v;
      break;
    }
    seen = end;
  }
  return NumpyLerp(value_of(*a), value_of(*b), r.t);
}

}  // namespace

double WeightedPercentileOfSorted(std::span<const WeightedValue> sorted, double p) {
  int64_t total = 0;
  for (const WeightedValue& v : sorted) total += v.count;
  return WeightedPercentile(sorted, total, p, [](const WeightedValue& v) { return v.value; });
}

void PercentilesBySelection(std::span<double> values, std::span<const double> ps,
                            std::span<double> out) {
  assert(!values.empty() && ps.size() == out.size());
  const auto n = static_cast<int64_t>(values.size());
  // After a selection at rank k, [k, n) holds the n - k largest values: a later rank
  // k' >= k is selected within it (ascending ps then cost about n + n/2 + n/10, not 3n).
  auto from = values.begin();
  int64_t last_rank = -1;
  for (size_t i = 0; i < ps.size(); ++i) {
    const Rank r = LinearRank(n, ps[i]);
    if (r.lo < last_rank) from = values.begin();  // ps not ascending: the whole range
    last_rank = r.lo;
    const auto lo = values.begin() + r.lo;
    std::nth_element(from, lo, values.end());
    from = lo;
    // Everything after lo is >= it: the next order statistic is their minimum.
    const double a = *lo;
    const double b = r.hi == r.lo ? a : *std::min_element(lo + 1, values.end());
    out[i] = NumpyLerp(a, b, r.t);
  }
}

namespace {

// LSD radix sort of [begin, end) by ns >= 0, 11 bits a pass, skipping the passes whose
// digit every key shares (durations leave the high bits zero). Stable.
template <class Pair>
void RadixSortByNs(Pair* begin, Pair* end) {
  constexpr int kBits = 11;
  constexpr size_t kBuckets = size_t{1} << kBits;
  constexpr int kPasses = (63 + kBits - 1) / kBits;
  const auto n = static_cast<size_t>(end - begin);
  std::vector<size_t> counts(kPasses * kBuckets, 0);
  for (const Pair* p = begin; p != end; ++p) {
    auto key = static_cast<uint64_t>(p->ns);
    for (int pass = 0; pass < kPasses; ++pass, key >>= kBits) {
      ++counts[pass * kBuckets + (key & (kBuckets - 1))];
    }
  }
  std::vector<Pair> scratch(n);
  Pair* from = begin;
  Pair* to = scratch.data();
  for (int pass = 0; pass < kPasses; ++pass) {
    size_t* count = counts.data() + pass * kBuckets;
    if (std::find(count, count + kBuckets, n) != count + kBuckets) continue;
    size_t offset = 0;
    for (size_t b = 0; b < kBuckets; ++b) offset += std::exchange(count[b], offset);
    const int shift = pass * kBits;
    for (size_t i = 0; i < n; ++i) {
      to[count[(static_cast<uint64_t>(from[i].ns) >> shift) & (kBuckets - 1)]++] = from[i];
    }
    std::swap(from, to);
  }
  if (from != begin) std::copy(from, from + n, begin);
}

double Seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace

void WeightedTimeSample::Add(int64_t ns, int64_t count) {
  assert(ns >= 0);
  if (count <= 0) return;
  total_ += count;
  if (!pairs_.empty() && pairs_.back().ns == ns) {
    pairs_.back().count += count;
    return;
  }
  if (!pairs_.empty() && ns < pairs_.back().ns) sorted_ = false;
  pairs_.push_back({ns, count});
  if (pairs_.size() >= compact_at_) {
    Compact();
    compact_at_ = std::max(compact_at_, 2 * pairs_.size());
  }
}

void WeightedTimeSample::Compact() {
  if (!sorted_) {
    // The prefix is sorted already: sort the tail added since, merge the two runs, then
    // merge equal neighbours.
    const auto middle = pairs_.begin() + static_cast<std::ptrdiff_t>(merged_);
    RadixSortByNs(pairs_.data() + merged_, pairs_.data() + pairs_.size());
    std::inplace_merge(pairs_.begin(), middle, pairs_.end(),
                       [](const Pair& x, const Pair& y) { return x.ns < y.ns; });
    size_t out = 0;
    for (const Pair& p : pairs_) {
      if (out > 0 && pairs_[out - 1].ns == p.ns) {
        pairs_[out - 1].count += p.count;
      } else {
        pairs_[out++] = p;
      }
    }
    pairs_.resize(out);
    sorted_ = true;
  }
  merged_ = pairs_.size();
}

size_t WeightedTimeSample::NumDistinct() {
  Compact();
  return pairs_.size();
}

double WeightedTimeSample::Percentile(double p) {
  Compact();
  return WeightedPercentile(std::span<const Pair>(pairs_), total_, p,
                            [](const Pair& v) { return Seconds(v.ns); });
}

double WeightedTimeSample::Mean() {
  if (total_ == 0) return 0;
  Compact();
  double sum = 0;
  size_t i = 0;
  while (i < pairs_.size()) {
    const double value = Seconds(pairs_[i].ns);
    int64_t count = 0;
    for (; i < pairs_.size() && Seconds(pairs_[i].ns) == value; ++i) count += pairs_[i].count;
    sum += value * static_cast<double>(count);
  }
  return sum / static_cast<double>(total_);
}

double WeightedTimeSample::Max() {
  if (total_ == 0) return 0;
  Compact();
  return Seconds(pairs_.back().ns);
}

}  // namespace servelab
