#include "driver/csv_writer.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <sstream>

namespace servelab {
namespace {

std::string Decimal(int64_t value, int decimals) {
  std::string s;
  AppendDecimal(s, value, decimals);
  return s;
}

TEST(CsvWriterTest, ExactDecimalsTrimTrailingZeros) {
  EXPECT_EQ(Decimal(1'500'000'000, 9), "1.5");
  EXPECT_EQ(Decimal(1'000'000'001, 9), "1.000000001");
  EXPECT_EQ(Decimal(2000, 3), "2");
  EXPECT_EQ(Decimal(0, 9), "0");
  EXPECT_EQ(Decimal(-1'250, 3), "-1.25");
  EXPECT_EQ(Decimal(-5, 9), "-0.000000005");
  EXPECT_EQ(Decimal(123, 0), "123");
  EXPECT_EQ(Decimal(std::numeric_limits<int64_t>::min(), 9), "-9223372036.854775808");
  EXPECT_EQ(Decimal(std::numeric_limits<int64_t>::max(), 18), "9.223372036854775807");
}

// Against a reference built from the integer's digits: pad to decimals + 1 digits, put
// the point in, drop trailing fractional zeros and a bare point.
TEST(CsvWriterTest, ExactDecimalsMatchADigitStringReference) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 20000; ++trial) {
    const int decimals = static_cast<int>(rng() % 19);
    int64_t value = static_cast<int64_t>(rng() >> (rng() % 64));
    if (trial % 7 == 0) value -= value % 1000;  // trailing zeros
    if (rng() % 2) value = -value;
    const uint64_t magnitude = value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
    std::string digits = std::to_string(magnitude);
    if (digits.size() < static_cast<size_t>(decimals) + 1) {
      digits.insert(0, static_cast<size_t>(decimals) + 1 - digits.size(), '0');
    }
    std::string expected = digits.substr(0, digits.size() - static_cast<size_t>(decimals));
    std::string frac = digits.substr(digits.size() - static_cast<size_t>(decimals));
    while (!frac.empty() && frac.back() == '0') frac.pop_back();
    if (!frac.empty()) expected += "." + frac;
    if (value < 0) expected.insert(0, "-");
    ASSERT_EQ(Decimal(value, decimals), expected) << value << " / 10^" << decimals;
  }
}

TEST(CsvWriterTest, RowsOfEveryFieldKind) {
  std::ostringstream out;
  CsvWriter w(&out);
  w.Line("a,b,c,d,e,f");
  w.Int(-42).Seconds(1'500'000'000).SecondsDouble(0.625).Empty().Str("plain").Str("x,\"y\"");
  w.EndRow();
  w.SecondsDouble(-1e-12).SecondsDouble(2.0).SecondsDouble(1.0000000004).EndRow();
  EXPECT_EQ(out.str(), "a,b,c,d,e,f\n-42,1.5,0.625,,plain,\"x,\"\"y\"\"\"\n0,2,1\n");
}

TEST(CsvWriterTest, ARowLongerThanTheBufferGrowsIt) {
  std::ostringstream out;
  CsvWriter w(&out);
  std::string expected;
  for (int i = 0; i < 500; ++i) {
    w.Int(1'000'000 + i);
    expected += (i ? "," : "") + std::to_string(1'000'000 + i);
  }
  const std::string long_text(1000, 'z');
  w.Str(long_text).EndRow();
  EXPECT_EQ(out.str(), expected + "," + long_text + "\n");
}

TEST(CsvWriterTest, WithoutAStreamNothingIsWritten) {
  CsvWriter w(nullptr);
  EXPECT_FALSE(w.enabled());
  w.Int(1).Str("x").EndRow();  // no effect, no crash
}

}  // namespace
}  // namespace servelab
