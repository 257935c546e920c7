#include "driver/cache_aware_router.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/prefix_key.h"

namespace servelab {
namespace {

// A 1,000-token prompt whose first `shared` 100-token blocks are those of `family`, the
// rest its own (`id`).
Request Prompt(uint64_t family, int shared, uint64_t id) {
  Request r;
  r.prompt_len = 1000;
  r.target_output_len = 1;
  r.prefix_block_tokens = 100;
  r.prefix_identified_tokens = 1000;
  for (int j = 0; j < 10; ++j) r.prefix_block_hashes.push_back(j < shared ? family : id * 100 + j);
  ChainPrefixHashes(r.prefix_block_hashes);
  return r;
}

std::vector<ReplicaLoad> Loads(std::vector<int32_t> running) {
  std::vector<ReplicaLoad> loads;
  for (int32_t n : running) loads.push_back(ReplicaLoad{n, 0, 0});
  return loads;
}

TEST(CacheAwareRouterTest, FollowsTheLongestMatchAboveTheThreshold) {
  CacheAwareRouter router(CacheAwareRouterOptions{});
  const auto loads = Loads({0, 0, 0});
  // Empty trees: the smallest (all equal: lowest index), then the next smallest.
  EXPECT_EQ(router.Route(Prompt(1, 8, 1), loads), 0);
  EXPECT_EQ(router.Route(Prompt(2, 8, 2), loads), 1);
  // Shares 8 of 10 blocks with what went to 0: 80% > 50%.
  EXPECT_EQ(router.MatchedTokens(0, Prompt(1, 8, 3)), 800);
  EXPECT_EQ(router.Route(Prompt(1, 8, 3), loads), 0);
  EXPECT_EQ(router.Route(Prompt(2, 8, 4), loads), 1);
  // Shares 4 blocks with replica 0's: 40% is not enough, so the smallest tree: 2.
  EXPECT_EQ(router.Route(Prompt(1, 4, 5), loads), 2);
}

TEST(CacheAwareRouterTest, ImbalanceSendsToTheLeastLoaded) {
  CacheAwareRouterOptions options;
  options.balance_abs_threshold = 4;
  options.balance_rel_threshold = 1.5;
  CacheAwareRouter router(options);
  EXPECT_EQ(router.Route(Prompt(1, 10, 1), Loads({0, 0})), 0);
  // 0 is 5 ahead (> 4) and 6 > 1.5 x 1: imbalanced, whatever the match.
  EXPECT_EQ(router.Route(Prompt(1, 10, 2), Loads({6, 1})), 1);
  // A new family goes to 0 (equal trees, no match: the lowest index)...
  EXPECT_EQ(router.Route(Prompt(5, 10, 3), Loads({0, 0})), 0);
  // ... and follows its match there while 5 ahead but 20 < 1.5 x 15 ...
  EXPECT_EQ(router.Route(Prompt(5, 10, 4), Loads({20, 15})), 0);
  // ... or 4 ahead, which is not more than 4.
  EXPECT_EQ(router.Route(Prompt(5, 10, 6), Loads({4, 0})), 0);
  EXPECT_EQ(router.Route(Prompt(5, 10, 7), Loads({5, 0})), 1);
}

// Past max_tree_tokens the least recently routed prefix blocks go first.
TEST(CacheAwareRouterTest, TreesForgetTheLeastRecentlyRouted) {
  CacheAwareRouterOptions options;
  options.max_tree_tokens = 1500;  // 15 blocks of 100
  options.cache_threshold = 0.0;
  CacheAwareRouter router(options);
  const auto one = Loads({0});
  router.Route(Prompt(1, 10, 1), one);  // 10 blocks
  router.Route(Prompt(2, 10, 2), one);  // 10 more: the first 5 of family 1 go
  EXPECT_EQ(router.MatchedTokens(0, Prompt(1, 10, 1)), 0) << "its first block is gone";
  EXPECT_EQ(router.MatchedTokens(0, Prompt(2, 10, 2)), 1000);
}

}  // namespace
}  // namespace servelab
