// lpm and dfs-weight: orders computed by hand from what the prefix cache holds.
#include "policies/prefix_policies.h"

#include <gtest/gtest.h>

#include <string>

#include "core/prefix_key.h"
#include "tests/policies/policy_test_util.h"

namespace servelab {
namespace {

// A request whose prompt is `tokens` (one id per token, all identified) + 4 outputs.
Request Prompt(int64_t id, const std::string& tokens) {
  Request r = testing::MakeRequest(id, /*arrival=*/id, /*output_len=*/4, 0,
                                   static_cast<int32_t>(tokens.size()));
  r.prefix_block_tokens = 1;
  r.prefix_identified_tokens = r.prompt_len;
  r.prefix_block_hashes.assign(tokens.begin(), tokens.end());
  ChainPrefixHashes(r.prefix_block_hashes);
  return r;
}

// Computes `r`'s prompt into the cache (one token per block) and frees it: its blocks
// stay cached.
void Warm(KvCacheManager& kv, Request r) {
  std::vector<BlockCopy> copies;
  const int32_t cached = kv.CachedPrefixTokens(r);
  const int32_t n = r.NumTokensToCompute() - cached;
  ASSERT_TRUE(kv.Admit(r, n, n, copies));
  const int32_t from = r.num_computed_tokens;
  r.num_computed_tokens += n;
  kv.CacheComputedBlocks(r, from, r.num_computed_tokens);
  kv.Free(r);
}

StatusOr<std::unique_ptr<Policy>> Make(const std::string& name, const KvCacheManager& kv,
                                       const std::string& threshold = "") {
  NamedParams config{name, {}, "scheduler.policy", "exp.yaml:3", ""};
  if (!threshold.empty()) config.params.push_back({"fcfs_threshold", threshold, "exp.yaml:4"});
  PolicyContext context;
  context.kv = &kv;
  return BuiltinPolicies().Make(config, context);
}

TEST(LpmPolicyTest, LongestCachedPrefixFirstTiesInArrivalOrder) {
  KvCacheManager kv(64, 1, 0, 0, PrefixCacheType::kHash);
  Warm(kv, Prompt(100, "abcdefgh"));
  auto policy = Make("lpm", kv).value();
  // Cached tokens: 0 -> 2 ("ab"), 1 -> 0, 2 -> 6 ("abcdef"), 3 -> 2, 4 -> 7 (all but the
  // last token of "abcdefgh").
  std::vector<Request> requests = {Prompt(0, "abxx"), Prompt(1, "zzzz"), Prompt(2, "abcdefzz"),
                                   Prompt(3, "abyy"), Prompt(4, "abcdefgh")};
  for (Request& r : requests) policy->Enqueue(r, 0);
  EXPECT_EQ(testing::DrainOrder(*policy), (std::vector<int64_t>{4, 2, 0, 3, 1}));
}

TEST(LpmPolicyTest, PastTheThresholdTheOrderIsFcfs) {
  KvCacheManager kv(64, 1, 0, 0, PrefixCacheType::kHash);
  Warm(kv, Prompt(100, "abcdefgh"));
  auto policy = Make("lpm", kv, "2").value();
  std::vector<Request> requests = {Prompt(0, "zzzz"), Prompt(1, "abcdzz"), Prompt(2, "abcdefgh")};
  for (Request& r : requests) policy->Enqueue(r, 0);
  // Three waiting > 2: FCFS admits 0; then two waiting: ranked, 2 before 1.
  EXPECT_EQ(testing::DrainOrder(*policy), (std::vector<int64_t>{0, 2, 1}));
}

// Tree after warming "aaaa", "aabb", "cc" (one token per node): a-a-{a-a, b-b}, c-c.
// Waiting, with the node where each one's match ends:
//   0 "aaaaz" -> a-a-a-a    1 "aabbz" -> a-a-b-b    2 "aabbq" -> a-a-b-b
//   3 "ccz"   -> c-c        4 "zz"    -> root       5 "aaq"   -> a-a
// Weights: a-a subtree 4 (0, 1, 2, 5), its b branch 2, its a branch 1; c branch 1. Depth
// first, heavier children first, a node's own requests after its children's:
// b branch (1, 2), a branch (0), then a-a's own (5), then the c branch (3), root's (4).
TEST(DfsWeightPolicyTest, VisitsHeavierSubtreesFirst) {
  KvCacheManager kv(64, 1, 0, 0, PrefixCacheType::kRadix);
  Warm(kv, Prompt(100, "aaaa"));
  Warm(kv, Prompt(101, "aabb"));
  Warm(kv, Prompt(102, "cc"));
  auto policy = Make("dfs-weight", kv).value();
  std::vector<Request> requests = {Prompt(0, "aaaaz"), Prompt(1, "aabbz"), Prompt(2, "aabbq"),
                                   Prompt(3, "ccz"),   Prompt(4, "zz"),    Prompt(5, "aaq")};
  for (Request& r : requests) policy->Enqueue(r, 0);
  EXPECT_EQ(testing::DrainOrder(*policy), (std::vector<int64_t>{1, 2, 0, 5, 3, 4}));
}

TEST(PrefixPoliciesTest, NeedTheirCache) {
  const KvCacheManager none(8, 1, 0, 0, PrefixCacheType::kNone);
  const auto lpm = Make("lpm", none);
  ASSERT_FALSE(lpm.ok());
  EXPECT_NE(lpm.status().message().find("exp.yaml:3"), std::string::npos);
  EXPECT_NE(lpm.status().message().find("scheduler.prefix_cache"), std::string::npos);
  const KvCacheManager hash(8, 1, 0, 0, PrefixCacheType::kHash);
  const auto dfs = Make("dfs-weight", hash);
  ASSERT_FALSE(dfs.ok());
  EXPECT_NE(dfs.status().message().find("type: radix"), std::string::npos);
  const auto bad = Make("lpm", hash, "-1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fcfs_threshold"), std::string::npos);
}

}  // namespace
}  // namespace servelab
