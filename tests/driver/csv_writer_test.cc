#include "driver/csv_writer.h"

#include <gtest/gtest.h>

#include <limits>
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
