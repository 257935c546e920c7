#include "kernels/paged_attention.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/paged_kv_fixture.h"

namespace servelab::kernels {
namespace {

using testing::AttentionGeometry;
using testing::ExpectRowsNear;
using testing::PagedKvFixture;
using testing::Poison;
using testing::RandomNormal;

constexpr double kRelTol = 1e-5;
// Lengths around the block size (16): a lone token, one short of a block, exactly one,
// one past, and several blocks with a partial last one.
const std::vector<int32_t> kLens = {1, 15, 16, 17, 100};

// Runs PagedPrefillAttention for query_lens[s] new tokens per sequence (the last ones of
// its context, every context fully written). Returns out [num_query_tokens, H, D].
std::vector<float> RunPrefill(const PagedKvFixture& f, const std::vector<int32_t>& query_lens,
                              const std::vector<int32_t>& context_lens, const std::vector<float>& q,
                              int32_t num_heads) {
  std::vector<int32_t> start(query_lens.size() + 1, 0);
  std::partial_sum(query_lens.begin(), query_lens.end(), start.begin() + 1);
  const int32_t num_tokens = start.back();
  std::vector<float> out(size_t(num_tokens) * num_heads * f.Shape().head_dim);
  Poison(out);
  cpu::PagedPrefillAttention(
      out.data(), q.data(), f.KCache(), f.VCache(), f.BlockTables(), start.data(),
      context_lens.data(), f.NumSeqs(), num_tokens, num_heads, f.MaxBlocksPerSeq(),
      *std::max_element(query_lens.begin(), query_lens.end()), f.MaxLen(), f.Scale(), f.Shape());
  return out;
}

// (query heads per kv head, head_dim)
class PagedAttentionTest : public ::testing::TestWithParam<std::tuple<int32_t, int32_t>> {
 protected:
  AttentionGeometry Geometry() const {
    const auto [group, head_dim] = GetParam();
    return AttentionGeometry{2 * group, 2, head_dim, 16};
  }
  int32_t TokenElems() const { return Geometry().num_heads * Geometry().head_dim; }
};

TEST_P(PagedAttentionTest, DecodeMatchesDenseReference) {
  PagedKvFixture f(Geometry(), kLens, 1);
  f.WriteAll();
  const int32_t num_heads = Geometry().num_heads;
  const auto q = RandomNormal(kLens.size() * TokenElems(), f.Rng());
  std::vector<float> out(q.size());
  Poison(out);
  cpu::PagedDecodeAttention(out.data(), q.data(), f.KCache(), f.VCache(), f.BlockTables(),
                            kLens.data(), f.NumSeqs(), num_heads, f.MaxBlocksPerSeq(), f.MaxLen(),
                            f.Scale(), f.Shape());
  std::vector<double> want;
  for (int32_t s = 0; s < f.NumSeqs(); ++s) {
    f.Reference(s, q.data() + s * TokenElems(), kLens[s] - 1, want);
  }
  ExpectRowsNear(out, want, Geometry().head_dim, kRelTol, "decode");
}

TEST_P(PagedAttentionTest, PrefillMatchesDenseReference) {
  PagedKvFixture f(Geometry(), kLens, 2);
  f.WriteAll();
  // Whole prompts, then chunks that follow cached context (a chunk of 1 is a decode).
  for (const std::vector<int32_t>& query_lens : {kLens, std::vector<int32_t>{1, 7, 1, 16, 37}}) {
    int32_t num_tokens = std::accumulate(query_lens.begin(), query_lens.end(), 0);
    const auto q = RandomNormal(size_t(num_tokens) * TokenElems(), f.Rng());
    const auto out = RunPrefill(f, query_lens, kLens, q, Geometry().num_heads);
    std::vector<double> want;
    int32_t token = 0;
    for (int32_t s = 0; s < f.NumSeqs(); ++s) {
      for (int32_t i = 0; i < query_lens[s]; ++i, ++token) {
        f.Reference(s, q.data() + token * TokenElems(), kLens[s] - query_lens[s] + i, want);
      }
    }
    ExpectRowsNear(out, want, Geometry().head_dim, kRelTol,
                   "prefill, chunk of seq 4 = " + std::to_string(query_lens[4]));
  }
}

TEST_P(PagedAttentionTest, DecodeIsPrefillOfOneToken) {
  PagedKvFixture f(Geometry(), kLens, 3);
  f.WriteAll();
  const auto q = RandomNormal(kLens.size() * TokenElems(), f.Rng());
  std::vector<float> decode(q.size());
  Poison(decode);
  cpu::PagedDecodeAttention(decode.data(), q.data(), f.KCache(), f.VCache(), f.BlockTables(),
                            kLens.data(), f.NumSeqs(), Geometry().num_heads, f.MaxBlocksPerSeq(),
                            f.MaxLen(), f.Scale(), f.Shape());
  const auto prefill =
      RunPrefill(f, std::vector<int32_t>(kLens.size(), 1), kLens, q, Geometry().num_heads);
  EXPECT_EQ(decode, prefill);  // same arithmetic in the same order: bitwise equal
}

// Prefilling in chunks (each chunk's K/V written just before its attention, later
// positions still unwritten NaN) gives what one whole-prompt pass gives.
TEST_P(PagedAttentionTest, ChunkedPrefillEqualsUnchunked) {
  const std::vector<int32_t> lens = {100, 17};
  const int32_t num_heads = Geometry().num_heads;
  PagedKvFixture whole(Geometry(), lens, 4);
  whole.WriteAll();
  const auto q = RandomNormal(size_t(117) * TokenElems(), whole.Rng());  // packed, seq 0 first
  const auto want = RunPrefill(whole, lens, lens, q, num_heads);
  std::vector<double> reference;
  for (int32_t s = 0; s < 2; ++s) {
    for (int32_t p = 0; p < lens[s]; ++p) {
      whole.Reference(s, q.data() + (s * 100 + p) * TokenElems(), p, reference);
    }
  }
  ExpectRowsNear(want, reference, Geometry().head_dim, kRelTol, "unchunked");

  for (int32_t chunk : {1, 7, 64}) {
    PagedKvFixture f(Geometry(), lens, 4);  // same seed: same K/V and block tables
    std::vector<float> got(want.size());
    Poison(got);
    std::vector<int32_t> done = {0, 0};
    while (done[0] < lens[0] || done[1] < lens[1]) {
      std::vector<int32_t> query_lens(2), context_lens(2);
      std::vector<float> q_step;
      for (int32_t s = 0; s < 2; ++s) {
        query_lens[s] = std::min(chunk, lens[s] - done[s]);  // 0 once finished
        context_lens[s] = done[s] + query_lens[s];
        f.Write(s, done[s], context_lens[s]);
        const float* first = q.data() + (s * 100 + done[s]) * TokenElems();
        q_step.insert(q_step.end(), first, first + query_lens[s] * TokenElems());
      }
      const auto out = RunPrefill(f, query_lens, context_lens, q_step, num_heads);
      std::copy(out.begin(), out.begin() + query_lens[0] * TokenElems(),
                got.begin() + done[0] * TokenElems());
      std::copy(out.begin() + query_lens[0] * TokenElems(), out.end(),
                got.begin() + (100 + done[1]) * TokenElems());
      done = context_lens;
    }
    // Each query token's result depends only on its q and the cache prefix it sees.
    EXPECT_EQ(got, want) << "chunk " << chunk;
  }
}

// Scores of +-100 and beyond overflow exp() in f32 without the running max.
TEST_P(PagedAttentionTest, LargeScoresStayFinite) {
  PagedKvFixture f(Geometry(), kLens, 5);
  f.WriteAll();
  const auto q = RandomNormal(kLens.size() * TokenElems(), f.Rng(), 60.0f);
  const auto out =
      RunPrefill(f, std::vector<int32_t>(kLens.size(), 1), kLens, q, Geometry().num_heads);
  std::vector<double> want;
  for (int32_t s = 0; s < f.NumSeqs(); ++s) {
    f.Reference(s, q.data() + s * TokenElems(), kLens[s] - 1, want);
  }
  // Scores this large carry f32 rounding of ~1e-5 absolute into the weights.
  ExpectRowsNear(out, want, Geometry().head_dim, 1e-4, "large scores");
}

INSTANTIATE_TEST_SUITE_P(GqaAndHeadDim, PagedAttentionTest,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Values(64, 128)),
                         [](const auto& info) {
                           return "group" + std::to_string(std::get<0>(info.param)) + "_dim" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(PagedAttentionDeathTest, BlockIdOutOfRangeIsABug) {
  PagedKvFixture f(AttentionGeometry{2, 2, 64, 16}, {20}, 6);
  f.WriteAll();
  std::vector<int32_t> bad_table = {f.BlockTables()[0], f.Shape().num_blocks};
  const auto q = RandomNormal(2 * 64, f.Rng());
  std::vector<float> out(q.size());
  const int32_t len = 20;
  EXPECT_DEATH(cpu::PagedDecodeAttention(out.data(), q.data(), f.KCache(), f.VCache(),
                                         bad_table.data(), &len, 1, 2, 2, 20, f.Scale(), f.Shape()),
               "CHECK failed");
}

TEST(PagedAttentionDeathTest, ContextBeyondBlockTableIsABug) {
  PagedKvFixture f(AttentionGeometry{2, 2, 64, 16}, {20}, 7);
  f.WriteAll();
  const auto q = RandomNormal(2 * 64, f.Rng());
  std::vector<float> out(q.size());
  const int32_t len = 33;  // 3 blocks, the table holds 2
  EXPECT_DEATH(
      cpu::PagedDecodeAttention(out.data(), q.data(), f.KCache(), f.VCache(), f.BlockTables(), &len,
                                1, 2, f.MaxBlocksPerSeq(), 40, f.Scale(), f.Shape()),
      "CHECK failed");
}

}  // namespace
}  // namespace servelab::kernels
