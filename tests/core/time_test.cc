#include "core/time.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace servelab {
namespace {

TEST(TimeTest, FromSecondsRoundsAndSaturates) {
  EXPECT_EQ(FromSeconds(1.5), 1'500'000'000);
  EXPECT_EQ(FromSeconds(2.4e-9), 2);
  EXPECT_EQ(FromSeconds(-1.0), -kNsPerSec);
  // Past +-4e18 ns (and NaN, infinities): the bound, never an overflowed int64.
  EXPECT_EQ(FromSeconds(1e300), kMaxTime);
  EXPECT_EQ(FromSeconds(std::numeric_limits<double>::infinity()), kMaxTime);
  EXPECT_EQ(FromSeconds(std::nan("")), kMaxTime);
  EXPECT_EQ(FromSeconds(-1e300), -kMaxTime);
  EXPECT_EQ(FromSeconds(ToSeconds(kMaxTime)), kMaxTime);
  EXPECT_LT(FromSeconds(3.9e9), kMaxTime);
}

}  // namespace
}  // namespace servelab
