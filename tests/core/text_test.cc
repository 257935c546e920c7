#include "core/text.h"

#include <gtest/gtest.h>

namespace servelab {
namespace {

TEST(TextTest, EditDistanceAndTheClosestName) {
  EXPECT_EQ(EditDistance("fcfs", "fcfs"), 0);
  EXPECT_EQ(EditDistance("sjff", "sjf"), 1);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(DidYouMean("max_num_seq", {"max_num_seqs", "block_size"}),
            " (did you mean 'max_num_seqs'?)");
  EXPECT_EQ(DidYouMean("zzzzzz", {"fcfs", "sjf"}), "");
}

TEST(TextTest, WithCommasGroupsThousands) {
  EXPECT_EQ(WithCommas(0), "0");
  EXPECT_EQ(WithCommas(999), "999");
  EXPECT_EQ(WithCommas(1000), "1,000");
  EXPECT_EQ(WithCommas(-1234567), "-1,234,567");
}

// A file's stray Latin-1 byte, a cut multi-byte sequence, an overlong '/', a surrogate,
// a code point past U+10FFFF, a C1 CSI: each byte escaped; whole characters of every
// length kept.
TEST(TextTest, PrintableEscapesWhatIsNotUtf8) {
  EXPECT_EQ(Printable("caf\xe9 key"), "caf\\xe9 key");
  EXPECT_EQ(Printable("\xe2\x82"), "\\xe2\\x82");
  EXPECT_EQ(Printable("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(Printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(Printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  EXPECT_EQ(Printable("\xc2\x9b" "2J"), "\\xc2\\x9b" "2J");
  EXPECT_EQ(Printable("\xc2\xa0\xe2\x82\xac\xf0\x9f\x99\x82"), "\xc2\xa0\xe2\x82\xac\xf0\x9f\x99\x82");
  EXPECT_EQ(Printable("\xe2\x82\xac\xff"), "\xe2\x82\xac\\xff");
  // The second byte's narrowed ranges: E0 80..9F and F0 80..8F overlong, a lone
  // continuation byte; C2 9F the last C1 control, C2 A0 the first character after.
  EXPECT_EQ(Printable("\xe0\x9f\xbf"), "\\xe0\\x9f\\xbf");
  EXPECT_EQ(Printable("\xe0\xa0\x80"), "\xe0\xa0\x80");
  EXPECT_EQ(Printable("\xf0\x8f\xbf\xbf"), "\\xf0\\x8f\\xbf\\xbf");
  EXPECT_EQ(Printable("\xf0\x90\x80\x80"), "\xf0\x90\x80\x80");
  EXPECT_EQ(Printable("\x80"), "\\x80");
  EXPECT_EQ(Printable("\xc2\x9f"), "\\xc2\\x9f");
  EXPECT_EQ(Printable("\xc2\xa0"), "\xc2\xa0");
  EXPECT_EQ(Printable("\xed\x9f\xbf"), "\xed\x9f\xbf");  // U+D7FF, the last before the surrogates
}

TEST(TextTest, PrintableEscapesControlBytesOnly) {
  EXPECT_EQ(Printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(Printable("\x1b[2J\r\x7f"), "\\x1b[2J\\x0d\\x7f");
  EXPECT_EQ(Printable("line\n\ttab, caf\xc3\xa9"), "line\n\ttab, caf\xc3\xa9");  // UTF-8 kept
}

}  // namespace
}  // namespace servelab
