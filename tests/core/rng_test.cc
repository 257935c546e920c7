#include "core/rng.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace servelab {
namespace {

constexpr int kSamples = 200'000;

struct Moments {
  double mean = 0;
  double var = 0;
};

template <class F>
Moments Sample(F draw, int n = kSamples) {
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double x = draw();
    sum += x;
    sum2 += x * x;
  }
  Moments m;
  m.mean = sum / n;
  m.var = sum2 / n - m.mean * m.mean;
  return m;
}

TEST(RngTest, EngineMatchesTheStandard) {
  // [rand.predef]: the 10000th output of a default-constructed mt19937_64.
  std::mt19937_64 engine;
  engine.discard(9999);
  EXPECT_EQ(engine(), 9981545732273789042ULL);
}

TEST(RngTest, SplitMix64KnownValue) {
  uint64_t state = 0;
  EXPECT_EQ(SplitMix64(state), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(state, 0x9E3779B97F4A7C15ULL);
}

TEST(RngTest, SameSeedAndStreamGiveTheSameSequence) {
  Rng a(42, RngStream::kArrivals);
  Rng b(42, RngStream::kArrivals);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(a.NextU64(), b.NextU64());
    ASSERT_EQ(a.Normal(), b.Normal());
    ASSERT_EQ(a.Gamma(0.3, 2.0), b.Gamma(0.3, 2.0));
  }
}

TEST(RngTest, StreamsAndSeedsAreDistinct) {
  std::set<uint64_t> seeds;
  for (uint64_t seed : {0ULL, 1ULL, 2ULL, 42ULL}) {
    for (uint64_t stream = 0; stream < 8; ++stream) seeds.insert(DeriveSeed(seed, stream));
  }
  EXPECT_EQ(seeds.size(), 32u);

  Rng arrivals(7, RngStream::kArrivals);
  Rng inputs(7, RngStream::kInputLengths);
  int equal = 0;
  for (int i = 0; i < 1000; ++i) equal += arrivals.NextU64() == inputs.NextU64();
  EXPECT_EQ(equal, 0);
}

TEST(RngTest, UniformIsInUnitIntervalWithMeanHalf) {
  Rng rng(1, 0);
  const Moments m = Sample([&] {
    const double u = rng.Uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    return u;
  });
  // sd of the mean = sqrt(1/12 / n) ~ 0.00065.
  EXPECT_NEAR(m.mean, 0.5, 0.004);
  EXPECT_NEAR(m.var, 1.0 / 12, 0.002);
}

TEST(RngTest, UniformIntCoversEveryValueWithinBounds) {
  Rng rng(3, 0);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 70'000; ++i) {
    const int64_t x = rng.UniformInt(-3, 3);
    ASSERT_GE(x, -3);
    ASSERT_LE(x, 3);
    ++counts[static_cast<size_t>(x + 3)];
  }
  // Binomial(70000, 1/7): mean 10000, sd ~ 93.
  for (int c : counts) EXPECT_NEAR(c, 10'000, 500);
  EXPECT_EQ(rng.UniformInt(5, 5), 5);
  const int64_t lo = INT64_MIN;
  const int64_t hi = INT64_MAX;
  (void)rng.UniformInt(lo, hi);  // the full range must not divide by zero
}

TEST(RngTest, ExponentialMeanAndVariance) {
  Rng rng(5, 0);
  const Moments m = Sample([&] { return rng.Exponential(2.0); });
  EXPECT_NEAR(m.mean, 2.0, 0.02);  // sd of the mean 0.0045
  EXPECT_NEAR(m.var, 4.0, 0.2);
}

TEST(RngTest, NormalMeanAndVariance) {
  Rng rng(9, 0);
  const Moments m = Sample([&] { return rng.Normal(10.0, 3.0); });
  EXPECT_NEAR(m.mean, 10.0, 0.03);  // sd of the mean 0.0067
  EXPECT_NEAR(m.var, 9.0, 0.15);
}

class GammaTest : public testing::TestWithParam<double> {};

TEST_P(GammaTest, MeanAndVarianceMatch) {
  const double shape = GetParam();
  const double scale = 1.5;
  Rng rng(11, 0);
  const Moments m = Sample([&] {
    const double x = rng.Gamma(shape, scale);
    EXPECT_GE(x, 0.0);
    return x;
  });
  const double mean = shape * scale;
  const double var = shape * scale * scale;
  // CLT, 5 sd: the sample mean has relative sd 1/sqrt(k n); the sample variance has
  // relative sd sqrt((kurtosis - 1) / n), kurtosis = 3 + 6/k.
  EXPECT_NEAR(m.mean / mean, 1.0, 5 / std::sqrt(shape * kSamples));
  EXPECT_NEAR(m.var / var, 1.0, 5 * std::sqrt((2 + 6 / shape) / kSamples));
}

INSTANTIATE_TEST_SUITE_P(Shapes, GammaTest, testing::Values(0.1, 0.25, 1.0, 4.0, 30.0));

TEST(RngTest, LognormalLogParamsGiveTheAskedMeanAndCv) {
  const LogParams p = LognormalLogParams(100.0, 0.0);
  EXPECT_DOUBLE_EQ(p.sigma, 0.0);
  EXPECT_NEAR(std::exp(p.mu), 100.0, 1e-9);

  const LogParams q = LognormalLogParams(500.0, 1.5);
  // E[X] = exp(mu + sigma^2 / 2); CV^2 = exp(sigma^2) - 1.
  EXPECT_NEAR(std::exp(q.mu + q.sigma * q.sigma / 2), 500.0, 1e-9);
  EXPECT_NEAR(std::sqrt(std::exp(q.sigma * q.sigma) - 1), 1.5, 1e-12);
}

}  // namespace
}  // namespace servelab
