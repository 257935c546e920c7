#include "kernels/write_kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "tests/kernels/kernel_test_util.h"

namespace servelab::kernels {
namespace {

using testing::RandomNormal;

constexpr KvCacheShape kShape{/*num_blocks=*/6, /*block_size=*/16, /*num_kv_heads=*/2,
                              /*head_dim=*/64};
constexpr float kSentinel = -7.25f;

TEST(WriteKvCacheTest, RowsLandAtTheirSlotsAndNothingElseChanges) {
  std::mt19937 rng(1);
  const int32_t num_tokens = 40;
  // Distinct slots in random order, across blocks; every 5th token is padding.
  std::vector<int64_t> all(kShape.NumSlots());
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<int64_t> slots(all.begin(), all.begin() + num_tokens);
  for (int32_t t = 0; t < num_tokens; t += 5) slots[t] = -1;
  const int64_t stride = kShape.SlotStride();
  const auto k = RandomNormal(num_tokens * stride, rng);
  const auto v = RandomNormal(num_tokens * stride, rng);
  std::vector<float> k_cache(kShape.NumElements(), kSentinel);
  std::vector<float> v_cache(kShape.NumElements(), kSentinel);

  cpu::WriteKvCache(k_cache.data(), v_cache.data(), k.data(), v.data(), slots.data(), num_tokens,
                    kShape);

  std::vector<bool> written(kShape.NumSlots(), false);
  for (int32_t t = 0; t < num_tokens; ++t) {
    if (slots[t] < 0) continue;
    written[slots[t]] = true;
    for (int64_t i = 0; i < stride; ++i) {
      ASSERT_EQ(k_cache[slots[t] * stride + i], k[t * stride + i]) << "token " << t;
      ASSERT_EQ(v_cache[slots[t] * stride + i], v[t * stride + i]) << "token " << t;
    }
  }
  int64_t untouched = 0;
  for (int64_t slot = 0; slot < kShape.NumSlots(); ++slot) {
    if (written[slot]) continue;
    ++untouched;
    for (int64_t i = 0; i < stride; ++i) {
      ASSERT_EQ(k_cache[slot * stride + i], kSentinel) << "slot " << slot;
      ASSERT_EQ(v_cache[slot * stride + i], kSentinel) << "slot " << slot;
    }
  }
  EXPECT_EQ(untouched, kShape.NumSlots() - (num_tokens - 8));  // 8 padding tokens
}

TEST(WriteKvCacheTest, SlotIsBlockTimesBlockSizePlusOffset) {
  // Token 0 -> block 3, offset 5; the cache element of (slot, head 1, dim 2) is checked
  // by hand against the layout [num_blocks, block_size, num_kv_heads, head_dim].
  const int64_t slot = 3 * 16 + 5;
  std::vector<float> k(kShape.SlotStride()), v(kShape.SlotStride());
  std::iota(k.begin(), k.end(), 0.0f);
  std::iota(v.begin(), v.end(), 1000.0f);
  std::vector<float> k_cache(kShape.NumElements(), kSentinel);
  std::vector<float> v_cache(kShape.NumElements(), kSentinel);
  cpu::WriteKvCache(k_cache.data(), v_cache.data(), k.data(), v.data(), &slot, 1, kShape);
  const size_t at = ((3 * 16 + 5) * 2 + 1) * 64 + 2;
  EXPECT_EQ(k_cache[at], 66.0f);  // head 1, dim 2 of the token: 1 * 64 + 2
  EXPECT_EQ(v_cache[at], 1066.0f);
}

TEST(WriteKvCacheTest, AllPaddingWritesNothing) {
  const std::vector<int64_t> slots = {-1, -1, -5};
  std::vector<float> kv(3 * kShape.SlotStride(), 1.0f);
  std::vector<float> k_cache(kShape.NumElements(), kSentinel), v_cache = k_cache;
  cpu::WriteKvCache(k_cache.data(), v_cache.data(), kv.data(), kv.data(), slots.data(), 3, kShape);
  EXPECT_TRUE(std::all_of(k_cache.begin(), k_cache.end(), [](float x) { return x == kSentinel; }));
  EXPECT_TRUE(std::all_of(v_cache.begin(), v_cache.end(), [](float x) { return x == kSentinel; }));
}

TEST(WriteKvCacheDeathTest, SlotBeyondTheCacheIsABug) {
  const int64_t slot = kShape.NumSlots();
  std::vector<float> kv(kShape.SlotStride(), 1.0f);
  std::vector<float> k_cache(kShape.NumElements()), v_cache(kShape.NumElements());
  EXPECT_DEATH(
      cpu::WriteKvCache(k_cache.data(), v_cache.data(), kv.data(), kv.data(), &slot, 1, kShape),
      "CHECK failed");
}

}  // namespace
}  // namespace servelab::kernels
