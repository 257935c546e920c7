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
}

TEST(TextTest, PrintableEscapesControlBytesOnly) {
  EXPECT_EQ(Printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(Printable("\x1b[2J\r\x7f"), "\\x1b[2J\\x0d\\x7f");
  EXPECT_EQ(Printable("line\n\ttab, caf\xc3\xa9"), "line\n\ttab, caf\xc3\xa9");  // UTF-8 kept
}

}  // namespace
}  // namespace servelab
