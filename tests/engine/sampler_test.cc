#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace servelab {
namespace {

TEST(SamplerTest, GreedyIsArgmaxWithTiesToTheLowestId) {
  Sampler sampler;
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(sampler.Sample(logits, SamplingParams{}, 7, 0), 1);
}

TEST(SamplerTest, SameSeedRequestAndIndexGiveTheSameToken) {
  Sampler a, b;
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = std::sin(static_cast<float>(i));
  SamplingParams p{1.0f, 0, 1.0f, 42};
  for (int32_t index = 0; index < 50; ++index) {
    EXPECT_EQ(a.Sample(logits, p, 3, index), b.Sample(logits, p, 3, index));
  }
  EXPECT_EQ(SamplingUniform(42, 3, 9), SamplingUniform(42, 3, 9));
  EXPECT_NE(SamplingUniform(42, 3, 9), SamplingUniform(42, 3, 10));
  EXPECT_NE(SamplingUniform(42, 3, 9), SamplingUniform(42, 4, 9));
  EXPECT_NE(SamplingUniform(42, 3, 9), SamplingUniform(43, 3, 9));
}

// Frequencies follow softmax(logits / T) over many (request, index) draws.
TEST(SamplerTest, TemperatureSamplingFollowsTheSoftmax) {
  Sampler sampler;
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(5.0f)};  // probs 1:2:5
  SamplingParams p{1.0f, 0, 1.0f, 9};
  std::map<int32_t, int> counts;
  const int n = 80000;
  for (int i = 0; i < n; ++i) ++counts[sampler.Sample(logits, p, i, 0)];
  EXPECT_NEAR(counts[0] / double(n), 1.0 / 8, 0.006);
  EXPECT_NEAR(counts[1] / double(n), 2.0 / 8, 0.008);
  EXPECT_NEAR(counts[2] / double(n), 5.0 / 8, 0.008);
  // At temperature 0.5 the odds square: 1:4:25.
  p.temperature = 0.5f;
  counts.clear();
  for (int i = 0; i < n; ++i) ++counts[sampler.Sample(logits, p, i, 0)];
  EXPECT_NEAR(counts[2] / double(n), 25.0 / 30, 0.008);
}

TEST(SamplerTest, TopKAndTopPRestrictTheCandidates) {
  Sampler sampler;
  const std::vector<float> logits = {std::log(0.1f), std::log(0.2f), std::log(0.3f),
                                     std::log(0.4f)};
  SamplingParams k2{1.0f, 2, 1.0f, 1};
  SamplingParams p05{1.0f, 0, 0.5f, 1};  // 0.4 + 0.3 reaches 0.5: tokens 3 and 2
  SamplingParams p04{1.0f, 0, 0.4f, 1};  // 0.4 alone reaches 0.4: token 3 only
  std::map<int32_t, int> k_counts, p_counts;
  for (int i = 0; i < 20000; ++i) {
    ++k_counts[sampler.Sample(logits, k2, i, 0)];
    ++p_counts[sampler.Sample(logits, p05, i, 0)];
    EXPECT_EQ(sampler.Sample(logits, p04, i, 0), 3);
  }
  EXPECT_EQ(k_counts.count(0) + k_counts.count(1), 0u);
  EXPECT_NEAR(k_counts[3] / 20000.0, 4.0 / 7, 0.015);
  EXPECT_EQ(p_counts.count(0) + p_counts.count(1), 0u);
  EXPECT_NEAR(p_counts[3] / 20000.0, 4.0 / 7, 0.015);
}

}  // namespace
}  // namespace servelab
