#pragma once
// Percentiles exactly as numpy.percentile(x, p) with its default 'linear' method
// (what vLLM's benchmark reports): with x sorted ascending and n = len(x),
//   i = (n - 1) * p / 100,  result = lerp(x[floor(i)], x[floor(i) + 1], i - floor(i)),
// using numpy's lerp, so results agree with numpy bit for bit on the same doubles.
//
// Two sample shapes:
//   - plain: a vector of doubles (one per request);
//   - weighted: (value, count) pairs standing for `count` copies of `value`. The
//     inter-token latency has one value per output token (hundreds of millions in a
//     big run) but few distinct values, so it is kept as pairs; its percentiles equal
//     numpy.percentile over the expanded list.
#include <cstdint>
#include <span>
#include <vector>

namespace servelab {

// numpy's lerp: a + (b - a) * t, computed from b's side when t >= 0.5.
double NumpyLerp(double a, double b, double t);

// REQUIRES: `sorted` ascending and non-empty; 0 <= p <= 100.
double PercentileOfSorted(std::span<const double> sorted, double p);

struct WeightedValue {
  double value = 0;
  int64_t count = 0;  // > 0
};

// Sorts by value and merges equal values into one pair; drops pairs with count <= 0.
void SortAndMerge(std::vector<WeightedValue>& values);

// REQUIRES: `sorted` strictly ascending in value (SortAndMerge's output), total count > 0.
double WeightedPercentileOfSorted(std::span<const WeightedValue> sorted, double p);

// An append-only weighted sample that keeps its memory bounded by the number of distinct
// values: it merges a value equal to the last one added, and sorts + merges whenever the
// pair list doubles. The summary does not depend on when merging happened.
class WeightedSample {
 public:
  void Add(double value, int64_t count = 1);
  int64_t Count() const { return total_; }
  // Sorted, merged pairs (compacts first).
  std::span<const WeightedValue> Sorted();
  double Percentile(double p);  // REQUIRES: Count() > 0
  double Mean();                // 0 when empty
  double Max();                 // 0 when empty

 private:
  void Compact();

  std::vector<WeightedValue> values_;
  int64_t total_ = 0;
  size_t compact_at_ = 1 << 16;  // pairs; doubles with the distinct values kept
  size_t merged_ = 0;  // values_[0, merged_) is sorted and merged (the last compaction's)
  bool sorted_ = true;
};

}  // namespace servelab
