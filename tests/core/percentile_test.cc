#include "core/percentile.h"

#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace servelab {
namespace {

// Expected values are numpy 1.24 reprs: numpy.percentile(x, p), default method.
TEST(PercentileTest, MatchesNumpyOnHandCases) {
  const std::vector<double> x = {1, 2, 3, 4};
  EXPECT_EQ(PercentileOfSorted(x, 50), 2.5);
  EXPECT_EQ(PercentileOfSorted(x, 90), 3.7);
  EXPECT_EQ(PercentileOfSorted(x, 99), 3.9699999999999998);
  EXPECT_EQ(PercentileOfSorted(x, 0), 1.0);
  EXPECT_EQ(PercentileOfSorted(x, 100), 4.0);

  std::vector<double> y = {0.013, 0.2, 0.0071, 1.5, 0.33, 0.33, 0.9};
  std::sort(y.begin(), y.end());
  EXPECT_EQ(PercentileOfSorted(y, 0), 0.0071);
  EXPECT_EQ(PercentileOfSorted(y, 37.5), 0.2325);
  EXPECT_EQ(PercentileOfSorted(y, 50), 0.33);
  EXPECT_EQ(PercentileOfSorted(y, 90), 1.1400000000000001);
  EXPECT_EQ(PercentileOfSorted(y, 99), 1.4639999999999997);
  EXPECT_EQ(PercentileOfSorted(y, 100), 1.5);
}

TEST(PercentileTest, SingleValueIsEveryPercentile) {
  const std::vector<double> x = {0.25};
  for (double p : {0.0, 50.0, 99.0, 100.0}) EXPECT_EQ(PercentileOfSorted(x, p), 0.25);
  const std::vector<WeightedValue> w = {{0.25, 7}};
  for (double p : {0.0, 50.0, 99.0, 100.0}) EXPECT_EQ(WeightedPercentileOfSorted(w, p), 0.25);
}

TEST(PercentileTest, WeightedMatchesNumpyOnHandCase) {
  // numpy.percentile([1, 1, 1, 2], [50, 90, 99])
  const std::vector<WeightedValue> w = {{1.0, 3}, {2.0, 1}};
  EXPECT_EQ(WeightedPercentileOfSorted(w, 50), 1.0);
  EXPECT_EQ(WeightedPercentileOfSorted(w, 90), 1.7000000000000002);
  EXPECT_EQ(WeightedPercentileOfSorted(w, 99), 1.9699999999999998);
}

TEST(PercentileTest, SortAndMergeMergesEqualValuesAndDropsEmpty) {
  std::vector<WeightedValue> w = {{3, 1}, {1, 2}, {3, 4}, {2, 0}, {1, 1}};
  SortAndMerge(w);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].value, 1);
  EXPECT_EQ(w[0].count, 3);
  EXPECT_EQ(w[1].value, 3);
  EXPECT_EQ(w[1].count, 5);
}

// The weighted percentile must equal the plain one over the expanded list, bit for bit.
TEST(PercentileTest, WeightedEqualsExpandedOnRandomData) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 50; ++trial) {
    const int distinct = 1 + static_cast<int>(rng() % 40);
    std::vector<WeightedValue> pairs;
    std::vector<double> expanded;
    for (int i = 0; i < distinct; ++i) {
      // Few distinct values so duplicates across pairs happen too.
      const double value = static_cast<double>(rng() % 25) * 0.013 + 0.001;
      const int64_t count = 1 + static_cast<int64_t>(rng() % 9);
      pairs.push_back({value, count});
      expanded.insert(expanded.end(), static_cast<size_t>(count), value);
    }
    std::sort(expanded.begin(), expanded.end());
    SortAndMerge(pairs);
    for (double p : {0.0, 1.0, 10.0, 25.0, 33.3, 50.0, 75.0, 90.0, 99.0, 99.9, 100.0}) {
      EXPECT_EQ(WeightedPercentileOfSorted(pairs, p), PercentileOfSorted(expanded, p))
          << "trial " << trial << " p " << p;
    }
  }
}

TEST(WeightedTimeSampleTest, OutOfOrderAddsAndCompactionGiveTheSameSummary) {
  // More distinct values than the first compaction threshold, added out of order, with
  // keys spread over many radix digits.
  std::mt19937_64 rng(7);
  WeightedTimeSample sample;
  std::vector<double> expanded;
  for (int i = 0; i < 200000; ++i) {
    const int64_t ns = static_cast<int64_t>(rng() % 100000) * (i % 2 == 0 ? 1000 : 1'000'003);
    const int64_t count = 1 + static_cast<int64_t>(rng() % 3);
    sample.Add(ns, count);
    expanded.insert(expanded.end(), static_cast<size_t>(count), static_cast<double>(ns) / 1e9);
  }
  sample.Add(500, 0);  // ignored
  std::sort(expanded.begin(), expanded.end());
  EXPECT_EQ(sample.Count(), static_cast<int64_t>(expanded.size()));
  EXPECT_EQ(sample.Max(), expanded.back());
  for (double p : {0.0, 50.0, 90.0, 99.0, 100.0}) {
    EXPECT_EQ(sample.Percentile(p), PercentileOfSorted(expanded, p)) << p;
  }
  // The mean sums the merged pairs in ascending order.
  std::vector<WeightedValue> pairs;
  for (const double v : expanded) {
    if (!pairs.empty() && pairs.back().value == v) {
      ++pairs.back().count;
    } else {
      pairs.push_back({v, 1});
    }
  }
  double sum = 0;
  for (const WeightedValue& v : pairs) sum += v.value * static_cast<double>(v.count);
  EXPECT_EQ(sample.Mean(), sum / static_cast<double>(expanded.size()));
  EXPECT_EQ(sample.NumDistinct(), pairs.size());
  // Adding after a summary is seen by the next one.
  sample.Add(int64_t{1} << 40);
  EXPECT_EQ(sample.Max(), static_cast<double>(int64_t{1} << 40) / 1e9);
}

TEST(WeightedTimeSampleTest, EmptyAndMergedRuns) {
  WeightedTimeSample sample;
  EXPECT_EQ(sample.Count(), 0);
  EXPECT_EQ(sample.Mean(), 0);
  EXPECT_EQ(sample.Max(), 0);
  sample.Add(500'000'000, 2);
  sample.Add(500'000'000, 3);  // merged into the previous pair
  sample.Add(250'000'000);
  EXPECT_EQ(sample.Count(), 6);
  EXPECT_EQ(sample.NumDistinct(), 2u);
  EXPECT_EQ(sample.Mean(), (0.5 * 5 + 0.25) / 6);
  EXPECT_EQ(sample.Percentile(0), 0.25);
  EXPECT_EQ(sample.Percentile(50), 0.5);
}

// Keys past 2^53 ns: distinct ns that round to one double count as one value in the mean,
// as in a merged list of seconds.
TEST(WeightedTimeSampleTest, NsThatRoundToOneSecondValueAreOneValue) {
  WeightedTimeSample sample;
  const int64_t big = int64_t{1} << 62;
  sample.Add(big + 1);
  sample.Add(big);
  sample.Add(big + 2, 2);
  EXPECT_EQ(sample.NumDistinct(), 3u);
  const double s = static_cast<double>(big) / 1e9;
  ASSERT_EQ(static_cast<double>(big + 2) / 1e9, s);
  EXPECT_EQ(sample.Mean(), s * 4.0 / 4.0);
  EXPECT_EQ(sample.Percentile(50), s);
  EXPECT_EQ(sample.Max(), s);
}

TEST(PercentileTest, SelectionGivesWhatSortingGives) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> values(1 + rng() % 500);
    for (double& v : values) v = static_cast<double>(rng() % 50) * 0.37;  // ties too
    std::vector<double> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    // Ascending (each selection narrows to the values above the last), then out of order.
    for (const std::vector<double>& ps : {std::vector<double>{0, 1, 33.3, 50, 90, 99, 99.9, 100},
                                          std::vector<double>{99, 50, 90, 0, 100, 33.3}}) {
      std::vector<double> out(ps.size());
      PercentilesBySelection(values, ps, out);
      for (size_t i = 0; i < ps.size(); ++i) {
        ASSERT_EQ(out[i], PercentileOfSorted(sorted, ps[i])) << "trial " << trial << " p " << ps[i];
      }
    }
  }
}

}  // namespace
}  // namespace servelab
