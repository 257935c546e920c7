#include "kernels/embedding_gather.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tests/kernels/kernel_test_util.h"

namespace servelab::kernels {
namespace {

using testing::Poison;
using testing::RandomNormal;

TEST(EmbeddingGatherTest, CopiesTableRowsExactly) {
  std::mt19937 rng(1);
  const int32_t vocab = 50, hidden = 96;
  const auto table = RandomNormal(vocab * hidden, rng);
  const std::vector<int32_t> ids = {7, 0, 49, 7, 13};  // repeats and both ends
  std::vector<float> out(ids.size() * hidden);
  Poison(out);
  cpu::EmbeddingGather(out.data(), table.data(), ids.data(), 5, vocab, hidden);
  for (size_t t = 0; t < ids.size(); ++t) {
    for (int32_t i = 0; i < hidden; ++i) {
      ASSERT_EQ(out[t * hidden + i], table[ids[t] * hidden + i]) << "token " << t;
    }
  }
}

TEST(EmbeddingGatherTest, NoTokensTouchesNothing) {
  const std::vector<float> table(4 * 8, 1.0f);
  std::vector<float> out(8, 3.0f);
  cpu::EmbeddingGather(out.data(), table.data(), nullptr, 0, 4, 8);
  EXPECT_EQ(out, std::vector<float>(8, 3.0f));
}

TEST(EmbeddingGatherDeathTest, IdOutOfRangeIsABug) {
  const std::vector<float> table(4 * 8, 1.0f);
  std::vector<float> out(8);
  const int32_t too_big = 4, negative = -1;
  EXPECT_DEATH(cpu::EmbeddingGather(out.data(), table.data(), &too_big, 1, 4, 8),
               "CHECK failed.*id 4, vocab 4");
  EXPECT_DEATH(cpu::EmbeddingGather(out.data(), table.data(), &negative, 1, 4, 8), "CHECK failed");
}

}  // namespace
}  // namespace servelab::kernels
