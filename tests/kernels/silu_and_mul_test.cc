#include "kernels/silu_and_mul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tests/kernels/kernel_test_util.h"

namespace servelab::kernels {
namespace {

using testing::Poison;
using testing::RandomNormal;

TEST(SiluAndMulTest, HandValues) {
  // One token, d = 4: gate then up.
  const std::vector<float> input = {0.0f, 1.0f, -1.0f, 100.0f,  // gate
                                    5.0f, 2.0f, 3.0f,  0.5f};   // up
  std::vector<float> out(4);
  Poison(out);
  cpu::SiluAndMul(out.data(), input.data(), 1, 4);
  EXPECT_EQ(out[0], 0.0f);                                   // silu(0) = 0
  EXPECT_FLOAT_EQ(out[1], 2.0f / (1.0f + std::exp(-1.0f)));  // 2 * 0.7310586
  EXPECT_FLOAT_EQ(out[1], 1.4621172f);
  EXPECT_FLOAT_EQ(out[2], -3.0f / (1.0f + std::exp(1.0f)));  // 3 * -0.2689414
  EXPECT_EQ(out[3], 50.0f);                                  // silu(100) = 100 in f32
}

TEST(SiluAndMulTest, EveryElementIsSiluOfGateTimesUp) {
  std::mt19937 rng(1);
  const int32_t num_tokens = 9, d = 352;
  const auto input = RandomNormal(size_t(num_tokens) * 2 * d, rng, 3.0f);
  std::vector<float> out(size_t(num_tokens) * d);
  Poison(out);
  cpu::SiluAndMul(out.data(), input.data(), num_tokens, d);
  for (int32_t t = 0; t < num_tokens; ++t) {
    for (int32_t j = 0; j < d; ++j) {
      const float g = input[size_t(t) * 2 * d + j];
      const float u = input[size_t(t) * 2 * d + d + j];
      // The same f32 expression: exact.
      ASSERT_EQ(out[size_t(t) * d + j], g / (1.0f + std::exp(-g)) * u) << t << "," << j;
      // And within f32 rounding of the f64 value.
      const double want = double{g} / (1.0 + std::exp(-double{g})) * u;
      ASSERT_NEAR(out[size_t(t) * d + j], want, 1e-6 * std::abs(want) + 1e-30);
    }
  }
}

}  // namespace
}  // namespace servelab::kernels
