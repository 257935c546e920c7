#include "kernels/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "tests/kernels/kernel_test_util.h"

namespace servelab::kernels {
namespace {

using testing::ExpectRowsNear;
using testing::RandomNormal;

// Float64 rotate-half RoPE of [num_tokens, num_heads, head_dim] with the given inv_freq.
std::vector<double> Reference(const std::vector<float>& x, const std::vector<int32_t>& positions,
                              const std::vector<float>& inv_freq, int32_t num_heads,
                              int32_t head_dim) {
  const int32_t half = head_dim / 2;
  std::vector<double> out(x.size());
  for (size_t t = 0; t < positions.size(); ++t) {
    for (int32_t h = 0; h < num_heads; ++h) {
      const size_t row = (t * num_heads + h) * head_dim;
      for (int32_t i = 0; i < half; ++i) {
        const double angle = positions[t] * double{inv_freq[i]};
        const double a = x[row + i], b = x[row + i + half];
        out[row + i] = a * std::cos(angle) - b * std::sin(angle);
        out[row + i + half] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  }
  return out;
}

TEST(RopeTest, PairsDimIWithDimIPlusHalf) {
  // head_dim 4: pairs (0, 2) and (1, 3), angles 1 * 1.0 and 1 * 0.01 at position 1.
  std::vector<float> q = {1.0f, 2.0f, 3.0f, 4.0f}, k = {1.0f, 0.0f, 0.0f, 0.0f};
  const std::vector<float> inv_freq = {1.0f, 0.01f};
  const int32_t pos = 1;
  cpu::ApplyRope(q.data(), k.data(), &pos, inv_freq.data(), 1, 1, 1, 4);
  const double c1 = std::cos(1.0), s1 = std::sin(1.0);
  const double c2 = std::cos(double{0.01f}), s2 = std::sin(double{0.01f});
  EXPECT_NEAR(q[0], 1 * c1 - 3 * s1, 1e-6);
  EXPECT_NEAR(q[2], 3 * c1 + 1 * s1, 1e-6);
  EXPECT_NEAR(q[1], 2 * c2 - 4 * s2, 1e-6);
  EXPECT_NEAR(q[3], 4 * c2 + 2 * s2, 1e-6);
  EXPECT_NEAR(k[0], c1, 1e-7);
  EXPECT_NEAR(k[2], s1, 1e-7);
  EXPECT_EQ(k[1], 0.0f);
  EXPECT_EQ(k[3], 0.0f);
}

TEST(RopeTest, PositionZeroIsIdentity) {
  std::mt19937 rng(1);
  const auto q0 = RandomNormal(3 * 8 * 64, rng), k0 = RandomNormal(3 * 2 * 64, rng);
  auto q = q0, k = k0;
  const std::vector<int32_t> positions = {0, 0, 0};
  const auto inv_freq = RopeInvFreq(64, 10000.0);
  cpu::ApplyRope(q.data(), k.data(), positions.data(), inv_freq.data(), 3, 8, 2, 64);
  EXPECT_EQ(q, q0);
  EXPECT_EQ(k, k0);
}

TEST(RopeTest, MatchesFloat64ReferenceAndPreservesNorms) {
  std::mt19937 rng(2);
  const int32_t num_heads = 8, num_kv_heads = 2;
  const std::vector<int32_t> positions = {0, 1, 2, 15, 16, 17, 100, 4095, 8191, 70000};
  const int32_t n = static_cast<int32_t>(positions.size());
  for (int32_t head_dim : {64, 128}) {
    for (bool llama3 : {false, true}) {
      const auto inv_freq = llama3 ? RopeInvFreq(head_dim, 500000.0, Llama3RopeScaling{})
                                   : RopeInvFreq(head_dim, 10000.0);
      const auto q0 = RandomNormal(size_t(n) * num_heads * head_dim, rng);
      const auto k0 = RandomNormal(size_t(n) * num_kv_heads * head_dim, rng);
      auto q = q0, k = k0;
      cpu::ApplyRope(q.data(), k.data(), positions.data(), inv_freq.data(), n, num_heads,
                     num_kv_heads, head_dim);
      const std::string what = "head_dim " + std::to_string(head_dim) + (llama3 ? ", llama3" : "");
      ExpectRowsNear(q, Reference(q0, positions, inv_freq, num_heads, head_dim), head_dim, 1e-5,
                     "q, " + what);
      ExpectRowsNear(k, Reference(k0, positions, inv_freq, num_kv_heads, head_dim), head_dim, 1e-5,
                     "k, " + what);
      // A rotation: each head's norm is unchanged.
      for (size_t row = 0; row < q.size() / head_dim; ++row) {
        double before = 0.0, after = 0.0;
        for (int32_t d = 0; d < head_dim; ++d) {
          before += double{q0[row * head_dim + d]} * q0[row * head_dim + d];
          after += double{q[row * head_dim + d]} * q[row * head_dim + d];
        }
        ASSERT_NEAR(std::sqrt(after), std::sqrt(before), 1e-5 * std::sqrt(before)) << what;
      }
    }
  }
}

TEST(RopeInvFreqTest, DefaultIsThetaToTheMinusTwoIOverD) {
  const auto inv_freq = RopeInvFreq(128, 10000.0);
  ASSERT_EQ(inv_freq.size(), 64u);
  EXPECT_EQ(inv_freq[0], 1.0f);
  EXPECT_FLOAT_EQ(inv_freq[32], 0.01f);  // 10000^(-64/128)
  for (int32_t i = 0; i < 64; ++i) {
    EXPECT_FLOAT_EQ(inv_freq[i], static_cast<float>(std::pow(10000.0, -2.0 * i / 128)));
  }
}

// Llama 3.1 8B: theta 500000, head_dim 128, factor 8, low 1, high 4, original 8192.
// Wavelengths below 8192/4 = 2048 keep their frequency, above 8192/1 are slowed 8x, in
// between interpolate.
TEST(RopeInvFreqTest, Llama3ScalingByHand) {
  const Llama3RopeScaling scaling{8.0, 1.0, 4.0, 8192};
  const auto scaled = RopeInvFreq(128, 500000.0, scaling);
  auto base = [](int32_t i) { return std::pow(500000.0, -2.0 * i / 128); };
  auto wavelen = [&](int32_t i) { return 2.0 * std::numbers::pi / base(i); };

  // High frequency: unchanged.
  for (int32_t i : {0, 10, 28}) {
    ASSERT_LT(wavelen(i), 2048.0) << i;
    EXPECT_FLOAT_EQ(scaled[i], static_cast<float>(base(i))) << i;
  }
  EXPECT_EQ(scaled[0], 1.0f);
  // Low frequency: divided by the factor.
  for (int32_t i : {35, 50, 63}) {
    ASSERT_GT(wavelen(i), 8192.0) << i;
    EXPECT_FLOAT_EQ(scaled[i], static_cast<float>(base(i) / 8.0)) << i;
  }
  // In between: smooth = (8192 / wavelen - 1) / (4 - 1);
  // inv = (1 - smooth) * base / 8 + smooth * base.
  for (int32_t i : {29, 31, 32, 34}) {
    ASSERT_GE(wavelen(i), 2048.0) << i;
    ASSERT_LE(wavelen(i), 8192.0) << i;
    const double smooth = (8192.0 / wavelen(i) - 1.0) / 3.0;
    EXPECT_FLOAT_EQ(scaled[i],
                    static_cast<float>((1.0 - smooth) * base(i) / 8.0 + smooth * base(i)))
        << i;
  }
  // i = 32: base = 500000^-0.5 = 1.4142136e-3, wavelen = 4442.883, smooth = 0.2812826.
  EXPECT_NEAR(scaled[32], 5.2484616e-4, 1e-10);
}

TEST(RopeInvFreqDeathTest, OddHeadDimIsABug) {
  EXPECT_DEATH(RopeInvFreq(63, 10000.0), "CHECK failed");
}

}  // namespace
}  // namespace servelab::kernels
