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

TEST(TextTest, PrintableEscapesControlBytesOnly) {
  EXPECT_EQ(Printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(Printable("\x1b[2J\r\x7f"), "\\x1b[2J\\x0d\\x7f");
  EXPECT_EQ(Printable("line\n\ttab, caf\xc3\xa9"), "line\n\ttab, caf\xc3\xa9");  // UTF-8 kept
}

}  // namespace
}  // namespace servelab
