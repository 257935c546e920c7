#include "core/block_key_table.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace servelab {
namespace {

TEST(BlockKeyTableTest, InsertFindErase) {
  BlockKeyTable table(4);
  EXPECT_EQ(table.Find(7), -1);
  EXPECT_TRUE(table.Insert(7, 3));
  EXPECT_FALSE(table.Insert(7, 4)) << "a key is stored once";
  EXPECT_EQ(table.Find(7), 3);
  EXPECT_TRUE(table.Erase(7));
  EXPECT_FALSE(table.Erase(7));
  EXPECT_EQ(table.Find(7), -1);
  EXPECT_EQ(table.Size(), 0);
}

// Keys that all land on one home slot (equal top bits) form one probe run; erasing from
// its middle must keep every later key reachable (backward shift).
TEST(BlockKeyTableTest, ErasingInsideAProbeRunKeepsTheRestReachable) {
  BlockKeyTable table(8);  // 32 slots: the home is the top 5 bits
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(table.Insert(i, static_cast<int32_t>(i)));
  ASSERT_TRUE(table.Erase(3));
  ASSERT_TRUE(table.Erase(0));
  for (uint64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(table.Find(i), i == 0 || i == 3 ? -1 : static_cast<int32_t>(i)) << i;
  }
}

// Against std::map over a random sequence, keys drawn from a small range so inserts
// collide, wrap around the end of the array and are erased again.
TEST(BlockKeyTableTest, AgreesWithAMapOnRandomOperations) {
  constexpr int32_t kMax = 64;
  BlockKeyTable table(kMax);
  std::map<uint64_t, int32_t> model;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200000; ++i) {
    // Mostly high bits vary (the home), sometimes only low bits (same home).
    const uint64_t key = (rng() % 200) << 56 | (rng() % 3);
    if (rng() % 2 == 0 && static_cast<int32_t>(model.size()) < kMax) {
      const int32_t value = static_cast<int32_t>(rng() % 1000);
      EXPECT_EQ(table.Insert(key, value), model.emplace(key, value).second);
    } else {
      EXPECT_EQ(table.Erase(key), model.erase(key) == 1);
    }
    ASSERT_EQ(table.Size(), static_cast<int32_t>(model.size()));
    const uint64_t probe = (rng() % 200) << 56 | (rng() % 3);
    const auto it = model.find(probe);
    ASSERT_EQ(table.Find(probe), it == model.end() ? -1 : it->second);
  }
}

}  // namespace
}  // namespace servelab
