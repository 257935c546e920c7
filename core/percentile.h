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
//     big run) but few distinct values, so it is kept as pairs (WeightedTimeSample);
//     its percentiles equal numpy.percentile over the expanded list.
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

// Of `values` (reordered: a selection, not a sort), the percentiles `ps` (each in
// [0, 100]) into `out`: exactly PercentileOfSorted of the sorted values, in O(n) per
// percentile. REQUIRES: values non-empty and free of NaN; out.size() == ps.size().
void PercentilesBySelection(std::span<double> values, std::span<const double> ps,
                            std::span<double> out);

// An append-only sample of durations (int64 ns) with weights, summarized in seconds
// (ns / 1e9, correctly rounded), as numpy would summarize the expanded list of seconds.
// Its memory stays bounded by the number of distinct values: it merges a value equal to
// the last one added, and sorts (a radix sort of the ns keys) and merges whenever the
// pair list doubles. The summary does not depend on when merging happened.
class WeightedTimeSample {
 public:
  void Add(int64_t ns, int64_t count = 1);  // REQUIRES: ns >= 0; count <= 0 is ignored
  int64_t Count() const { return total_; }
  // Ascending ns -> s is monotone, so order statistics come straight from the ns keys.
  double Percentile(double p);  // REQUIRES: Count() > 0
  // 0 when empty. Summed in ascending order over distinct seconds values (ns that round
  // to one double count as one value), as over a sorted, merged list of seconds.
  double Mean();
  double Max();  // 0 when empty
  // Distinct ns values held (after merging).
  size_t NumDistinct();

 private:
  struct Pair {
    int64_t ns;
    int64_t count;
  };
  void Compact();

  std::vector<Pair> pairs_;
  int64_t total_ = 0;
  size_t compact_at_ = 1 << 18;  // pairs (4 MiB); doubles with the distinct values kept
  size_t merged_ = 0;  // pairs_[0, merged_) is sorted and merged (the last compaction's)
  bool sorted_ = true;
};

}  // namespace servelab
