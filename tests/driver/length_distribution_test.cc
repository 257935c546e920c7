#include "driver/length_distribution.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

namespace servelab {
namespace {

constexpr int kSamples = 200'000;

// Writes `text` byte for byte to a fresh file in the test's temp folder.
LengthDistConfig Dist(LengthDist dist) {
  LengthDistConfig config;
  config.dist = dist;
  return config;
}

std::string WriteFixture(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "servelab_length_dist_test";
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

LengthDistribution Make(const LengthDistConfig& config) {
  auto d = LengthDistribution::Make(config, "workload.input_tokens");
  EXPECT_TRUE(d.ok()) << d.status().message();
  return std::move(d).value();
}

std::string ErrorOf(const LengthDistConfig& config) {
  auto d = LengthDistribution::Make(config, "workload.input_tokens");
  EXPECT_FALSE(d.ok());
  return d.ok() ? "" : d.status().message();
}

struct Stats {
  double mean = 0;
  double cv = 0;
  int32_t min = INT32_MAX;
  int32_t max = 0;
};

Stats SampleStats(const LengthDistribution& d, int n = kSamples, uint64_t seed = 1) {
  Rng rng(seed, RngStream::kInputLengths);
  double sum = 0, sum2 = 0;
  Stats s;
  for (int i = 0; i < n; ++i) {
    const int32_t x = d.Sample(rng);
    sum += x;
    sum2 += static_cast<double>(x) * x;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
  }
  s.mean = sum / n;
  s.cv = std::sqrt(sum2 / n - s.mean * s.mean) / s.mean;
  return s;
}

TEST(LengthDistributionTest, FixedAlwaysGivesItsValue) {
  LengthDistConfig c;
  c.value = 77;
  const Stats s = SampleStats(Make(c), 1000);
  EXPECT_EQ(s.min, 77);
  EXPECT_EQ(s.max, 77);
}

TEST(LengthDistributionTest, UniformRespectsBoundsAndMean) {
  LengthDistConfig c = Dist(LengthDist::kUniform);
  c.min = 10;
  c.max = 20;
  const Stats s = SampleStats(Make(c));
  EXPECT_EQ(s.min, 10);
  EXPECT_EQ(s.max, 20);
  EXPECT_NEAR(s.mean, 15.0, 0.05);  // sd of the mean = 3.16 / sqrt(n) = 0.007
}

TEST(LengthDistributionTest, NormalMeanAndStd) {
  LengthDistConfig c = Dist(LengthDist::kNormal);
  c.mean = 1000;
  c.std = 100;
  const Stats s = SampleStats(Make(c));
  EXPECT_NEAR(s.mean, 1000.0, 1.5);  // sd of the mean 0.22
  EXPECT_NEAR(s.cv, 0.1, 0.002);
}

TEST(LengthDistributionTest, LognormalMeanAndCvMatchConfig) {
  for (double cv : {0.5, 1.0, 2.0}) {
    LengthDistConfig c = Dist(LengthDist::kLognormal);
    c.mean = 1000;
    c.cv = cv;
    const Stats s = SampleStats(Make(c));
    EXPECT_NEAR(s.mean / 1000.0, 1.0, 0.03) << "cv " << cv;
    EXPECT_NEAR(s.cv / cv, 1.0, cv > 1.5 ? 0.10 : 0.04) << "cv " << cv;
  }
}

TEST(LengthDistributionTest, ZipfFrequenciesFollowPowerLaw) {
  LengthDistConfig c = Dist(LengthDist::kZipf);
  c.min = 1;
  c.max = 10;
  c.theta = 1.2;
  const LengthDistribution d = Make(c);
  double norm = 0;
  for (int k = 1; k <= 10; ++k) norm += std::pow(k, -1.2);
  std::map<int32_t, int> counts;
  Rng rng(3, 0);
  for (int i = 0; i < kSamples; ++i) ++counts[d.Sample(rng)];
  EXPECT_EQ(counts.begin()->first, 1);
  EXPECT_EQ(counts.rbegin()->first, 10);
  for (int k = 1; k <= 10; ++k) {
    const double p = std::pow(k, -1.2) / norm;
    const double sd = std::sqrt(kSamples * p * (1 - p));
    EXPECT_NEAR(counts[k], kSamples * p, 5 * sd) << "k = " << k;
  }
  // The power law itself: count(1) / count(2) ~ 2^1.2.
  EXPECT_NEAR(static_cast<double>(counts[1]) / counts[2], std::pow(2.0, 1.2), 0.05);
}

TEST(LengthDistributionTest, SamplesAreClampedToMinAndMax) {
  LengthDistConfig c = Dist(LengthDist::kNormal);
  c.mean = 100;
  c.std = 1000;
  c.min = 10;
  c.max = 200;
  const Stats s = SampleStats(Make(c), 10'000);
  EXPECT_EQ(s.min, 10);
  EXPECT_EQ(s.max, 200);
}

TEST(LengthDistributionTest, SamplesAreAtLeastOne) {
  LengthDistConfig c = Dist(LengthDist::kNormal);
  c.mean = 1;
  c.std = 50;
  EXPECT_EQ(SampleStats(Make(c), 10'000).min, 1);
  const LengthDistribution d = Make(c);
  EXPECT_EQ(d.Clamp(-5.0), 1);
  EXPECT_EQ(d.Clamp(std::nan("")), 1);
  EXPECT_EQ(d.Clamp(2.5), 3);  // round half away from zero
  EXPECT_EQ(d.Clamp(1e300), INT32_MAX);
}

TEST(LengthDistributionTest, InvalidConfigsNameTheKey) {
  LengthDistConfig uniform = Dist(LengthDist::kUniform);
  uniform.min = 10;
  uniform.max = 5;
  EXPECT_NE(ErrorOf(uniform).find("workload.input_tokens.max"), std::string::npos);

  LengthDistConfig zipf = Dist(LengthDist::kZipf);
  zipf.max = 0;
  EXPECT_NE(ErrorOf(zipf).find("workload.input_tokens.max"), std::string::npos);

  LengthDistConfig normal = Dist(LengthDist::kNormal);  // mean left at 0
  EXPECT_NE(ErrorOf(normal).find("workload.input_tokens.mean"), std::string::npos);

  LengthDistConfig clamp = Dist(LengthDist::kLognormal);
  clamp.mean = 10;
  clamp.min = 50;
  clamp.max = 20;
  EXPECT_NE(ErrorOf(clamp).find("workload.input_tokens.max"), std::string::npos);
}

TEST(LengthDistributionTest, EmpiricalCsvSamplesTheNamedColumnUniformly) {
  LengthDistConfig c = Dist(LengthDist::kEmpirical);
  c.path = WriteFixture("named.csv", "a,b\r\n1,100\r\n2,200\r\n\r\n3,300\r\n4,400");
  // std::string(...): GCC 12 warns falsely (-Wrestrict) on assigning a literal here.
  c.column = std::string("b");
  const LengthDistribution d = Make(c);
  ASSERT_EQ(d.NumRows(), 4u);
  EXPECT_EQ(d.Row(3), 400);
  std::map<int32_t, int> counts;
  Rng rng(1, 0);
  for (int i = 0; i < 40'000; ++i) ++counts[d.Sample(rng)];
  ASSERT_EQ(counts.size(), 4u);
  for (const auto& [value, count] : counts) EXPECT_NEAR(count, 10'000, 400) << value;
}

TEST(LengthDistributionTest, EmpiricalDefaultsToFirstColumnAndClamps) {
  LengthDistConfig c = Dist(LengthDist::kEmpirical);
  c.path = WriteFixture("first.csv", "tokens,other\n0,x\n5,y\n900,z\n");
  c.max = 500;
  const LengthDistribution d = Make(c);
  ASSERT_EQ(d.NumRows(), 3u);
  EXPECT_EQ(d.Row(0), 1);  // 0 tokens => 1
  EXPECT_EQ(d.Row(1), 5);
  EXPECT_EQ(d.Row(2), 500);
}

TEST(LengthDistributionTest, EmpiricalOneIntegerPerLine) {
  LengthDistConfig c = Dist(LengthDist::kEmpirical);
  c.path = WriteFixture("plain.txt", "12\n34\n56");
  const LengthDistribution d = Make(c);
  ASSERT_EQ(d.NumRows(), 3u);
  EXPECT_EQ(d.Row(2), 56);
  c.column = std::string("x");
  EXPECT_NE(ErrorOf(c).find("workload.input_tokens.column"), std::string::npos);
}

TEST(LengthDistributionTest, EmpiricalErrorsNameFileLineAndKey) {
  LengthDistConfig c = Dist(LengthDist::kEmpirical);
  c.path = WriteFixture("bad.csv", "n\n5\nabc\n");
  std::string error = ErrorOf(c);
  EXPECT_NE(error.find(c.path + ":3:"), std::string::npos) << error;
  EXPECT_NE(error.find("'n'"), std::string::npos) << error;
  EXPECT_NE(error.find("workload.input_tokens"), std::string::npos) << error;

  c.path = WriteFixture("negative.txt", "5\n-3\n");
  error = ErrorOf(c);
  EXPECT_NE(error.find(c.path + ":2:"), std::string::npos) << error;

  c.path = WriteFixture("header_only.csv", "n\n");
  EXPECT_NE(ErrorOf(c).find("no values"), std::string::npos);

  c.path = WriteFixture("cols.csv", "num_prefill_tokens\n5\n");
  c.column = std::string("num_prefill_token");
  error = ErrorOf(c);
  EXPECT_NE(error.find("did you mean 'num_prefill_tokens'"), std::string::npos) << error;

  c.path = "/nonexistent/servelab/lengths.csv";
  c.column.clear();
  auto missing = LengthDistribution::Make(c, "workload.output_tokens");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("workload.output_tokens.path"), std::string::npos);
  EXPECT_NE(missing.status().message().find(c.path), std::string::npos);
}

TEST(LengthDistributionTest, SharedShareGptColumns) {
  const std::string path = std::string(SERVELAB_SHARED_DATA) +
                           "/traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "shared data absent: " << path;
  LengthDistConfig c = Dist(LengthDist::kEmpirical);
  c.path = path;
  c.column = std::string("num_decode_tokens");
  const LengthDistribution d = Make(c);
  EXPECT_EQ(d.NumRows(), 30'731u);
  // README: output mean 438.7; sampling uniformly over rows keeps it.
  EXPECT_NEAR(SampleStats(d).mean, 438.7, 4.0);
}

}  // namespace
}  // namespace servelab
