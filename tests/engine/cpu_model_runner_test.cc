// CpuModelRunner consistency: the same tokens give the same logits however a step plan
// splits them (token by token, chunks, batched with others), swapping restores the cache
// bit for bit, padding computes nothing, and the KV pool is sized from its byte budget.
#include "engine/cpu_model_runner.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "tests/engine/test_files.h"
#include "tests/engine/tiny_model.h"

namespace servelab {
namespace {

using testing::LogitsNear;
using testing::MakeRequest;
using testing::MakeRunner;
using testing::Row;
using testing::RunStep;
using testing::Seq;
using testing::TempDir;

constexpr int32_t kVocab = 97;

std::vector<int32_t> Tokens(int32_t n, int32_t salt) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) ids[i] = (i * 13 + salt * 29 + 5) % kVocab;
  return ids;
}

std::vector<int32_t> Blocks(int32_t first, int32_t count) {
  std::vector<int32_t> b(static_cast<size_t>(count));
  std::iota(b.begin(), b.end(), first);
  return b;
}

class CpuModelRunnerTest : public ::testing::TestWithParam<int32_t> {  // kv heads
 protected:
  void SetUp() override {
    weights_ = testing::WriteAndLoad(testing::TinyConfig(GetParam()), dir_.path());
  }
  TempDir dir_;
  std::shared_ptr<const ModelWeights> weights_;
};

// Prefills `ids` in chunks of `chunk`, then decodes `extra` greedy tokens; returns the
// prefill's final logits followed by the greedy tokens (as floats).
std::pair<std::vector<float>, std::vector<int32_t>> PrefillThenGreedy(
    std::shared_ptr<const ModelWeights> weights, const std::vector<int32_t>& ids, int32_t chunk,
    int32_t extra) {
  auto runner = MakeRunner(weights, 64, 4);
  TokenStore tokens;
  tokens.AddPrompt(1, ids);
  const auto n = static_cast<int32_t>(ids.size());
  Request r = MakeRequest(1, n, Blocks(0, 40));
  std::vector<float> logits;
  for (int32_t done = 0; done < n; done += chunk) {
    const int32_t len = std::min(chunk, n - done);
    logits = RunStep(*runner, tokens, {Seq(r, done, len, done + len == n)});
  }
  std::vector<float> first = logits;
  std::vector<int32_t> greedy;
  for (int32_t i = 0; i < extra; ++i) {
    greedy.push_back(testing::Argmax(logits));
    tokens.Append(1, greedy.back());
    logits = RunStep(*runner, tokens, {Seq(r, n + i, 1, true)});
  }
  return {first, greedy};
}

TEST_P(CpuModelRunnerTest, DecodingTokenByTokenEqualsOneFullForward) {
  const std::vector<int32_t> ids = Tokens(45, 1);
  auto stepwise = MakeRunner(weights_, 64, 4);
  TokenStore tokens;
  tokens.AddPrompt(1, ids);
  Request r = MakeRequest(1, 45, Blocks(20, 12));
  for (int32_t pos = 0; pos < 45; ++pos) {
    const std::vector<float> step = RunStep(*stepwise, tokens, {Seq(r, pos, 1, true)});
    if (pos % 11 != 10 && pos != 44) continue;
    // One forward over the first pos + 1 tokens, in a fresh pool.
    auto whole = MakeRunner(weights_, 64, 4);
    Request w = MakeRequest(1, 45, Blocks(0, 12));
    EXPECT_TRUE(LogitsNear(step, RunStep(*whole, tokens, {Seq(w, 0, pos + 1, true)})))
        << "position " << pos;
  }
}

TEST_P(CpuModelRunnerTest, ChunkedPrefillEqualsUnchunked) {
  const std::vector<int32_t> ids = Tokens(100, 2);
  const auto [whole, whole_greedy] = PrefillThenGreedy(weights_, ids, 100, 6);
  for (int32_t chunk : {1, 7, 64}) {
    const auto [logits, greedy] = PrefillThenGreedy(weights_, ids, chunk, 6);
    EXPECT_TRUE(LogitsNear(logits, whole)) << "chunk " << chunk;
    EXPECT_EQ(greedy, whole_greedy) << "chunk " << chunk;
  }
}

// Step 1: B prefills. Step 2: A's first chunk, B decodes, C prefills at once. Step 3: A's
// last chunk, B and C decode, a padding member rides along. Each emitting row equals the
// same request run alone with the same per-request chunks.
TEST_P(CpuModelRunnerTest, MixedBatchEqualsEachRequestAlone) {
  TokenStore tokens;
  tokens.AddPrompt(1, Tokens(30, 3));
  tokens.AddPrompt(2, Tokens(22, 4));
  tokens.AddPrompt(3, Tokens(27, 5));
  // Interleaved block ids, so one request's slots sit between another's.
  Request a = MakeRequest(1, 30, {0, 3, 6, 9, 12, 15, 18, 21});
  Request b = MakeRequest(2, 20, {1, 4, 7, 10, 13, 16});
  Request c = MakeRequest(3, 26, {2, 5, 8, 11, 14, 17, 20});
  Request done = MakeRequest(4, 5, {});
  auto batched = MakeRunner(weights_, 24, 4);
  RunStep(*batched, tokens, {Seq(b, 0, 20, true)});
  const std::vector<float> step2 =
      RunStep(*batched, tokens, {Seq(a, 0, 16, false), Seq(b, 20, 1, true), Seq(c, 0, 26, true)});
  ScheduledRequest padding{&done, 1, 9, false, true};
  const std::vector<float> step3 = RunStep(
      *batched, tokens, {Seq(b, 21, 1, true), padding, Seq(a, 16, 14, true), Seq(c, 26, 1, true)});
  ASSERT_EQ(step2.size(), 2u * kVocab);
  ASSERT_EQ(step3.size(), 3u * kVocab);

  auto alone = [&](Request& r, std::vector<std::pair<int32_t, int32_t>> chunks) {
    auto runner = MakeRunner(weights_, 24, 4);
    std::vector<std::vector<float>> rows;
    for (const auto& [computed, n] : chunks)
      rows.push_back(RunStep(*runner, tokens, {Seq(r, computed, n, true)}));
    return rows;
  };
  const auto a_alone = alone(a, {{0, 16}, {16, 14}});
  const auto b_alone = alone(b, {{0, 20}, {20, 1}, {21, 1}});
  const auto c_alone = alone(c, {{0, 26}, {26, 1}});
  EXPECT_TRUE(LogitsNear(Row(step2, kVocab, 0), b_alone[1]));
  EXPECT_TRUE(LogitsNear(Row(step2, kVocab, 1), c_alone[0]));
  EXPECT_TRUE(LogitsNear(Row(step3, kVocab, 0), b_alone[2]));
  EXPECT_TRUE(LogitsNear(Row(step3, kVocab, 1), a_alone[1]));
  EXPECT_TRUE(LogitsNear(Row(step3, kVocab, 2), c_alone[1]));
}

INSTANTIATE_TEST_SUITE_P(KvHeads, CpuModelRunnerTest, ::testing::Values(1, 2, 4));

TEST(CpuModelRunnerSwapTest, SwapOutAndInRestoresTheCacheBitForBit) {
  TempDir dir;
  auto weights = testing::WriteAndLoad(testing::TinyConfig(2), dir.path());
  auto runner = MakeRunner(weights, 8, 4, /*num_cpu_blocks=*/4);
  TokenStore tokens;
  tokens.AddPrompt(1, Tokens(8, 6));
  tokens.AddPrompt(2, Tokens(8, 7));
  Request a = MakeRequest(1, 7, {3, 5});
  RunStep(*runner, tokens, {Seq(a, 0, 7, true)});
  const int64_t floats = runner->BlockFloats();
  auto snapshot = [&](int32_t block) {
    std::vector<float> out;
    for (int32_t l = 0; l < 2; ++l) {
      for (std::span<const float> cache : {runner->KCache(l), runner->VCache(l)}) {
        out.insert(out.end(), cache.begin() + block * floats, cache.begin() + (block + 1) * floats);
      }
    }
    return out;
  };
  const std::vector<float> before3 = snapshot(3), before5 = snapshot(5);
  const BlockCopy out[] = {{3, 1}, {5, 0}};
  runner->SwapOut(out);
  // Another request overwrites the device blocks; then A comes back elsewhere.
  Request b = MakeRequest(2, 8, {5, 3});
  RunStep(*runner, tokens, {Seq(b, 0, 8, true)});
  ASSERT_NE(std::memcmp(snapshot(3).data(), before3.data(), before3.size() * sizeof(float)), 0);
  const BlockCopy in[] = {{1, 6}, {0, 2}};
  runner->SwapIn(in);
  EXPECT_EQ(std::memcmp(snapshot(6).data(), before3.data(), before3.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(snapshot(2).data(), before5.data(), before5.size() * sizeof(float)), 0);
  // Decoding from the restored blocks is bit-identical to decoding from the originals.
  a.block_table = {6, 2};
  const std::vector<float> resumed = RunStep(*runner, tokens, {Seq(a, 7, 1, true)});
  auto fresh = MakeRunner(weights, 8, 4);
  Request never = MakeRequest(1, 7, {3, 5});
  RunStep(*fresh, tokens, {Seq(never, 0, 7, true)});
  const std::vector<float> expected = RunStep(*fresh, tokens, {Seq(never, 7, 1, true)});
  EXPECT_EQ(std::memcmp(resumed.data(), expected.data(), expected.size() * sizeof(float)), 0);
}

TEST(CpuModelRunnerSwapTest, PoolSizedFromTheByteBudget) {
  TempDir dir;
  auto weights = testing::WriteAndLoad(testing::TinyConfig(2), dir.path());
  CpuRunnerOptions options;
  options.block_size = 16;
  options.kv_cache_bytes = 1 << 20;
  options.num_cpu_blocks = 3;
  auto runner = CpuModelRunner::Create(weights, options);
  ASSERT_TRUE(runner.ok()) << runner.status().message();
  // 2 (K, V) x 2 layers x 16 tokens x 2 kv heads x 16 dims x 4 bytes = 8 KiB per block.
  const KvCapacity capacity = (*runner)->Capacity();
  EXPECT_EQ(capacity.bytes_per_block, 8192);
  EXPECT_EQ(capacity.num_gpu_blocks, 128);
  EXPECT_EQ(capacity.num_cpu_blocks, 3);
  EXPECT_EQ((*runner)->KCache(1).size(), 128u * 16 * 32);
  options.kv_cache_bytes = 8191;
  auto too_small = CpuModelRunner::Create(weights, options);
  ASSERT_FALSE(too_small.ok());
  EXPECT_NE(too_small.status().message().find("holds 0 KV blocks of 8192 bytes"), std::string::npos)
      << too_small.status().message();
}

TEST(CpuModelRunnerSwapTest, SlidingWindowBeyondItIsAnError) {
  TempDir dir;
  ModelConfig config = testing::TinyConfig(2, ModelFamily::kMistral);
  config.sliding_window = 8;
  auto weights = testing::WriteAndLoad(config, dir.path());
  auto runner = MakeRunner(weights);
  TokenStore tokens;
  tokens.AddPrompt(1, Tokens(9, 1));
  Request r = MakeRequest(1, 9, Blocks(0, 3));
  StepPlan plan;
  plan.seqs = {Seq(r, 0, 8, true)};
  std::vector<float> logits;
  EXPECT_TRUE(runner->Execute(plan, tokens, logits).ok());
  plan.seqs = {Seq(r, 8, 1, true)};
  const Status status = runner->Execute(plan, tokens, logits);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("sliding_window 8"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace servelab
