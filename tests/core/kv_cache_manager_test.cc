#include "core/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

namespace servelab {
namespace {

Request MakeRequest(int32_t computed) {
  Request r;
  r.prompt_len = 100;
  r.target_output_len = 10;
  r.num_computed_tokens = computed;
  return r;
}

TEST(KvCacheManagerTest, FreshCacheHandsOutLowestBlocksFirst) {
  KvCacheManager kv(8, 16, 0);
  Request r = MakeRequest(0);
  ASSERT_TRUE(kv.CanAllocate(r, 33, false));
  kv.Allocate(r, 33);  // 33 tokens -> 3 blocks
  EXPECT_EQ(r.block_table, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(kv.NumUsedBlocks(), 3);
  EXPECT_EQ(kv.NumFreeBlocks(), 5);
}

TEST(KvCacheManagerTest, GrowsOnlyAtBlockBoundaries) {
  KvCacheManager kv(8, 4, 0);
  Request r = MakeRequest(0);
  kv.Allocate(r, 4);
  r.num_computed_tokens = 4;
  EXPECT_EQ(kv.BlocksNeeded(r, 0), 0);
  EXPECT_EQ(kv.BlocksNeeded(r, 1), 1);  // token 5 opens block 2
  kv.Allocate(r, 1);
  r.num_computed_tokens = 5;
  EXPECT_EQ(kv.BlocksNeeded(r, 3), 0);  // tokens 6..8 still fit in block 2
  EXPECT_EQ(kv.BlocksNeeded(r, 4), 1);
  EXPECT_EQ(kv.NumUsedBlocks(), 2);
}

TEST(KvCacheManagerTest, WatermarkAppliesToAdmissionOnly) {
  KvCacheManager kv(10, 1, 2);
  Request r = MakeRequest(0);
  EXPECT_TRUE(kv.CanAllocate(r, 8, /*admission=*/true));
  EXPECT_FALSE(kv.CanAllocate(r, 9, /*admission=*/true));
  EXPECT_TRUE(kv.CanAllocate(r, 10, /*admission=*/false));
  EXPECT_FALSE(kv.CanAllocate(r, 11, /*admission=*/false));
}

TEST(KvCacheManagerTest, SharedBlocksAreFreedByTheLastHolder) {
  KvCacheManager kv(4, 16, 0);
  Request a = MakeRequest(0), b = MakeRequest(0);
  kv.Allocate(a, 16);
  kv.Share(b, a.block_table[0]);
  EXPECT_EQ(kv.RefCount(0), 2);
  EXPECT_EQ(kv.NumUsedBlocks(), 1);
  kv.Free(a);
  EXPECT_EQ(kv.RefCount(0), 1);
  EXPECT_EQ(kv.NumUsedBlocks(), 1);
  kv.Free(b);
  EXPECT_EQ(kv.RefCount(0), 0);
  EXPECT_EQ(kv.NumFreeBlocks(), 4);
  EXPECT_TRUE(a.block_table.empty() && b.block_table.empty());
}

TEST(KvCacheManagerDeathTest, DoubleFreeIsCaught) {
  KvCacheManager kv(4, 16, 0);
  Request a = MakeRequest(0);
  kv.Allocate(a, 16);
  std::vector<int32_t> stale = a.block_table;
  kv.Free(a);
  a.block_table = stale;
  EXPECT_DEATH(kv.Free(a), "double free");
}

// Random allocate / grow / free sequences never leak or duplicate a block.
TEST(KvCacheManagerTest, RandomWorkloadConservesBlocks) {
  std::mt19937_64 rng(7);
  KvCacheManager kv(64, 8, 0);
  std::vector<Request> requests(16);
  for (int iter = 0; iter < 20000; ++iter) {
    Request& r = requests[rng() % requests.size()];
    const int32_t n = 1 + static_cast<int32_t>(rng() % 20);
    if (rng() % 4 == 0) {
      kv.Free(r);
      r.num_computed_tokens = 0;
    } else if (kv.CanAllocate(r, n, false)) {
      kv.Allocate(r, n);
      r.num_computed_tokens += n;
    }
    std::set<int32_t> held;
    int32_t total = 0;
    for (const Request& q : requests) {
      EXPECT_EQ(static_cast<int32_t>(q.block_table.size()), kv.BlocksFor(q.num_computed_tokens));
      held.insert(q.block_table.begin(), q.block_table.end());
      total += static_cast<int32_t>(q.block_table.size());
    }
    ASSERT_EQ(static_cast<int32_t>(held.size()), total) << "a block is in two tables";
    ASSERT_EQ(kv.NumUsedBlocks(), total);
  }
  for (Request& r : requests) kv.Free(r);
  EXPECT_EQ(kv.NumFreeBlocks(), 64);
}

}  // namespace
}  // namespace servelab
