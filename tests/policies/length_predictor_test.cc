#include "policies/length_predictor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "tests/policies/policy_test_util.h"

namespace servelab {
namespace {

using testing::MakeRequest;

LengthPredictor Noisy(double sigma, uint64_t seed) {
  return LengthPredictor({.kind = PredictorKind::kNoisy, .sigma = sigma}, seed);
}
LengthPredictor Bucket(double p, uint64_t seed) {
  return LengthPredictor({.kind = PredictorKind::kBucket, .p = p}, seed);
}

TEST(LengthPredictorTest, OracleIsTheTrueLength) {
  LengthPredictor oracle({}, 7);
  EXPECT_EQ(oracle.Predict(MakeRequest(3, 0, 123)), 123.0);
}

TEST(LengthPredictorTest, NoisyIsAFunctionOfSeedAndRequestOnly) {
  const Request r = MakeRequest(42, 0, 200);
  const double first = Noisy(0.5, 9).Predict(r);
  EXPECT_EQ(Noisy(0.5, 9).Predict(r), first) << "same seed, same request";
  // Drawing other requests first changes nothing: each request has its own stream.
  LengthPredictor p = Noisy(0.5, 9);
  for (int i = 0; i < 10; ++i) p.Predict(MakeRequest(i, 0, 200));
  EXPECT_EQ(p.Predict(r), first);
  EXPECT_NE(Noisy(0.5, 10).Predict(r), first) << "another seed";
  EXPECT_NE(Noisy(0.5, 9).Predict(MakeRequest(43, 0, 200)), first) << "another request";
  EXPECT_EQ(Noisy(0.0, 9).Predict(r), 200.0) << "sigma 0 is the oracle";
}

// true * exp(sigma Z): the median of the ratio is exp(0) = 1 and sd(log ratio) = sigma.
TEST(LengthPredictorTest, NoisyMedianIsTheTrueLengthAndLogSpreadIsSigma) {
  LengthPredictor p = Noisy(0.5, 2024);
  const int n = 20001;
  std::vector<double> ratios;
  double sum_log = 0.0;
  double sum_log2 = 0.0;
  for (int i = 0; i < n; ++i) {
    const double ratio = p.Predict(MakeRequest(i, 0, 100)) / 100.0;
    ratios.push_back(ratio);
    sum_log += std::log(ratio);
    sum_log2 += std::log(ratio) * std::log(ratio);
  }
  std::nth_element(ratios.begin(), ratios.begin() + n / 2, ratios.end());
  // Median of Z has sd ~ 1.2533 / sqrt(n) = 0.009; times sigma: 0.0044 in log. 5 sd.
  EXPECT_NEAR(std::log(ratios[n / 2]), 0.0, 0.022);
  const double mean_log = sum_log / n;
  EXPECT_NEAR(std::sqrt(sum_log2 / n - mean_log * mean_log), 0.5, 0.015);
}

TEST(LengthPredictorTest, BucketsAreLog2Ranges) {
  EXPECT_EQ(LengthPredictor::BucketOf(1), 0);
  EXPECT_EQ(LengthPredictor::BucketOf(2), 1);
  EXPECT_EQ(LengthPredictor::BucketOf(3), 1);
  EXPECT_EQ(LengthPredictor::BucketOf(4), 2);
  EXPECT_EQ(LengthPredictor::BucketOf(127), 6);
  EXPECT_EQ(LengthPredictor::BucketOf(128), 7);
  EXPECT_EQ(LengthPredictor::BucketOf(2147483647), 30);
  EXPECT_DOUBLE_EQ(LengthPredictor::BucketMidpoint(0), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(LengthPredictor::BucketMidpoint(6), 64.0 * std::sqrt(2.0));
}

// Fraction of n requests of true length `truth` predicted into each bucket.
std::map<int32_t, double> BucketShares(const LengthPredictor& p, int32_t truth, int n) {
  std::map<int32_t, double> shares;
  for (int i = 0; i < n; ++i) {
    const double predicted = p.Predict(MakeRequest(i, 0, truth));
    const int32_t bucket = static_cast<int32_t>(std::lround(std::log2(predicted) - 0.5));
    EXPECT_DOUBLE_EQ(predicted, LengthPredictor::BucketMidpoint(bucket));
    shares[bucket] += 1.0 / n;
  }
  return shares;
}

// p = 0.8: the right bucket 80% of the time, each neighbour 10%; sd of a share at
// n = 20000 is at most 0.0028, tolerances are ~4 sd.
TEST(LengthPredictorTest, BucketHitRateIsP) {
  const std::map<int32_t, double> shares = BucketShares(Bucket(0.8, 5), 100, 20000);
  ASSERT_EQ(shares.size(), 3u);
  EXPECT_NEAR(shares.at(6), 0.8, 0.012);
  EXPECT_NEAR(shares.at(5), 0.1, 0.012);
  EXPECT_NEAR(shares.at(7), 0.1, 0.012);
}

TEST(LengthPredictorTest, BucketZeroClampsItsDownwardMisses) {
  const std::map<int32_t, double> shares = BucketShares(Bucket(0.6, 5), 1, 20000);
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_NEAR(shares.at(0), 0.8, 0.012);  // 0.6 + 0.4 / 2
  EXPECT_NEAR(shares.at(1), 0.2, 0.012);
}

TEST(LengthPredictorTest, BucketWithPOneIsAlwaysRight) {
  const std::map<int32_t, double> shares = BucketShares(Bucket(1.0, 5), 300, 2000);
  ASSERT_EQ(shares.size(), 1u);
  EXPECT_NEAR(shares.at(8), 1.0, 1e-9);
}

}  // namespace
}  // namespace servelab
