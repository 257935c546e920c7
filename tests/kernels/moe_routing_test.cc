// MoE routing, hand-computed: softmax over every expert, the k most probable (ties to
// the lower id), renormalised or not; slots grouped by expert in token order.
#include "kernels/moe_routing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace servelab::kernels::cpu {
namespace {

TEST(MoeRoutingTest, TopTwoOfFourByHand) {
  // Token 0: logits 1, 3, 2, 0 -> experts 1 then 2; token 1: 0, 0, 5, 4 -> 2 then 3.
  const std::vector<float> logits = {1, 3, 2, 0, 0, 0, 5, 4};
  std::vector<int32_t> ids(4);
  std::vector<float> w(4);
  TopKSoftmaxRouting(ids.data(), w.data(), logits.data(), 2, 4, 2, /*renormalize=*/false);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 2, 3}));
  const double z0 = std::exp(1) + std::exp(3) + std::exp(2) + 1;
  EXPECT_NEAR(w[0], std::exp(3) / z0, 1e-6);
  EXPECT_NEAR(w[1], std::exp(2) / z0, 1e-6);
  const double z1 = 2 + std::exp(5) + std::exp(4);
  EXPECT_NEAR(w[2], std::exp(5) / z1, 1e-6);
  EXPECT_NEAR(w[3], std::exp(4) / z1, 1e-6);
  // Renormalised over the two: e^3 / (e^3 + e^2) = 1 / (1 + e^-1) = 0.7311.
  TopKSoftmaxRouting(ids.data(), w.data(), logits.data(), 2, 4, 2, /*renormalize=*/true);
  EXPECT_NEAR(w[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(w[0] + w[1], 1.0, 1e-6);
  EXPECT_NEAR(w[2], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
}

TEST(MoeRoutingTest, TiesGoToTheLowerExpertAndKEqualsEIsEveryExpert) {
  const std::vector<float> logits = {2, 7, 7, 2, 7};
  std::vector<int32_t> ids(3);
  std::vector<float> w(3);
  TopKSoftmaxRouting(ids.data(), w.data(), logits.data(), 1, 5, 3, false);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 4}));
  std::vector<int32_t> all(5);
  std::vector<float> all_w(5);
  TopKSoftmaxRouting(all.data(), all_w.data(), logits.data(), 1, 5, 5, false);
  EXPECT_EQ(all, (std::vector<int32_t>{1, 2, 4, 0, 3}));
  double sum = 0;
  for (float x : all_w) sum += x;
  EXPECT_NEAR(sum, 1.0, 1e-6);  // every expert chosen: the whole softmax
}

TEST(MoeRoutingTest, LargeLogitsDoNotOverflow) {
  const std::vector<float> logits = {1e4f, 1e4f - 1, -1e4f};
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  TopKSoftmaxRouting(ids.data(), w.data(), logits.data(), 1, 3, 2, false);
  EXPECT_NEAR(w[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_TRUE(std::isfinite(w[1]));
}

TEST(MoeRoutingTest, SlotsGroupedByExpertInTokenOrder) {
  // 3 tokens, k = 2: slots 0..5 chose experts 2,0 | 0,3 | 2,3 (4 experts, 1 unused).
  const std::vector<int32_t> ids = {2, 0, 0, 3, 2, 3};
  std::vector<int32_t> offsets(5), slots(6);
  GroupSlotsByExpert(offsets.data(), slots.data(), ids.data(), 3, 4, 2);
  EXPECT_EQ(offsets, (std::vector<int32_t>{0, 2, 2, 4, 6}));
  EXPECT_EQ(slots, (std::vector<int32_t>{1, 2, 0, 4, 3, 5}));
}

}  // namespace
}  // namespace servelab::kernels::cpu
