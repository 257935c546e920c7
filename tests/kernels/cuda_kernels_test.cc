// The CUDA kernels against their CPU twins (kernels/cpu/), on fresh random inputs rounded
// to bf16 (the twins see exactly the values the device sees, as f32). Device outputs are
// poisoned with NaN (all-ones bytes) before every launch. Without a CUDA device every test
// reports SKIPPED with the runtime's reason, so CI (no GPU) shows them as skipped.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/bf16.h"
#include "kernels/cuda/kernels.h"
#include "kernels/embedding_gather.h"
#include "kernels/kernel_check.h"
#include "kernels/paged_attention.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/silu_and_mul.h"
#include "kernels/write_kv_cache.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/paged_kv_fixture.h"

namespace servelab::kernels {
namespace {

using cuda::bf16;
using cuda::RoundToBf16;
using testing::AttentionGeometry;
using testing::ExpectRowsNear;
using testing::PagedKvFixture;
using testing::Poison;
using testing::CudaOk;
using testing::CudaTest;
using testing::DeviceArray;
using testing::DownloadF32;
using testing::RandomNormal;
using testing::Sync;
using testing::UploadBf16;

constexpr double kElementwiseTol = 1e-2;  // a few bf16 ulps of the row's magnitude
constexpr double kAttentionTol = 2e-2;

std::vector<double> ToDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST_F(CudaTest, WriteKvCacheMatchesTwinBitForBit) {
  const KvCacheShape shape{9, 16, 8, 128};
  const int32_t num_tokens = 50;
  std::vector<int64_t> slots(shape.NumSlots());
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng_);
  slots.resize(num_tokens);
  for (int i = 0; i < num_tokens; i += 7) slots[i] = -1;  // padding
  const auto k = RoundToBf16(RandomNormal(num_tokens * shape.SlotStride(), rng_));
  const auto v = RoundToBf16(RandomNormal(num_tokens * shape.SlotStride(), rng_));
  std::vector<float> k_cache(shape.NumElements()), v_cache(shape.NumElements());
  Poison(k_cache);
  Poison(v_cache);
  cpu::WriteKvCache(k_cache.data(), v_cache.data(), k.data(), v.data(), slots.data(), num_tokens,
                    shape);

  DeviceArray<bf16> d_k_cache(shape.NumElements()), d_v_cache(shape.NumElements());
  d_k_cache.Poison();
  d_v_cache.Poison();
  DeviceArray<bf16> d_k = UploadBf16(k), d_v = UploadBf16(v);
  DeviceArray<int64_t> d_slots(slots);
  cuda::WriteKvCache(d_k_cache.get(), d_v_cache.get(), d_k.get(), d_v.get(), d_slots.get(),
                     num_tokens, shape, nullptr);
  Sync();
  for (const auto& [got, want] : {std::pair{DownloadF32(d_k_cache), k_cache},
                                  std::pair{DownloadF32(d_v_cache), v_cache}}) {
    int mismatches = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const bool same = std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i];
      if (!same && mismatches++ < 5) ADD_FAILURE() << "element " << i << ": " << got[i] << " vs " << want[i];
    }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST_F(CudaTest, RmsNormAndFusedAddMatchTwin) {
  for (const int32_t hidden : {4096, 1000, 8}) {
    const int32_t num_tokens = 5;
    const auto x = RoundToBf16(RandomNormal(size_t(num_tokens) * hidden, rng_));
    const auto residual = RoundToBf16(RandomNormal(size_t(num_tokens) * hidden, rng_));
    auto weight = RandomNormal(hidden, rng_, 0.2f);
    for (float& w : weight) w += 1.0f;
    weight = RoundToBf16(weight);
    const float eps = 1e-5f;
    const std::string what = "hidden " + std::to_string(hidden);

    std::vector<float> want(x.size());
    cpu::RmsNorm(want.data(), x.data(), weight.data(), num_tokens, hidden, eps);
    DeviceArray<bf16> d_x = UploadBf16(x), d_w = UploadBf16(weight), d_out(x.size());
    d_out.Poison();
    cuda::RmsNorm(d_out.get(), d_x.get(), d_w.get(), num_tokens, hidden, eps, nullptr);
    Sync();
    ExpectRowsNear(DownloadF32(d_out), ToDouble(want), hidden, kElementwiseTol, "RmsNorm " + what);
    cuda::RmsNorm(d_x.get(), d_x.get(), d_w.get(), num_tokens, hidden, eps, nullptr);  // in place
    Sync();
    ExpectRowsNear(DownloadF32(d_x), ToDouble(want), hidden, kElementwiseTol,
                   "RmsNorm in place " + what);

    std::vector<float> want_x = x, want_res = residual;
    cpu::FusedAddRmsNorm(want_x.data(), want_res.data(), weight.data(), num_tokens, hidden, eps);
    DeviceArray<bf16> d_x2 = UploadBf16(x), d_res = UploadBf16(residual);
    cuda::FusedAddRmsNorm(d_x2.get(), d_res.get(), d_w.get(), num_tokens, hidden, eps, nullptr);
    Sync();
    ExpectRowsNear(DownloadF32(d_x2), ToDouble(want_x), hidden, kElementwiseTol,
                   "FusedAddRmsNorm x " + what);
    ExpectRowsNear(DownloadF32(d_res), ToDouble(want_res), hidden, kElementwiseTol,
                   "FusedAddRmsNorm residual " + what);
  }
}

TEST_F(CudaTest, ApplyRopeMatchesTwin) {
  for (const int32_t head_dim : {64, 128}) {
    const int32_t num_tokens = 9, num_heads = 32, num_kv_heads = 8;
    std::vector<int32_t> positions = {0, 1, 2, 15, 16, 1000, 8191, 8192, 131071};
    const auto inv_freq = RopeInvFreq(head_dim, 500000.0, Llama3RopeScaling{});
    auto q = RoundToBf16(RandomNormal(size_t(num_tokens) * num_heads * head_dim, rng_));
    auto k = RoundToBf16(RandomNormal(size_t(num_tokens) * num_kv_heads * head_dim, rng_));
    DeviceArray<bf16> d_q = UploadBf16(q), d_k = UploadBf16(k);
    DeviceArray<int32_t> d_pos(positions);
    DeviceArray<float> d_freq(inv_freq);
    cpu::ApplyRope(q.data(), k.data(), positions.data(), inv_freq.data(), num_tokens, num_heads,
                   num_kv_heads, head_dim);
    cuda::ApplyRope(d_q.get(), d_k.get(), d_pos.get(), d_freq.get(), num_tokens, num_heads,
                    num_kv_heads, head_dim, nullptr);
    Sync();
    const std::string what = "head_dim " + std::to_string(head_dim);
    ExpectRowsNear(DownloadF32(d_q), ToDouble(q), head_dim, kElementwiseTol, "rope q " + what);
    ExpectRowsNear(DownloadF32(d_k), ToDouble(k), head_dim, kElementwiseTol, "rope k " + what);
  }
}

TEST_F(CudaTest, SiluAndMulMatchesTwin) {
  for (const int32_t d : {14336, 300}) {
    const int32_t num_tokens = 3;
    const auto input = RoundToBf16(RandomNormal(size_t(num_tokens) * 2 * d, rng_, 2.0f));
    std::vector<float> want(size_t(num_tokens) * d);
    cpu::SiluAndMul(want.data(), input.data(), num_tokens, d);
    DeviceArray<bf16> d_in = UploadBf16(input), d_out(want.size());
    d_out.Poison();
    cuda::SiluAndMul(d_out.get(), d_in.get(), num_tokens, d, nullptr);
    Sync();
    ExpectRowsNear(DownloadF32(d_out), ToDouble(want), d, kElementwiseTol,
                   "d " + std::to_string(d));
  }
}

TEST_F(CudaTest, EmbeddingGatherMatchesTwinExactly) {
  for (const int32_t hidden : {4096, 100}) {  // 16-byte path, element path
    const int32_t vocab = 1000, num_tokens = 37;
    const auto table = RoundToBf16(RandomNormal(size_t(vocab) * hidden, rng_));
    std::vector<int32_t> ids(num_tokens);
    std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
    for (int32_t& id : ids) id = pick(rng_);
    ids[0] = 0;
    ids[1] = vocab - 1;
    std::vector<float> want(size_t(num_tokens) * hidden);
    cpu::EmbeddingGather(want.data(), table.data(), ids.data(), num_tokens, vocab, hidden);
    DeviceArray<bf16> d_table = UploadBf16(table), d_out(want.size());
    DeviceArray<int32_t> d_ids(ids);
    d_out.Poison();
    cuda::EmbeddingGather(d_out.get(), d_table.get(), d_ids.get(), num_tokens, vocab, hidden,
                          nullptr);
    Sync();
    EXPECT_EQ(DownloadF32(d_out), want) << "hidden " << hidden;
  }
}

// Lowest index of the largest value: the sampler's contract.
int32_t HostArgmax(const float* row, int32_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);  // first of the maxima
}

TEST_F(CudaTest, GreedySampleIsArgmaxWithLowestIndexOnTies) {
  for (const int32_t vocab : {128256, 1000, 7}) {
    const int32_t num_tokens = 4;
    auto logits = RoundToBf16(RandomNormal(size_t(num_tokens) * vocab, rng_, 3.0f));
    // Token 1: a tie between two positions at a new maximum; token 2: the max at the end.
    const float top = 100.0f;
    logits[size_t(vocab) + vocab / 2] = top;
    logits[size_t(vocab) + vocab / 3] = top;
    logits[2 * size_t(vocab) + vocab - 1] = top;
    std::vector<int32_t> want(num_tokens);
    for (int32_t t = 0; t < num_tokens; ++t) want[t] = HostArgmax(&logits[size_t(t) * vocab], vocab);

    DeviceArray<bf16> d_bf16 = UploadBf16(logits);
    DeviceArray<float> d_f32(logits);
    DeviceArray<int32_t> d_ids(num_tokens);
    d_ids.Poison();
    cuda::GreedySample(d_ids.get(), d_bf16.get(), num_tokens, vocab, nullptr);
    Sync();
    EXPECT_EQ(d_ids.Download(), want) << "bf16 logits, vocab " << vocab;
    d_ids.Poison();
    cuda::GreedySample(d_ids.get(), d_f32.get(), num_tokens, vocab, nullptr);
    Sync();
    EXPECT_EQ(d_ids.Download(), want) << "f32 logits, vocab " << vocab;
  }
}

// The fixture's f32 cache rounded to bf16 (NaN in never-written slots stays NaN): what the
// twin reads, and, converted, what the device reads.
struct BfCache {
  std::vector<float> k, v;
  DeviceArray<bf16> d_k, d_v;
  explicit BfCache(const PagedKvFixture& f)
      : k(RoundToBf16({f.KCache(), f.KCache() + f.Shape().NumElements()})),
        v(RoundToBf16({f.VCache(), f.VCache() + f.Shape().NumElements()})),
        d_k(UploadBf16(k)),
        d_v(UploadBf16(v)) {}
};

// (query heads per kv head, head_dim)
class CudaAttentionTest : public CudaTest,
                          public ::testing::WithParamInterface<std::tuple<int32_t, int32_t>> {
 protected:
  AttentionGeometry Geometry() const {
    const auto [group, head_dim] = GetParam();
    return AttentionGeometry{2 * group, 2, head_dim, 16};
  }
  int32_t TokenElems() const { return Geometry().num_heads * Geometry().head_dim; }
};

TEST_P(CudaAttentionTest, DecodeMatchesTwinSplitAndUnsplit) {
  // Around the block size (16), the split-KV partitions (128, 256, 512) and several of them.
  const std::vector<int32_t> lens = {1, 15, 16, 17, 127, 129, 255, 257, 511, 512, 513, 1100, 2049};
  PagedKvFixture f(Geometry(), lens, rng_());
  f.WriteAll();
  BfCache cache(f);
  const int32_t num_heads = Geometry().num_heads;
  const auto q = RoundToBf16(RandomNormal(lens.size() * TokenElems(), f.Rng()));
  std::vector<float> want(q.size());
  cpu::PagedDecodeAttention(want.data(), q.data(), cache.k.data(), cache.v.data(), f.BlockTables(),
                            lens.data(), f.NumSeqs(), num_heads, f.MaxBlocksPerSeq(), f.MaxLen(),
                            f.Scale(), f.Shape());

  DeviceArray<bf16> d_q = UploadBf16(q), d_out(q.size());
  DeviceArray<int32_t> d_tables(std::vector<int32_t>(
      f.BlockTables(), f.BlockTables() + size_t(f.NumSeqs()) * f.MaxBlocksPerSeq()));
  DeviceArray<int32_t> d_lens(lens);
  // The shortest partitions need the most scratch; it serves every length.
  const size_t ws_bytes = cuda::PagedDecodeAttentionWorkspaceBytes(f.NumSeqs(), num_heads,
                                                                   f.MaxLen(), f.Shape(), 128);
  ASSERT_GT(ws_bytes, 0u);
  ASSERT_GE(ws_bytes, cuda::PagedDecodeAttentionWorkspaceBytes(f.NumSeqs(), num_heads, f.MaxLen(),
                                                               f.Shape()));
  DeviceArray<float> d_ws(ws_bytes / sizeof(float));
  // Split with the automatic length, with each length forced, and unsplit.
  for (const int32_t partition_len : {0, 128, 256, 512, -1}) {
    const bool split = partition_len >= 0;
    d_out.Poison();
    d_ws.Poison();
    cuda::PagedDecodeAttention(d_out.get(), d_q.get(), cache.d_k.get(), cache.d_v.get(),
                               d_tables.get(), d_lens.get(), f.NumSeqs(), num_heads,
                               f.MaxBlocksPerSeq(), f.MaxLen(), f.Scale(), f.Shape(),
                               split ? d_ws.get() : nullptr, split ? ws_bytes : 0, nullptr,
                               split ? partition_len : 0);
    Sync();
    ExpectRowsNear(DownloadF32(d_out), ToDouble(want), Geometry().head_dim, kAttentionTol,
                   split ? "decode, split " + std::to_string(partition_len) : "decode, unsplit");
  }
}

TEST_P(CudaAttentionTest, PrefillMatchesTwinWholeAndChunked) {
  const std::vector<int32_t> lens = {1, 15, 16, 17, 100, 130, 700};
  PagedKvFixture f(Geometry(), lens, rng_());
  f.WriteAll();
  BfCache cache(f);
  const int32_t num_heads = Geometry().num_heads;
  DeviceArray<int32_t> d_tables(std::vector<int32_t>(
      f.BlockTables(), f.BlockTables() + size_t(f.NumSeqs()) * f.MaxBlocksPerSeq()));
  DeviceArray<int32_t> d_lens(lens);
  // Whole prompts, then chunks that follow cached context (a chunk of 1 is a decode); sizes
  // cross the per-block query tile (64 rows / group tokens) and the 32-position K/V tile.
  for (const std::vector<int32_t>& query_lens :
       {lens, std::vector<int32_t>{1, 7, 1, 16, 37, 129, 65}}) {
    std::vector<int32_t> start(query_lens.size() + 1, 0);
    std::partial_sum(query_lens.begin(), query_lens.end(), start.begin() + 1);
    const int32_t num_tokens = start.back();
    const int32_t max_query_len = *std::max_element(query_lens.begin(), query_lens.end());
    const auto q = RoundToBf16(RandomNormal(size_t(num_tokens) * TokenElems(), f.Rng()));
    std::vector<float> want(q.size());
    cpu::PagedPrefillAttention(want.data(), q.data(), cache.k.data(), cache.v.data(),
                               f.BlockTables(), start.data(), lens.data(), f.NumSeqs(), num_tokens,
                               num_heads, f.MaxBlocksPerSeq(), max_query_len, f.MaxLen(),
                               f.Scale(), f.Shape());
    DeviceArray<bf16> d_q = UploadBf16(q), d_out(q.size());
    DeviceArray<int32_t> d_start(start);
    d_out.Poison();
    cuda::PagedPrefillAttention(d_out.get(), d_q.get(), cache.d_k.get(), cache.d_v.get(),
                                d_tables.get(), d_start.get(), d_lens.get(), f.NumSeqs(),
                                num_tokens, num_heads, f.MaxBlocksPerSeq(), max_query_len,
                                f.MaxLen(), f.Scale(), f.Shape(), nullptr);
    Sync();
    ExpectRowsNear(DownloadF32(d_out), ToDouble(want), Geometry().head_dim, kAttentionTol,
                   query_lens == lens ? "prefill, whole prompts" : "prefill, chunks");
  }
}

INSTANTIATE_TEST_SUITE_P(GroupsAndHeadDims, CudaAttentionTest,
                         // Every GQA group the runner accepts up to 8 (3: a padded tile)
                         // and every head_dim, 256 included (32 KB of shared memory at 8).
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values(64, 128, 256)),
                         [](const auto& info) {
                           return "group" + std::to_string(std::get<0>(info.param)) + "_dim" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace servelab::kernels

// Prefill attention on tensor cores (head_dim 64 and 128; 256 stays on CUDA cores): long
// chunks over cached prefixes, decode rows mixed with chunks in one launch, idle sequences.
namespace servelab::kernels {
namespace {

// The tensor-core path rounds the softmax weights P to bf16 before P V, as FlashAttention
// does: up to 2^-8 relative per weight, random in sign, which moves an output by ~0.1% and
// well under 1% of its row's magnitude; with the bf16 rounding of the output itself (2^-8 of
// the element) the error stays under ~1%, so 2e-2 of the row's magnitude holds with room.
constexpr double kTensorCoreAttentionTol = 2e-2;

// One packed prefill launch against the CPU twin: sequence s holds context_lens[s] tokens in
// the cache (this step's included), the last query_lens[s] of them new (0: idle this step).
// Both sides see the same bf16-rounded cache and q (q ~ N(0, q_stddev^2): larger values give
// peaked softmax rows whose running max keeps moving); the device output is NaN-poisoned.
void ExpectPrefillMatchesTwin(const AttentionGeometry& g, const std::vector<int32_t>& context_lens,
                              const std::vector<int32_t>& query_lens, float q_stddev,
                              uint32_t seed, const std::string& what,
                              double tol = kTensorCoreAttentionTol) {
  ASSERT_EQ(context_lens.size(), query_lens.size()) << what;
  PagedKvFixture f(g, context_lens, seed);
  f.WriteAll();
  BfCache cache(f);
  std::vector<int32_t> start(query_lens.size() + 1, 0);
  std::partial_sum(query_lens.begin(), query_lens.end(), start.begin() + 1);
  const int32_t num_tokens = start.back();
  const int32_t max_query_len = *std::max_element(query_lens.begin(), query_lens.end());
  const auto q = RoundToBf16(
      RandomNormal(size_t(num_tokens) * g.num_heads * g.head_dim, f.Rng(), q_stddev));
  std::vector<float> want(q.size());
  cpu::PagedPrefillAttention(want.data(), q.data(), cache.k.data(), cache.v.data(),
                             f.BlockTables(), start.data(), context_lens.data(), f.NumSeqs(),
                             num_tokens, g.num_heads, f.MaxBlocksPerSeq(), max_query_len,
                             f.MaxLen(), f.Scale(), f.Shape());

  DeviceArray<int32_t> d_tables(std::vector<int32_t>(
      f.BlockTables(), f.BlockTables() + size_t(f.NumSeqs()) * f.MaxBlocksPerSeq()));
  DeviceArray<int32_t> d_lens(context_lens), d_start(start);
  DeviceArray<bf16> d_q = UploadBf16(q), d_out(q.size());
  d_out.Poison();
  cuda::PagedPrefillAttention(d_out.get(), d_q.get(), cache.d_k.get(), cache.d_v.get(),
                              d_tables.get(), d_start.get(), d_lens.get(), f.NumSeqs(), num_tokens,
                              g.num_heads, f.MaxBlocksPerSeq(), max_query_len, f.MaxLen(),
                              f.Scale(), f.Shape(), nullptr);
  Sync();
  ExpectRowsNear(DownloadF32(d_out), ToDouble(want), g.head_dim, tol, what);
}

TEST_P(CudaAttentionTest, PrefillTensorCoresLongChunksOverCachedPrefixes) {
  // Chunks of 300 and 1000 after 700 and 1100 cached positions (many 64-row query tiles and
  // 64-position K/V tiles, neither length a multiple of either), a decode row, an idle one.
  ExpectPrefillMatchesTwin(Geometry(), {1000, 2100, 1031, 40}, {300, 1000, 1, 0}, 1.0f, rng_(),
                           "prefill, long chunks");
}

TEST_P(CudaAttentionTest, PrefillTensorCoresMixesDecodeRowsAndChunks) {
  // Decode rows (chunk of 1) at contexts 1, 5, 700, 2049, 64; whole prompts of 33, 129 and
  // 16; chunks of 63 and 17 after cached prefixes; idle sequences (chunk of 0) in between.
  // Block sizes 16 and 7 (tiles then cross cache blocks mid-row); q scales 1 and 8 (flat and
  // peaked softmax rows).
  const std::vector<int32_t> context_lens = {1, 5, 700, 33, 129, 2049, 64, 130, 40, 16, 77};
  const std::vector<int32_t> query_lens = {1, 1, 1, 33, 129, 1, 1, 63, 0, 16, 17};
  const auto [group, head_dim] = GetParam();
  for (const int32_t block_size : {16, 7}) {
    for (const float q_stddev : {1.0f, 8.0f}) {
      ExpectPrefillMatchesTwin(AttentionGeometry{2 * group, 2, head_dim, block_size},
                               context_lens, query_lens, q_stddev, rng_(),
                               "prefill, mixed batch, block " + std::to_string(block_size) +
                                   ", q stddev " + std::to_string(q_stddev));
    }
  }
}

TEST_P(CudaAttentionTest, PrefillTensorCoresDecodeOnlyAndSingleSequence) {
  // A launch of decode rows only (every chunk 1; contexts around the 64-position K/V tile),
  // then one whole prompt of 257 = 4 * 64 + 1 positions (its last K/V tile holds one position,
  // its last query tile is partial for every group).
  ExpectPrefillMatchesTwin(Geometry(), {1, 2, 63, 64, 65, 128, 129, 1000},
                           {1, 1, 1, 1, 1, 1, 1, 1}, 1.0f, rng_(), "prefill, decode rows only");
  ExpectPrefillMatchesTwin(Geometry(), {257}, {257}, 1.0f, rng_(), "prefill, one whole prompt");
}

TEST_F(CudaTest, PrefillHeadDim256StaysOnCudaCoresAndMatchesTwin) {
  // head_dim 256 is the CUDA-core path (f32 weights): the ordinary attention tolerance.
  ExpectPrefillMatchesTwin(AttentionGeometry{8, 2, 256, 16}, {1, 17, 300, 129, 50},
                           {1, 17, 100, 64, 0}, 1.0f, rng_(), "prefill, head_dim 256",
                           kAttentionTol);
}

}  // namespace
}  // namespace servelab::kernels
