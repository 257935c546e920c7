// The prefix caches behind the KV manager: what they share, what they evict and in what
// order, and the seeds' RadixAttention example.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>

#include "core/kv_cache_manager.h"
#include "core/radix_prefix_cache.h"

namespace servelab {
namespace {

// A request whose prompt is `tokens` (one id per token, all identified) + `output`.
Request Prompt(const std::u32string& tokens, int32_t slot, int32_t output = 4) {
  Request r;
  r.prompt_len = static_cast<int32_t>(tokens.size());
  r.target_output_len = output;
  r.slot = slot;
  r.prefix_block_tokens = 1;
  r.prefix_identified_tokens = r.prompt_len;
  r.prefix_block_hashes.assign(tokens.begin(), tokens.end());
  ChainPrefixHashes(r.prefix_block_hashes);
  return r;
}

// Admits `r` as the scheduler does and computes its whole prompt in one step; returns
// the tokens its admission took from the cache.
int32_t AdmitAndPrefill(KvCacheManager& kv, Request& r) {
  const int32_t cached = kv.CachedPrefixTokens(r);
  const int32_t n = r.NumTokensToCompute() - cached;
  std::vector<BlockCopy> copies;
  EXPECT_TRUE(kv.Admit(r, n, n, copies));
  EXPECT_EQ(r.num_computed_tokens, cached);
  const int32_t from = r.num_computed_tokens;
  r.num_computed_tokens += n;
  kv.CacheComputedBlocks(r, from, r.num_computed_tokens);
  return cached;
}

std::u32string Repeat(char32_t c, int n) { return std::u32string(static_cast<size_t>(n), c); }

// Every block's reference count is the number of tables holding it; used blocks are
// those held; evictable ones are the cached blocks nobody holds.
void ExpectConsistent(const KvCacheManager& kv, const std::vector<Request*>& requests) {
  std::map<int32_t, int32_t> holders;
  for (const Request* r : requests) {
    for (const int32_t b : r->block_table) ++holders[b];
  }
  int32_t unreferenced_cached = 0;
  for (int32_t b = 0; b < kv.NumTotalBlocks(); ++b) {
    const auto it = holders.find(b);
    ASSERT_EQ(kv.RefCount(b), it == holders.end() ? 0 : it->second) << "block " << b;
    if (kv.Cache()->IsCached(b) && kv.RefCount(b) == 0) ++unreferenced_cached;
  }
  ASSERT_EQ(kv.NumUsedBlocks(), static_cast<int32_t>(holders.size()));
  ASSERT_EQ(kv.Cache()->NumEvictable(), unreferenced_cached);
}

class PrefixCacheTest : public testing::TestWithParam<PrefixCacheType> {};

// A second request with the same 40-token prompt (blocks of 8) takes 4 blocks = 32
// tokens from the cache, not 5: its last token is always computed. (Once computed, its
// fifth block duplicates a's: the radix tree then swaps it for a's, vLLM keeps it.)
TEST_P(PrefixCacheTest, SharesFullBlocksAndComputesTheLastToken) {
  KvCacheManager kv(16, 8, 0, 0, GetParam());
  Request a = Prompt(Repeat(U'a', 40), 0), b = Prompt(Repeat(U'a', 40), 1);
  EXPECT_EQ(AdmitAndPrefill(kv, a), 0);
  EXPECT_EQ(kv.Cache()->NumCached(), 5);
  EXPECT_EQ(AdmitAndPrefill(kv, b), 32);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(b.block_table[k], a.block_table[k]);
  EXPECT_EQ(b.block_table[4] == a.block_table[4], GetParam() == PrefixCacheType::kRadix);
  EXPECT_EQ(kv.RefCount(a.block_table[0]), 2);
  ExpectConsistent(kv, {&a, &b});
  EXPECT_EQ(kv.CacheStats().queried_tokens, 80);
  EXPECT_EQ(kv.CacheStats().hit_tokens, 32);
  EXPECT_EQ(kv.CacheStats().queried_blocks, 10);
  EXPECT_EQ(kv.CacheStats().hit_blocks, 4);
}

// Freed cached blocks stay cached and count as free; a request that has no key takes
// never-cached blocks first and evicts only when none is left.
TEST_P(PrefixCacheTest, FreedBlocksStayCachedUntilTheFreeOnesRunOut) {
  KvCacheManager kv(6, 4, 0, 0, GetParam());
  Request a = Prompt(Repeat(U'a', 20), 0);  // 5 blocks
  AdmitAndPrefill(kv, a);
  kv.Free(a);
  EXPECT_EQ(kv.NumFreeBlocks(), 6);
  EXPECT_EQ(kv.Cache()->NumEvictable(), 5);
  Request plain;
  plain.prompt_len = 8;
  plain.target_output_len = 1;
  plain.slot = 1;
  ASSERT_TRUE(kv.AllocateSlots(plain, 4));  // the never-cached block
  EXPECT_EQ(kv.CacheStats().evicted_blocks, 0);
  ASSERT_TRUE(kv.AllocateSlots(plain, 8));  // one eviction
  EXPECT_EQ(kv.CacheStats().evicted_blocks, 1);
  EXPECT_EQ(kv.Cache()->NumCached(), 4);
  // What is left of a's prefix still serves a match: 4 blocks minus the last token's.
  Request again = Prompt(Repeat(U'a', 20), 2);
  EXPECT_EQ(kv.CachedPrefixTokens(again), 16);
  ExpectConsistent(kv, {&plain});
}

// A request preempted by recompute finds its own blocks again when re-admitted.
TEST_P(PrefixCacheTest, RecomputeAfterPreemptionReusesItsOwnBlocks) {
  KvCacheManager kv(16, 4, 0, 0, GetParam());
  Request a = Prompt(Repeat(U'x', 17), 0);
  AdmitAndPrefill(kv, a);
  kv.Free(a);
  a.num_computed_tokens = 0;
  EXPECT_EQ(AdmitAndPrefill(kv, a), 16);
  ExpectConsistent(kv, {&a});
}

// Swapping out a request whose blocks are shared copies all of them and drops its
// references; the sharer keeps its blocks, and the swapped-in copies are private.
TEST_P(PrefixCacheTest, SwapOutOfSharedBlocksCopiesThemAndKeepsTheSharers) {
  KvCacheManager kv(16, 4, 0, /*num_host_blocks=*/8, GetParam());
  Request a = Prompt(Repeat(U'a', 12), 0), b = Prompt(Repeat(U'a', 12), 1);
  AdmitAndPrefill(kv, a);
  AdmitAndPrefill(kv, b);
  ASSERT_EQ(kv.RefCount(a.block_table[0]), 2);
  std::vector<BlockCopy> out, in;
  ASSERT_TRUE(kv.SwapOut(b, out));
  EXPECT_EQ(out.size(), 3u);
  EXPECT_EQ(kv.RefCount(a.block_table[0]), 1);
  ExpectConsistent(kv, {&a, &b});
  ASSERT_TRUE(kv.Admit(b, 1, 1, in));
  EXPECT_EQ(in.size(), 3u);
  for (int k = 0; k < 3; ++k) EXPECT_NE(b.block_table[k], a.block_table[k]);
  ExpectConsistent(kv, {&a, &b});
}

// Random admissions, growth, frees, swaps over a few shared prefixes: reference counts,
// used and evictable blocks stay exact, and everything is free at the end.
TEST_P(PrefixCacheTest, RandomOperationsKeepTheAccountsExact) {
  std::mt19937_64 rng(11);
  KvCacheManager kv(48, 4, 0, /*num_host_blocks=*/24, GetParam());
  std::vector<Request> requests;
  const std::u32string prefixes[] = {Repeat(U'p', 30), Repeat(U'q', 9) + Repeat(U'p', 21),
                                     Repeat(U'p', 13) + Repeat(U'r', 17)};
  for (int32_t i = 0; i < 10; ++i) requests.push_back(Prompt(prefixes[i % 3], i, 40));
  std::vector<Request*> all;
  for (Request& r : requests) all.push_back(&r);
  std::vector<BlockCopy> copies;
  for (int iter = 0; iter < 20000; ++iter) {
    Request& r = requests[rng() % requests.size()];
    const int32_t n = 1 + static_cast<int32_t>(rng() % 9);
    const uint64_t op = rng() % 10;
    const bool waiting = r.block_table.empty() && !kv.IsSwappedOut(r);
    if (op == 0) {
      kv.Free(r);
      r.num_computed_tokens = 0;
    } else if (op == 1 && !waiting && !kv.IsSwappedOut(r)) {
      kv.SwapOut(r, copies);
    } else if (waiting || kv.IsSwappedOut(r)) {
      const int32_t cached = kv.CachedPrefixTokens(r);
      const int32_t m = std::min(n, std::max(1, r.NumTokensToCompute() - cached));
      if (r.NumTokensToCompute() - cached < 1) continue;
      if (kv.Admit(r, m, m, copies)) {
        const int32_t from = r.num_computed_tokens;
        r.num_computed_tokens += m;
        kv.CacheComputedBlocks(r, from, r.num_computed_tokens);
      }
    } else if (r.num_computed_tokens + n < r.prompt_len + r.target_output_len &&
               kv.AllocateSlots(r, n)) {
      const int32_t from = r.num_computed_tokens;
      r.num_computed_tokens += n;
      kv.CacheComputedBlocks(r, from, r.num_computed_tokens);
    }
    ExpectConsistent(kv, all);
    if (HasFatalFailure()) return;
    for (const Request& q : requests) {
      if (kv.IsSwappedOut(q)) continue;
      ASSERT_EQ(q.block_table.size(), static_cast<size_t>((q.num_computed_tokens + 3) / 4));
    }
  }
  for (Request& r : requests) kv.Free(r);
  EXPECT_EQ(kv.NumFreeBlocks(), 48);
  EXPECT_EQ(kv.NumFreeHostBlocks(), 24);
  EXPECT_GT(kv.CacheStats().hit_tokens, 0);
  EXPECT_GT(kv.CacheStats().evicted_blocks, 0);
}

INSTANTIATE_TEST_SUITE_P(Types, PrefixCacheTest,
                         testing::Values(PrefixCacheType::kHash, PrefixCacheType::kRadix),
                         [](const testing::TestParamInfo<PrefixCacheType>& info) {
                           return std::string(NameOf(EnumNames<PrefixCacheType>(
                                                  kPrefixCacheTypeNames), info.param));
                         });

// Where the two differ. X is computed before A, A is freed before X. vLLM's list
// evicts by release time (A's tail first); the radix tree by last use (X's leaf first).
TEST(PrefixCacheOrderTest, HashEvictsByReleaseRadixByLastUse) {
  for (const PrefixCacheType type : {PrefixCacheType::kHash, PrefixCacheType::kRadix}) {
    KvCacheManager kv(5, 1, 0, 0, type);
    Request x = Prompt(U"xy", 0, 1), a = Prompt(U"abc", 1, 1);
    AdmitAndPrefill(kv, x);
    AdmitAndPrefill(kv, a);
    const int32_t a_tail = a.block_table[2], x_tail = x.block_table[1];
    kv.Free(a);
    kv.Free(x);
    Request plain;
    plain.prompt_len = 1;
    plain.target_output_len = 1;
    plain.slot = 2;
    ASSERT_TRUE(kv.AllocateSlots(plain, 1));
    EXPECT_EQ(plain.block_table[0], type == PrefixCacheType::kHash ? a_tail : x_tail);
  }
}

// The radix tree never evicts a block that has cached children; vLLM's list may, which
// leaves the children unreachable.
TEST(PrefixCacheOrderTest, RadixEvictsLeavesOnly) {
  KvCacheManager kv(4, 1, 0, 0, PrefixCacheType::kRadix);
  Request a = Prompt(U"abc", 0, 1);
  AdmitAndPrefill(kv, a);
  kv.Free(a);
  // "abz" uses a and b again (after c) and adds z: last uses c < a < b < z, every block
  // cached and unreferenced, none free.
  Request ab = Prompt(U"abz", 1, 1);
  EXPECT_EQ(AdmitAndPrefill(kv, ab), 2);
  kv.Free(ab);
  ASSERT_EQ(kv.Cache()->NumEvictable(), 4);
  const int32_t c = a.block_table[2], z = ab.block_table[2];
  Request plain;
  plain.prompt_len = 3;
  plain.target_output_len = 1;
  plain.slot = 2;
  ASSERT_TRUE(kv.AllocateSlots(plain, 1));
  EXPECT_EQ(plain.block_table[0], c) << "the least recently used leaf";
  ASSERT_TRUE(kv.AllocateSlots(plain, 2));
  EXPECT_EQ(plain.block_table[1], z) << "a is older, but has a child";
  EXPECT_EQ(kv.CachedPrefixTokens(Prompt(U"abq", 3, 1)), 2) << "a and b survive";
}

// Two requests computing the same prefix at once: vLLM keeps the second copy private;
// SGLang's tree switches the second request to the cached blocks and frees its own.
TEST(PrefixCacheOrderTest, RadixDeduplicatesConcurrentCopies) {
  for (const PrefixCacheType type : {PrefixCacheType::kHash, PrefixCacheType::kRadix}) {
    KvCacheManager kv(8, 2, 0, 0, type);
    Request a = Prompt(U"abcd", 0), b = Prompt(U"abcd", 1);
    std::vector<BlockCopy> copies;
    ASSERT_TRUE(kv.Admit(a, 4, 4, copies));
    ASSERT_TRUE(kv.Admit(b, 4, 4, copies));  // both admitted before either computed
    a.num_computed_tokens = b.num_computed_tokens = 4;
    kv.CacheComputedBlocks(a, 0, 4);
    kv.CacheComputedBlocks(b, 0, 4);
    const bool dedup = type == PrefixCacheType::kRadix;
    EXPECT_EQ(b.block_table == a.block_table, dedup);
    EXPECT_EQ(kv.NumUsedBlocks(), dedup ? 2 : 4);
    ExpectConsistent(kv, {&a, &b});
  }
}

// Renders the tree as the radix tree draws it: a run of single-child nodes is one edge.
std::string Shape(const RadixPrefixCache& tree, int32_t node,
                  const std::map<int32_t, char32_t>& token_of) {
  std::vector<std::string> edges;
  for (int32_t child : tree.Children(node)) {
    std::u32string label;
    int32_t end = child;
    for (;;) {
      label.push_back(token_of.at(end));
      const std::vector<int32_t> next = tree.Children(end);
      if (next.size() != 1) break;
      end = next[0];
    }
    std::string utf8;
    for (const char32_t c : label) {  // UTF-8 encode
      if (c < 0x80) {
        utf8 += static_cast<char>(c);
      } else if (c < 0x800) {
        utf8 += static_cast<char>(0xC0 | (c >> 6));
        utf8 += static_cast<char>(0x80 | (c & 0x3F));
      } else {
        utf8 += static_cast<char>(0xE0 | (c >> 12));
        utf8 += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        utf8 += static_cast<char>(0x80 | (c & 0x3F));
      }
    }
    const std::string below = Shape(tree, end, token_of);
    edges.push_back(below.empty() ? utf8 : utf8 + below);
  }
  if (edges.empty()) return "";
  std::sort(edges.begin(), edges.end());
  std::string out = "(";
  for (size_t i = 0; i < edges.size(); ++i) out += (i ? "|" : "") + edges[i];
  return out + ")";
}

// The seeds' RadixAttention example, one token per block: A and B share
// "请翻译以下内容为法语：", all three share "请". B reuses 11 tokens, C one, and the tree is
// 请 -> {翻译以下内容为法语： -> {A's text, B's text}, 总结以下内容：A's text}.
TEST(RadixTreeTest, SeedExampleSharesThePrefixes) {
  const std::u32string translate = U"请翻译以下内容为法语：", summarize = U"请总结以下内容：";
  const std::u32string text_a = U"春眠不觉晓", text_b = U"床前明月光";
  KvCacheManager kv(64, 1, 0, 0, PrefixCacheType::kRadix);
  Request a = Prompt(translate + text_a, 0), b = Prompt(translate + text_b, 1),
          c = Prompt(summarize + text_a, 2);
  EXPECT_EQ(AdmitAndPrefill(kv, a), 0);
  EXPECT_EQ(AdmitAndPrefill(kv, b), 11);
  EXPECT_EQ(AdmitAndPrefill(kv, c), 1);
  std::map<int32_t, char32_t> token_of;
  for (const Request* r : {&a, &b, &c}) {
    const std::u32string prompt = r == &a ? translate + text_a
                                  : r == &b ? translate + text_b : summarize + text_a;
    for (size_t i = 0; i < r->block_table.size(); ++i) token_of[r->block_table[i]] = prompt[i];
  }
  const auto& tree = static_cast<const RadixPrefixCache&>(*kv.Cache());
  EXPECT_EQ(Shape(tree, tree.Root(), token_of), "(请(总结以下内容：春眠不觉晓|翻译以下内容为法语：(床前明月光|春眠不觉晓)))");
  // "请" is one block held by all three: computed once.
  EXPECT_EQ(kv.RefCount(a.block_table[0]), 3);
  EXPECT_EQ(kv.NumUsedBlocks(), 16 + 5 + 12);
}

}  // namespace
}  // namespace servelab
