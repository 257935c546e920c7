#include "kernels/rms_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tests/kernels/kernel_test_util.h"

namespace servelab::kernels {
namespace {

using testing::ExpectRowsNear;
using testing::Poison;
using testing::RandomNormal;

constexpr float kEps = 1e-5f;

// Float64 RMSNorm of [num_tokens, hidden].
std::vector<double> Reference(const std::vector<double>& x, const std::vector<float>& weight,
                              int32_t hidden) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / hidden; ++r) {
    double sum_sq = 0.0;
    for (int32_t i = 0; i < hidden; ++i) sum_sq += x[r * hidden + i] * x[r * hidden + i];
    const double inv = 1.0 / std::sqrt(sum_sq / hidden + double{kEps});
    for (int32_t i = 0; i < hidden; ++i) out[r * hidden + i] = x[r * hidden + i] * inv * weight[i];
  }
  return out;
}

std::vector<double> ToDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST(RmsNormTest, HandComputedRow) {
  // x = (3, 4): mean(x^2) = 12.5; eps negligible at this tolerance.
  const std::vector<float> x = {3.0f, 4.0f}, weight = {1.0f, 2.0f};
  std::vector<float> out(2);
  Poison(out);
  cpu::RmsNorm(out.data(), x.data(), weight.data(), 1, 2, 0.0f);
  EXPECT_FLOAT_EQ(out[0], 3.0f / std::sqrt(12.5f));
  EXPECT_FLOAT_EQ(out[1], 8.0f / std::sqrt(12.5f));
}

TEST(RmsNormTest, MatchesFloat64Reference) {
  std::mt19937 rng(1);
  for (int32_t hidden : {64, 320, 4096}) {
    const int32_t num_tokens = 7;
    const auto x = RandomNormal(size_t(num_tokens) * hidden, rng, 2.0f);
    const auto weight = RandomNormal(hidden, rng);
    std::vector<float> out(x.size());
    Poison(out);
    cpu::RmsNorm(out.data(), x.data(), weight.data(), num_tokens, hidden, kEps);
    // Per element: the norm is a product, so each output is relatively accurate.
    ExpectRowsNear(out, Reference(ToDouble(x), weight, hidden), 1, 1e-5,
                   "hidden " + std::to_string(hidden));
  }
}

TEST(RmsNormTest, InPlaceEqualsOutOfPlace) {
  std::mt19937 rng(2);
  const int32_t num_tokens = 5, hidden = 256;
  auto x = RandomNormal(size_t(num_tokens) * hidden, rng);
  const auto weight = RandomNormal(hidden, rng);
  std::vector<float> out(x.size());
  Poison(out);
  cpu::RmsNorm(out.data(), x.data(), weight.data(), num_tokens, hidden, kEps);
  cpu::RmsNorm(x.data(), x.data(), weight.data(), num_tokens, hidden, kEps);
  EXPECT_EQ(x, out);
}

TEST(FusedAddRmsNormTest, ResidualGetsTheSumAndXItsNorm) {
  std::mt19937 rng(3);
  for (int32_t hidden : {64, 4096}) {
    const int32_t num_tokens = 6;
    const auto x0 = RandomNormal(size_t(num_tokens) * hidden, rng);
    const auto residual0 = RandomNormal(size_t(num_tokens) * hidden, rng, 4.0f);
    const auto weight = RandomNormal(hidden, rng);
    auto x = x0;
    auto residual = residual0;
    cpu::FusedAddRmsNorm(x.data(), residual.data(), weight.data(), num_tokens, hidden, kEps);
    std::vector<double> sum(x0.size());
    for (size_t i = 0; i < x0.size(); ++i) {
      ASSERT_EQ(residual[i], residual0[i] + x0[i]) << i;  // one f32 add: exact
      sum[i] = double{residual0[i]} + x0[i];
    }
    ExpectRowsNear(x, Reference(sum, weight, hidden), 1, 1e-5, "hidden " + std::to_string(hidden));
  }
}

TEST(FusedAddRmsNormTest, EqualsAddThenRmsNorm) {
  std::mt19937 rng(4);
  const int32_t num_tokens = 3, hidden = 128;
  auto x = RandomNormal(size_t(num_tokens) * hidden, rng);
  auto residual = RandomNormal(size_t(num_tokens) * hidden, rng);
  const auto weight = RandomNormal(hidden, rng);
  std::vector<float> sum(x.size()), want(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum[i] = residual[i] + x[i];
  Poison(want);
  cpu::RmsNorm(want.data(), sum.data(), weight.data(), num_tokens, hidden, kEps);
  cpu::FusedAddRmsNorm(x.data(), residual.data(), weight.data(), num_tokens, hidden, kEps);
  EXPECT_EQ(residual, sum);
  EXPECT_EQ(x, want);
}

}  // namespace
}  // namespace servelab::kernels
