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

void PercentilesBySelection(std::span<double> values, std::span<const double> ps,
                            std::span<double> out) {
  assert(!values.empty() && ps.size() == out.size());
  const auto n = static_cast<int64_t>(values.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    const Rank r = LinearRank(n, ps[i]);
    const auto lo = values.begin() + r.lo;
    std::nth_element(values.begin(), lo, values.end());
    // Everything after lo is >= it: the next order statistic is their minimum.
    const double a = *lo;
    const double b = r.hi == r.lo ? a : *std::min_element(lo + 1, values.end());
    out[i] = NumpyLerp(a, b, r.t);
  }
}

namespace {

// LSD radix sort of (ns, count) pairs by ns >= 0, 11 bits a pass, skipping the passes
// whose digit every key shares (durations leave the high bits zero). Stable.
template <class Pair>
void RadixSortByNs(std::vector<Pair>& pairs, std::vector<Pair>& scratch) {
  constexpr int kBits = 11;
  constexpr size_t kBuckets = size_t{1} << kBits;
  constexpr int kPasses = (63 + kBits - 1) / kBits;
  std::vector<size_t> counts(kPasses * kBuckets, 0);
  for (const Pair& p : pairs) {
    auto key = static_cast<uint64_t>(p.ns);
    for (int pass = 0; pass < kPasses; ++pass, key >>= kBits) ++counts[pass * kBuckets + (key & (kBuckets - 1))];
  }
  scratch.resize(pairs.size());
  for (int pass = 0; pass < kPasses; ++pass) {
    size_t* count = counts.data() + pass * kBuckets;
    if (std::find(count, count + kBuckets, pairs.size()) != count + kBuckets) continue;
    size_t offset = 0;
    for (size_t b = 0; b < kBuckets; ++b) offset += std::exchange(count[b], offset);
    const int shift = pass * kBits;
    for (const Pair& p : pairs) {
      scratch[count[(static_cast<uint64_t>(p.ns) >> shift) & (kBuckets - 1)]++] = p;
    }
    pairs.swap(scratch);
  }
}

}  // namespace

void WeightedTimeSample::Add(int64_t ns, int64_t count) {
  assert(ns >= 0);
  if (count <= 0) return;
  total_ += count;
  valid_ = false;
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
    std::vector<Pair> tail(pairs_.begin() + static_cast<std::ptrdiff_t>(merged_), pairs_.end());
    RadixSortByNs(tail, scratch_);
    pairs_.resize(merged_);
    const size_t prefix = pairs_.size();
    pairs_.insert(pairs_.end(), tail.begin(), tail.end());
    std::inplace_merge(pairs_.begin(), pairs_.begin() + static_cast<std::ptrdiff_t>(prefix),
                       pairs_.end(), [](const Pair& x, const Pair& y) { return x.ns < y.ns; });
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

std::span<const WeightedValue> WeightedTimeSample::Sorted() {
  if (valid_) return seconds_;
  Compact();
  // ns -> s is monotone, so the seconds come out ascending; distinct ns past 2^52 ns can
  // round to one double, so equal seconds merge once more.
  seconds_.clear();
  for (const Pair& p : pairs_) {
    const double s = static_cast<double>(p.ns) / 1e9;
    if (!seconds_.empty() && seconds_.back().value == s) {
      seconds_.back().count += p.count;
    } else {
      seconds_.push_back({s, p.count});
    }
  }
  valid_ = true;
  return seconds_;
}

double WeightedTimeSample::Percentile(double p) { return WeightedPercentileOfSorted(Sorted(), p); }

double WeightedTimeSample::Mean() {
  if (total_ == 0) return 0;
  double sum = 0;
  for (const WeightedValue& v : Sorted()) sum += v.value * static_cast<double>(v.count);
  return sum / static_cast<double>(total_);
}

double WeightedTimeSample::Max() { return total_ == 0 ? 0 : Sorted().back().value; }

}  // namespace servelab
