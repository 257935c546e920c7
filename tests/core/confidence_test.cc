#include "core/confidence.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/rng.h"

namespace servelab {
namespace {

TEST(ConfidenceTest, StudentTIntervalByHand) {
  // mean 3, s = sqrt(2.5), t(0.975, 4) = 2.7764451; half width 2.7764451 * 1.5811388 / sqrt(5).
  const std::vector<double> v = {1, 2, 3, 4, 5};
  const Estimate e = MeanWithInterval(v);
  EXPECT_EQ(e.n, 5);
  EXPECT_DOUBLE_EQ(e.mean, 3);
  EXPECT_NEAR(e.half_width, 1.963243, 1e-6);
  EXPECT_TRUE(e.Excludes(5.0));
  EXPECT_FALSE(e.Excludes(1.1));
  // One value: a mean, no interval, nothing significant.
  const std::vector<double> one = {7};
  EXPECT_EQ(MeanWithInterval(one).half_width, 0);
  EXPECT_FALSE(MeanWithInterval(one).Excludes(100));
  EXPECT_EQ(MeanWithInterval(std::vector<double>{}).n, 0);
}

TEST(ConfidenceTest, PairingRemovesTheSharedNoise) {
  // b = a + 1 exactly, a noisy: the unpaired intervals overlap, the paired one is exact.
  const std::vector<double> a = {10, 30, 20, 50, 40};
  const std::vector<double> b = {11, 31, 21, 51, 41};
  const Estimate d = PairedDifference(a, b);
  EXPECT_DOUBLE_EQ(d.mean, 1);
  EXPECT_DOUBLE_EQ(d.half_width, 0);
  EXPECT_GT(MeanWithInterval(a).high(), MeanWithInterval(b).low());
}

// Coverage: over 4,000 sets of 5 normal replicates the 95% interval holds the true mean
// in 95% of them. The binomial standard deviation is 0.34%; the window of +-1.5% is 4.4
// of them, so the test fails by chance about once in 10^5.
TEST(ConfidenceTest, CoversTheTrueMeanAtTheNominalRate) {
  Rng rng(11, 0);
  int covered = 0;
  constexpr int kTrials = 4000;
  for (int t = 0; t < kTrials; ++t) {
    std::vector<double> v(5);
    for (double& x : v) x = rng.Normal(10, 2);
    covered += MeanWithInterval(v).Excludes(10) ? 0 : 1;
  }
  EXPECT_NEAR(covered / double(kTrials), 0.95, 0.015);
}

}  // namespace
}  // namespace servelab
