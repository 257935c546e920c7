#include "core/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

namespace servelab {
namespace {

Request MakeRequest(int32_t computed, int32_t slot = 0) {
  Request r;
  r.prompt_len = 100;
  r.target_output_len = 10;
  r.num_computed_tokens = computed;
  r.slot = slot;
  return r;
}

TEST(KvCacheManagerTest, FreshCacheHandsOutLowestBlocksFirst) {
  KvCacheManager kv(8, 16, 0);
  Request r = MakeRequest(0);
  ASSERT_TRUE(kv.AllocateSlots(r, 33));  // 33 tokens -> 3 blocks
  EXPECT_EQ(r.block_table, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(kv.NumUsedBlocks(), 3);
  EXPECT_EQ(kv.NumFreeBlocks(), 5);
}

TEST(KvCacheManagerTest, GrowsOnlyAtBlockBoundaries) {
  KvCacheManager kv(8, 4, 0);
  Request r = MakeRequest(0);
  ASSERT_TRUE(kv.AllocateSlots(r, 4));
  r.num_computed_tokens = 4;
  ASSERT_TRUE(kv.AllocateSlots(r, 0));
  EXPECT_EQ(r.block_table.size(), 1u);
  ASSERT_TRUE(kv.AllocateSlots(r, 1));  // token 5 opens block 2
  EXPECT_EQ(r.block_table.size(), 2u);
  r.num_computed_tokens = 5;
  ASSERT_TRUE(kv.AllocateSlots(r, 3));  // tokens 6..8 still fit in block 2
  EXPECT_EQ(r.block_table.size(), 2u);
  EXPECT_EQ(kv.NumUsedBlocks(), 2);
}

TEST(KvCacheManagerTest, NoRoomChangesNothing) {
  KvCacheManager kv(3, 4, 0);
  Request a = MakeRequest(0, 0), b = MakeRequest(0, 1);
  ASSERT_TRUE(kv.AllocateSlots(a, 8));
  EXPECT_FALSE(kv.AllocateSlots(b, 5)) << "needs 2 blocks, 1 is free";
  EXPECT_TRUE(b.block_table.empty());
  EXPECT_EQ(kv.NumFreeBlocks(), 1);
  EXPECT_TRUE(kv.AllocateSlots(b, 4));
}

TEST(KvCacheManagerTest, WatermarkAppliesToAdmissionOnly) {
  KvCacheManager kv(10, 1, 2);
  Request r = MakeRequest(0);
  EXPECT_TRUE(kv.CanAdmit(r, 8));
  EXPECT_FALSE(kv.CanAdmit(r, 9));
  std::vector<BlockCopy> copies;
  EXPECT_FALSE(kv.Admit(r, 1, 9, copies));
  EXPECT_TRUE(r.block_table.empty());
  Request grow = MakeRequest(0);
  EXPECT_FALSE(kv.AllocateSlots(grow, 11));
  EXPECT_TRUE(kv.AllocateSlots(grow, 10)) << "growth may use the watermark";
  EXPECT_TRUE(kv.CanEverHold(8));
  EXPECT_FALSE(kv.CanEverHold(9));
}

// Admission asks for room for the whole remaining prefill but allocates this step's
// chunk only.
TEST(KvCacheManagerTest, AdmitReservesTheWholePrefillAndAllocatesTheChunk) {
  KvCacheManager kv(10, 4, 1);
  Request r = MakeRequest(0);
  std::vector<BlockCopy> copies;
  EXPECT_FALSE(kv.Admit(r, 8, 37, copies)) << "37 tokens take 10 blocks, 9 above the watermark";
  ASSERT_TRUE(kv.Admit(r, 8, 36, copies));
  EXPECT_EQ(r.block_table.size(), 2u);
  EXPECT_TRUE(copies.empty());
}

// A swapped-out request's host ids never appear in its block table; it comes back on
// admission with one host -> device copy per block, in token order.
TEST(KvCacheManagerTest, SwapOutAndBackKeepsHostIdsApart) {
  KvCacheManager kv(6, 4, 0, /*num_host_blocks=*/3);
  Request r = MakeRequest(0, /*slot=*/2);
  ASSERT_TRUE(kv.AllocateSlots(r, 10));
  r.num_computed_tokens = 10;
  const std::vector<int32_t> device = r.block_table;  // {0, 1, 2}
  std::vector<BlockCopy> out;
  ASSERT_TRUE(kv.SwapOut(r, out));
  EXPECT_TRUE(kv.IsSwappedOut(r));
  EXPECT_TRUE(r.block_table.empty());
  ASSERT_EQ(out.size(), 3u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].src, device[i]);
  EXPECT_EQ(kv.NumFreeBlocks(), 6);
  EXPECT_EQ(kv.NumFreeHostBlocks(), 0);

  // Back, with room for 3 more tokens: 13 tokens need 4 blocks.
  EXPECT_FALSE(kv.CanAdmit(r, 15)) << "25 tokens would take 7 blocks";
  std::vector<BlockCopy> in;
  ASSERT_TRUE(kv.Admit(r, 3, 3, in));
  EXPECT_FALSE(kv.IsSwappedOut(r));
  ASSERT_EQ(in.size(), 3u);
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(in[i].src, out[i].dst);
    EXPECT_EQ(in[i].dst, r.block_table[i]);
  }
  EXPECT_EQ(r.block_table.size(), 4u);
  EXPECT_EQ(kv.NumFreeHostBlocks(), 3);
}

TEST(KvCacheManagerTest, SwapOutNeedsHostRoomAndFreeReleasesTheHost) {
  KvCacheManager kv(6, 4, 0, /*num_host_blocks=*/2);
  Request big = MakeRequest(0, 0), small = MakeRequest(0, 1);
  ASSERT_TRUE(kv.AllocateSlots(big, 12));
  ASSERT_TRUE(kv.AllocateSlots(small, 8));
  std::vector<BlockCopy> copies;
  EXPECT_FALSE(kv.SwapOut(big, copies)) << "3 blocks, 2 host blocks";
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(big.block_table.size(), 3u);
  ASSERT_TRUE(kv.SwapOut(small, copies));
  kv.Free(small);
  EXPECT_FALSE(kv.IsSwappedOut(small));
  EXPECT_EQ(kv.NumFreeHostBlocks(), 2);
  kv.Free(big);
  EXPECT_EQ(kv.NumFreeBlocks(), 6);
}

TEST(KvCacheManagerDeathTest, DoubleFreeIsCaught) {
  KvCacheManager kv(4, 16, 0);
  Request a = MakeRequest(0);
  ASSERT_TRUE(kv.AllocateSlots(a, 16));
  std::vector<int32_t> stale = a.block_table;
  kv.Free(a);
  a.block_table = stale;
  EXPECT_DEATH(kv.Free(a), "double free");
}

// Random allocate / grow / swap / free sequences never leak or duplicate a block.
TEST(KvCacheManagerTest, RandomWorkloadConservesBlocks) {
  std::mt19937_64 rng(7);
  KvCacheManager kv(64, 8, 0, /*num_host_blocks=*/16);
  std::vector<Request> requests(16);
  for (int32_t i = 0; i < 16; ++i) requests[i].slot = i;
  std::vector<BlockCopy> copies;
  for (int iter = 0; iter < 20000; ++iter) {
    Request& r = requests[rng() % requests.size()];
    const int32_t n = 1 + static_cast<int32_t>(rng() % 20);
    const uint64_t op = rng() % 8;
    if (op == 0) {
      kv.Free(r);
      r.num_computed_tokens = 0;
    } else if (op == 1 && !kv.IsSwappedOut(r)) {
      kv.SwapOut(r, copies);
    } else if (kv.IsSwappedOut(r)) {
      if (kv.Admit(r, n, n, copies)) r.num_computed_tokens += n;
    } else if (kv.AllocateSlots(r, n)) {
      r.num_computed_tokens += n;
    }
    std::set<int32_t> held;
    int32_t total = 0;
    for (const Request& q : requests) {
      const auto blocks = static_cast<size_t>((q.num_computed_tokens + 7) / 8);
      EXPECT_EQ(q.block_table.size(), kv.IsSwappedOut(q) ? 0 : blocks);
      held.insert(q.block_table.begin(), q.block_table.end());
      total += static_cast<int32_t>(q.block_table.size());
    }
    ASSERT_EQ(static_cast<int32_t>(held.size()), total) << "a block is in two tables";
    ASSERT_EQ(kv.NumUsedBlocks(), total);
  }
  for (Request& r : requests) kv.Free(r);
  EXPECT_EQ(kv.NumFreeBlocks(), 64);
  EXPECT_EQ(kv.NumFreeHostBlocks(), 16);
}

}  // namespace
}  // namespace servelab
