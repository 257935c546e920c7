// TokenStore keeps prompt then generated ids per request; SyntheticPrompt is a pure
// function of (seed, request id) and covers the vocabulary uniformly.
#include "engine/token_store.h"

#include <gtest/gtest.h>

#include <cmath>

namespace servelab {
namespace {

TEST(TokenStoreTest, PromptThenGeneratedByPosition) {
  TokenStore store;
  EXPECT_FALSE(store.Contains(3));
  store.AddPrompt(3, {10, 11, 12});
  store.Append(3, 40);
  store.Append(3, 41);
  const std::span<const int32_t> all = store.Tokens(3);
  EXPECT_EQ(std::vector<int32_t>(all.begin(), all.end()),
            (std::vector<int32_t>{10, 11, 12, 40, 41}));
  EXPECT_EQ(store.PromptLen(3), 3);
  const std::span<const int32_t> generated = store.Generated(3);
  EXPECT_EQ(std::vector<int32_t>(generated.begin(), generated.end()),
            (std::vector<int32_t>{40, 41}));
  EXPECT_EQ(store.NumRequests(), 1u);
  store.Forget(3);
  store.Forget(3);  // absent: no-op
  EXPECT_FALSE(store.Contains(3));
  EXPECT_EQ(store.NumRequests(), 0u);
}

TEST(TokenStoreTest, SyntheticPromptIsAFunctionOfSeedAndId) {
  EXPECT_EQ(SyntheticPrompt(1, 5, 64, 1000), SyntheticPrompt(1, 5, 64, 1000));
  EXPECT_NE(SyntheticPrompt(1, 5, 64, 1000), SyntheticPrompt(1, 6, 64, 1000));
  EXPECT_NE(SyntheticPrompt(1, 5, 64, 1000), SyntheticPrompt(2, 5, 64, 1000));
  // A longer prompt extends a shorter one (one stream per request).
  const std::vector<int32_t> long_prompt = SyntheticPrompt(1, 5, 100, 1000);
  EXPECT_EQ(std::vector<int32_t>(long_prompt.begin(), long_prompt.begin() + 64),
            SyntheticPrompt(1, 5, 64, 1000));
  EXPECT_TRUE(SyntheticPrompt(1, 5, 0, 1000).empty());
}

TEST(TokenStoreTest, SyntheticPromptIsUniformOverTheVocabulary) {
  const int32_t vocab = 10, n = 100000;
  std::vector<int32_t> counts(vocab, 0);
  for (int32_t id : SyntheticPrompt(42, 7, n, vocab)) {
    ASSERT_TRUE(id >= 0 && id < vocab);
    ++counts[id];
  }
  // Each bucket ~ Binomial(n, 0.1): sd ~ 95; 5 sd bounds.
  for (int32_t c : counts) EXPECT_NEAR(c, n / vocab, 475);
}

}  // namespace
}  // namespace servelab
