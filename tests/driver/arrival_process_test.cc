#include "driver/arrival_process.h"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

namespace servelab {
namespace {

constexpr int kSamples = 200'000;

ArrivalGenerator Make(ArrivalProcess process, double rate, double cv = 1.0) {
  ArrivalConfig config;
  config.process = process;
  config.rate = rate;
  config.cv = cv;
  auto g = ArrivalGenerator::Make(config, "workload.arrival");
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(g).value();
}

struct GapStats {
  double mean_s = 0;
  double cv = 0;
  TimeNs first = 0;
};

// Mean and CV of the gaps between consecutive arrivals (the first gap from t = 0).
GapStats Gaps(ArrivalGenerator g, int n = kSamples) {
  Rng rng(2024, RngStream::kArrivals);
  TimeNs previous = 0;
  double sum = 0, sum2 = 0;
  GapStats s;
  for (int i = 0; i < n; ++i) {
    const TimeNs t = g.Next(rng);
    if (i == 0) s.first = t;
    EXPECT_GE(t, previous);
    const double gap = ToSeconds(t - previous);
    sum += gap;
    sum2 += gap * gap;
    previous = t;
  }
  s.mean_s = sum / n;
  s.cv = std::sqrt(sum2 / n - s.mean_s * s.mean_s) / s.mean_s;
  return s;
}

TEST(ArrivalProcessTest, PoissonMeanGapAndCvOne) {
  const GapStats s = Gaps(Make(ArrivalProcess::kPoisson, 4.0));
  // CLT: sd of the mean gap = 0.25 / sqrt(2e5) = 0.22% of it; of the sample CV ~ 0.32%.
  EXPECT_NEAR(s.mean_s / 0.25, 1.0, 0.01);
  EXPECT_NEAR(s.cv, 1.0, 0.02);
  EXPECT_GT(s.first, 0);  // the first arrival is one gap after t = 0
}

TEST(ArrivalProcessTest, GammaCvMatchesConfig) {
  for (double cv : {0.5, 1.0, 2.0, 4.0}) {
    const GapStats s = Gaps(Make(ArrivalProcess::kGamma, 10.0, cv));
    EXPECT_NEAR(s.mean_s / 0.1, 1.0, 0.01 * cv + 0.005) << "cv " << cv;
    EXPECT_NEAR(s.cv / cv, 1.0, cv > 2 ? 0.06 : 0.03) << "cv " << cv;
  }
}

TEST(ArrivalProcessTest, ConstantIsExact) {
  ArrivalGenerator g = Make(ArrivalProcess::kConstant, 3.0);
  Rng rng(1, RngStream::kArrivals);
  EXPECT_EQ(g.Next(rng), 333'333'333);
  EXPECT_EQ(g.Next(rng), 666'666'667);
  EXPECT_EQ(g.Next(rng), 1'000'000'000);
  for (int64_t i = 4; i <= 3'000'000; ++i) {
    const TimeNs t = g.Next(rng);
    if (i % 3 == 0) {
      ASSERT_EQ(t, i / 3 * kNsPerSec) << "no drift after " << i << " arrivals";
    }
  }
}

TEST(ArrivalProcessTest, BurstArrivesAllAtZero) {
  ArrivalConfig config;
  config.process = ArrivalProcess::kBurst;
  config.rate = 0;  // not used by burst
  auto g = ArrivalGenerator::Make(config, "workload.arrival");
  ASSERT_TRUE(g.ok()) << g.status().message();
  Rng rng(1, RngStream::kArrivals);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(g->Next(rng), 0);
}

TEST(ArrivalProcessTest, SameSeedSameTimes) {
  ArrivalGenerator a = Make(ArrivalProcess::kGamma, 5.0, 2.0);
  ArrivalGenerator b = Make(ArrivalProcess::kGamma, 5.0, 2.0);
  Rng ra(9, RngStream::kArrivals);
  Rng rb(9, RngStream::kArrivals);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a.Next(ra), b.Next(rb));
}

TEST(ArrivalProcessTest, InvalidConfigsNameTheKey) {
  ArrivalConfig config;
  config.rate = 0;
  auto g = ArrivalGenerator::Make(config, "workload.arrival");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("workload.arrival.rate"), std::string::npos);

  config.process = ArrivalProcess::kGamma;
  config.rate = 1;
  config.cv = 0;
  g = ArrivalGenerator::Make(config, "workload.arrival");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("workload.arrival.cv"), std::string::npos);
}

}  // namespace
}  // namespace servelab
