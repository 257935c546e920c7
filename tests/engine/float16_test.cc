// F16 / BF16 <-> float32: known bit patterns, every pattern's round trip, and
// round-to-nearest-even at every midpoint.
#include "engine/float16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace servelab {
namespace {

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
float FromBits(uint32_t b) { return std::bit_cast<float>(b); }

TEST(Float16Test, KnownHalfPatterns) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);               // largest finite
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x03ff), 1023 * std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(Bits(HalfToFloat(0x0000)), 0u);
  EXPECT_EQ(Bits(HalfToFloat(0x8000)), 0x80000000u);  // -0 keeps its sign
  EXPECT_EQ(HalfToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7c01)));  // signalling payload stays a NaN
  EXPECT_TRUE(std::signbit(HalfToFloat(0xfe00)));
}

TEST(Float16Test, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(f)) << h;
      const uint16_t back = FloatToHalf(f);
      EXPECT_TRUE((back & 0x7c00) == 0x7c00 && (back & 0x3ff) != 0) << h;
      EXPECT_EQ(back & 0x8000, h & 0x8000);
    } else {
      EXPECT_EQ(FloatToHalf(f), h) << "pattern " << h;
    }
  }
}

// The midpoint of two adjacent halves is exact in float32 and must round to the one
// with the even mantissa; one float ulp either side rounds to the nearer.
TEST(Float16Test, MidpointsRoundToEven) {
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    const float lo = HalfToFloat(static_cast<uint16_t>(h));
    const float hi = HalfToFloat(static_cast<uint16_t>(h + 1));
    const float mid = lo + (hi - lo) / 2;
    ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(lo) + hi) / 2);
    EXPECT_EQ(FloatToHalf(mid), (h % 2 == 0) ? h : h + 1) << h;
    EXPECT_EQ(FloatToHalf(std::nextafter(mid, 0.0f)), h) << h;
    EXPECT_EQ(FloatToHalf(std::nextafter(mid, 1e9f)), h + 1) << h;
    EXPECT_EQ(FloatToHalf(-mid), ((h % 2 == 0) ? h : h + 1) | 0x8000) << h;
  }
}

TEST(Float16Test, HalfOverflowAndUnderflow) {
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // the tie goes to even: infinity
  EXPECT_EQ(FloatToHalf(1e6f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-1e6f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 2^-24
  EXPECT_EQ(FloatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalf(1.5f * std::ldexp(1.0f, -24)), 0x0002);  // tie: to even (2)
  EXPECT_EQ(FloatToHalf(1e-10f), 0x0000);
  EXPECT_EQ(FloatToHalf(-1e-10f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  // Rounding the largest subnormal up lands on the smallest normal.
  EXPECT_EQ(FloatToHalf(std::nextafter(std::ldexp(1.0f, -14), 0.0f)), 0x0400);
}

TEST(Float16Test, KnownBf16Patterns) {
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0x4049), 3.140625f);
  EXPECT_EQ(Bf16ToFloat(0xc2f7), -123.5f);
  EXPECT_EQ(Bf16ToFloat(0x0001), std::ldexp(1.0f, -133));  // smallest subnormal
  EXPECT_EQ(Bf16ToFloat(0x7f80), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(Bf16ToFloat(0x7fc1)));
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(FloatToBf16(FromBits(0x3f818000)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808001)), 0x3f81);
  EXPECT_EQ(FloatToBf16(FromBits(0x3f807fff)), 0x3f80);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  // A NaN whose payload lies only in the dropped bits must not become infinity.
  EXPECT_EQ(FloatToBf16(FromBits(0x7f800001)), 0x7fc0);
  EXPECT_EQ(FloatToBf16(FromBits(0xffc00000)), 0xffc0);
}

TEST(Float16Test, EveryBf16RoundTrips) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(f))));
    } else {
      EXPECT_EQ(FloatToBf16(f), b) << b;
    }
  }
}

}  // namespace
}  // namespace servelab
