#include "core/host_drift.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace servelab {
namespace {

// Timings in passes: every row once a pass, in row order, each at `base[row]` times the
// host's speed in that pass.
struct Passes {
  std::vector<int32_t> rows;
  std::vector<double> seconds;
};

Passes InPasses(const std::vector<double>& base, const std::vector<double>& speed_by_pass) {
  Passes p;
  for (double speed : speed_by_pass) {
    for (size_t r = 0; r < base.size(); ++r) {
      p.rows.push_back(static_cast<int32_t>(r));
      p.seconds.push_back(base[r] * speed);
    }
  }
  return p;
}

TEST(HostSpeedTest, AnEpisodeIsFoundWhereItWasAndNowhereElse) {
  // Five rows of different times, nine passes, the fifth 25% slower on every row.
  const std::vector<double> base = {0.001, 0.004, 0.02, 0.0005, 0.1};
  std::vector<double> speed(9, 1.0);
  speed[4] = 1.25;
  const Passes p = InPasses(base, speed);
  const std::vector<double> f = HostSpeed(p.rows, p.seconds, 3);
  ASSERT_EQ(f.size(), p.seconds.size());
  for (size_t i = 0; i < f.size(); ++i) {
    const size_t pass = i / base.size(), place = i % base.size();
    // Each row's median is its base (8 of its 9 timings), so every other timing's ratio
    // is 1 and the episode's 1.25; a window of 3 sees a timing's two neighbours.
    if (pass == 4 && place > 0 && place + 1 < base.size()) {
      EXPECT_DOUBLE_EQ(f[i], 1.25) << i;
    } else if (pass == 4 || (pass == 3 && place + 1 == base.size()) || (pass == 5 && place == 0)) {
      EXPECT_DOUBLE_EQ(f[i], (1.0 + 1.25) / 2) << i;  // one neighbour in, one out
    } else {
      EXPECT_DOUBLE_EQ(f[i], 1.0) << i;
    }
  }
}

TEST(HostSpeedTest, DividedOutItLeavesEachRowsOwnTime) {
  // A host that slows and recovers over the passes; with a window inside a pass, dividing
  // the factors out leaves every timing at its row's time times the median pass's speed.
  const std::vector<double> base = {0.002, 0.003, 0.005, 0.007, 0.011, 0.013, 0.017, 0.019, 0.023};
  const std::vector<double> speed = {1.0, 1.0, 1.3, 1.1, 1.0, 0.95, 1.0};
  const Passes p = InPasses(base, speed);
  const std::vector<double> f = HostSpeed(p.rows, p.seconds, 5);
  int32_t checked = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const size_t place = i % base.size();
    // The median pass's speed is 1.0, so each row's median is its base; a window wholly
    // inside the pass (two each side) sees the pass's speed.
    if (place >= 2 && place + 2 < base.size()) {
      EXPECT_NEAR(p.seconds[i] / f[i], base[place], 1e-15) << i;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5 * 7);
}

TEST(HostSpeedTest, ARunsOwnDeviationIsNotTakenForTheHosts) {
  // One slow run among steady ones: its own factor leaves it out, and a window of 5 gives
  // its neighbours the median of three steady ratios and it: still 1.
  const std::vector<double> base = {0.001, 0.002, 0.003, 0.004};
  Passes p = InPasses(base, std::vector<double>(6, 1.0));
  p.seconds[13] *= 2;
  const std::vector<double> f = HostSpeed(p.rows, p.seconds, 5);
  for (size_t i = 0; i < f.size(); ++i) EXPECT_DOUBLE_EQ(f[i], 1.0) << i;
}

TEST(HostSpeedTest, AtTheEndsTheWindowStaysWhole) {
  // Three rows of two timings, the second of each twice the first: ratios (median 1.5)
  // 2/3 and 4/3 alternating in time as 2/3, 2/3, 2/3, 4/3, 4/3, 4/3.
  const std::vector<int32_t> r2 = {0, 1, 2, 0, 1, 2};
  const std::vector<double> s2 = {1, 1, 1, 2, 2, 2};
  const std::vector<double> g = HostSpeed(r2, s2, 3);
  EXPECT_DOUBLE_EQ(g[0], 2.0 / 3);  // the next two
  EXPECT_DOUBLE_EQ(g[1], 2.0 / 3);
  EXPECT_DOUBLE_EQ(g[2], 1.0);      // 2/3 and 4/3
  EXPECT_DOUBLE_EQ(g[3], 1.0);
  EXPECT_DOUBLE_EQ(g[4], 4.0 / 3);
  EXPECT_DOUBLE_EQ(g[5], 4.0 / 3);  // the two before
  // A window longer than the timings: every other one.
  const std::vector<double> h = HostSpeed(r2, s2, 101);
  EXPECT_DOUBLE_EQ(h[0], 4.0 / 3);  // two of 2/3, three of 4/3
  EXPECT_DOUBLE_EQ(h[5], 2.0 / 3);  // three of 2/3, two of 4/3
}

TEST(HostSpeedTest, TimingsThatSayNothingAreLeftOut) {
  // A zero, a NaN and an infinite time are no ratio; a row with none usable says nothing.
  const std::vector<int32_t> rows = {0, 1, 0, 1, 0, 1, 2};
  const std::vector<double> seconds = {1, 0, 2, std::nan(""), 3, INFINITY, 0};
  const std::vector<double> f = HostSpeed(rows, seconds, 3);
  // Row 0's median is 2: ratios 0.5, 1, 1.5 at timings 0, 2, 4; the rest none.
  EXPECT_DOUBLE_EQ(f[0], 1.0);   // timings 1 and 2: timing 2's ratio 1
  EXPECT_DOUBLE_EQ(f[1], 0.75);  // timings 0 and 2
  EXPECT_DOUBLE_EQ(f[2], 1.0);   // timings 1 and 3: none, so 1
  EXPECT_DOUBLE_EQ(f[3], 1.25);  // timings 2 and 4
  EXPECT_DOUBLE_EQ(f[4], 1.0);   // timings 3 and 5: none
  EXPECT_DOUBLE_EQ(f[5], 1.5);   // timing 4
  EXPECT_DOUBLE_EQ(f[6], 1.5);   // at the end, timings 4 and 5: timing 4's
  const std::vector<double> none = HostSpeed(std::vector<int32_t>{0, 0}, std::vector<double>{0.0, -1.0}, 3);
  EXPECT_DOUBLE_EQ(none[0], 1.0);
  EXPECT_DOUBLE_EQ(none[1], 1.0);
  EXPECT_TRUE(HostSpeed({}, {}, 3).empty());
}

TEST(HostSpeedTest, FewerTimingsThanTheWindowUseEveryOther) {
  // Eight timings, window 9: each one's factor is the median of the seven others, at the
  // end as at the start. Rows of two (times 1 and 3: median 2), ratios 0.5 and 1.5 apart
  // from the last two, a row of two at 2 (ratios 1).
  const std::vector<int32_t> rows = {0, 1, 2, 0, 1, 2, 3, 3};
  const std::vector<double> seconds = {1, 1, 1, 3, 3, 3, 2, 2};
  const std::vector<double> f = HostSpeed(rows, seconds, 9);
  // Ratios 0.5 x3, 1.5 x3, 1, 1: without the first, sorted 0.5 0.5 1 1 1.5 1.5 1.5.
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_DOUBLE_EQ(f[3], 1.0);  // 0.5 0.5 0.5 1 1 1.5 1.5
  EXPECT_DOUBLE_EQ(f[7], 1.0);  // 0.5 0.5 0.5 1 1.5 1.5 1.5
  const std::vector<double> g = HostSpeed(std::vector<int32_t>{0, 0, 0, 0}, std::vector<double>{1, 2, 2, 8}, 9);
  // Median 2: ratios 0.5, 1, 1, 4. The last: the median of 0.5, 1, 1.
  EXPECT_DOUBLE_EQ(g[3], 1.0);
  EXPECT_DOUBLE_EQ(g[0], 1.0);   // 1, 1, 4
  EXPECT_DOUBLE_EQ(g[1], 1.0);   // 0.5, 1, 4
}

// Each run's samples divided by its own factor, once: a run's whole step and its ops, and
// runs of other rows in between.
TEST(DivideByHostSpeedTest, EachSampleByItsOwnRunsFactor) {
  // Two rows timed in turn over five passes; the third pass 20% slow.
  const std::vector<double> speed = {1, 1, 1.2, 1, 1};
  std::vector<double> steps_a, ops_a, steps_b;
  std::vector<LoggedRun> runs;
  for (double s : speed) {
    steps_a.push_back(0.010 * s);
    ops_a.push_back(0.004 * s);
    runs.push_back(LoggedRun{0, 0.010 * s, {{&steps_a, steps_a.size() - 1}, {&ops_a, ops_a.size() - 1}}});
    steps_b.push_back(0.030 * s);
    runs.push_back(LoggedRun{1, 0.030 * s, {{&steps_b, steps_b.size() - 1}}});
  }
  std::vector<int32_t> rows;
  std::vector<double> seconds;
  for (const LoggedRun& r : runs) {
    rows.push_back(r.row);
    seconds.push_back(r.seconds);
  }
  const std::vector<double> expected = HostSpeed(rows, seconds, 3);
  const std::vector<double> before_a = steps_a, before_ops = ops_a, before_b = steps_b;
  const std::vector<double> factors = DivideByHostSpeed(runs, 3);
  ASSERT_EQ(factors, expected);
  for (size_t p = 0; p < speed.size(); ++p) {
    EXPECT_DOUBLE_EQ(steps_a[p], before_a[p] / factors[2 * p]) << p;
    EXPECT_DOUBLE_EQ(ops_a[p], before_ops[p] / factors[2 * p]) << p;
    EXPECT_DOUBLE_EQ(steps_b[p], before_b[p] / factors[2 * p + 1]) << p;
  }
  // The slow pass's two runs see each other's ratio (1.2) and one of 1: 1.1 each, and
  // their neighbours 1.1 too; the first and last runs 1.
  EXPECT_DOUBLE_EQ(factors[4], 1.1);
  EXPECT_DOUBLE_EQ(factors[5], 1.1);
  EXPECT_DOUBLE_EQ(factors[0], 1.0);
  EXPECT_DOUBLE_EQ(factors[9], 1.0);
  EXPECT_TRUE(DivideByHostSpeed({}, 3).empty());
}

}  // namespace
}  // namespace servelab
