#include "core/block_pool.h"

#include <gtest/gtest.h>

namespace servelab {
namespace {

TEST(BlockPoolTest, LowestFirstThenMostRecentlyFreed) {
  BlockPool pool(4);
  EXPECT_EQ(pool.Take(), 0);
  EXPECT_EQ(pool.Take(), 1);
  pool.Release(0);
  EXPECT_EQ(pool.Take(), 0);
  EXPECT_EQ(pool.Take(), 2);
  EXPECT_EQ(pool.NumFree(), 1);
}

// A block shared by several holders (a cached prefix) is freed by the last one.
TEST(BlockPoolTest, SharedBlocksAreFreedByTheLastHolder) {
  BlockPool pool(2);
  const int32_t b = pool.Take();
  pool.Share(b);
  EXPECT_EQ(pool.RefCount(b), 2);
  pool.Release(b);
  EXPECT_EQ(pool.RefCount(b), 1);
  EXPECT_EQ(pool.NumFree(), 1);
  pool.Release(b);
  EXPECT_EQ(pool.RefCount(b), 0);
  EXPECT_EQ(pool.NumFree(), 2);
}

TEST(BlockPoolDeathTest, MisuseIsCaught) {
  BlockPool pool(1);
  const int32_t b = pool.Take();
  pool.Release(b);
  EXPECT_DEATH(pool.Release(b), "double free");
  EXPECT_DEATH(pool.Share(b), "CHECK failed");
}

}  // namespace
}  // namespace servelab
