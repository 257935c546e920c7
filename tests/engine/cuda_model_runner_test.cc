// CudaModelRunner against the CPU reference runner on small models with head_dim 64 (the
// CUDA kernels' smallest): logits of prefill, chunked, mixed and decode steps agree to
// bf16 accuracy; graph replays agree with eager steps; swap restores the cache; the
// scheduler-driven engine keeps its greedy tokens under recompute and swap preemption;
// the KV pool fills memory_utilization of the device. Without a device every test but
// the argument checks reports SKIPPED with the reason.
#include "engine/cuda/cuda_model_runner.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <optional>
#include <tuple>

#include "kernels/decode_graph_shape.h"
#include "kernels/top_p_sample.h"
#include "tests/engine/engine_drive.h"
#include "tests/engine/test_files.h"
#include "tests/engine/tiny_model.h"

namespace servelab {
namespace {

using testing::LogitsNear;
using testing::MakeRequest;
using testing::Row;
using testing::RunStep;
using testing::Seq;
using testing::TempDir;

constexpr int32_t kVocab = 512;
// bf16 weights, activations and KV against the f32 reference: about 2^-8 relative per
// rounding, a few dozen roundings deep. 3% of the row's largest logit is an order of
// magnitude above what two layers accumulate and far below what a wrong position, head or
// block produces (those change logits by their whole scale).
constexpr double kBf16Rel = 0.03;
// Over the 40 greedy decode steps the bf16 cache and activations drift further from the f32
// reference (each step attends over every earlier rounding): one row of a step may pass
// kBf16Rel by itself. Measured on an H200 over the 126 rows of each shape: medians 1.19 to
// 1.68%, maxima 1.78 to 3.13% (hidden 512 with GQA 8 the largest), the same with prefill on
// CUDA cores, so rounding rather than a kernel. Each row within 5%, far below what a wrong
// position, head or block does (the logits' whole scale); their median within 2.5%, so
// that an error spread over every row is not let through by the looser bound.
constexpr double kBf16RowRelDecode = 0.05;
constexpr double kBf16MedianRel = 0.025;

ModelConfig CudaTinyConfig(int32_t heads, int32_t kv_heads,
                           ModelFamily family = ModelFamily::kLlama) {
  ModelConfig c = testing::TinyConfig(kv_heads, family);
  c.spec.num_attention_heads = heads;
  c.spec.head_dim = 64;
  c.spec.hidden_size = heads * 64;
  c.spec.intermediate_size = 2 * heads * 64;
  c.spec.vocab_size = kVocab;
  c.spec.max_position_embeddings = 2048;
  return c;
}

std::vector<int32_t> Tokens(int32_t n, int32_t salt) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) ids[i] = (i * 37 + salt * 101 + 5) % kVocab;
  return ids;
}

std::vector<int32_t> Blocks(int32_t first, int32_t count, int32_t step = 1) {
  std::vector<int32_t> b(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) b[i] = first + i * step;
  return b;
}

std::unique_ptr<CudaModelRunner> MakeCudaRunner(std::shared_ptr<const ModelWeights> weights,
                                                int32_t num_blocks, int32_t block_size,
                                                bool graphs = true, int64_t swap_bytes = 0) {
  CudaRunnerOptions options;
  options.block_size = block_size;
  options.num_blocks = num_blocks;
  options.cuda_graphs = graphs;
  options.max_num_seqs = 16;
  options.max_num_batched_tokens = 1024;
  options.swap_space_bytes = swap_bytes;
  auto runner = CudaModelRunner::Create(std::move(weights), options);
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  return runner.ok() ? std::move(*runner) : nullptr;
}

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!CudaDeviceUsable(&why)) GTEST_SKIP() << why;
  }
};

// (query heads, kv heads, family): GQA groups 1, 4 and 8, and Qwen2's q/k/v biases.
using Shape = std::tuple<int32_t, int32_t, ModelFamily>;

class CudaRunnerVsCpuTest : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    std::string why;
    if (!CudaDeviceUsable(&why)) GTEST_SKIP() << why;
    const auto [heads, kv_heads, family] = GetParam();
    weights_ = testing::WriteAndLoad(CudaTinyConfig(heads, kv_heads, family), dir_.path(), 11, 1,
                                     /*init_std=*/0.05);
  }
  TempDir dir_;
  std::shared_ptr<const ModelWeights> weights_;
};

// Three requests through prefill, a mixed step (a chunk, a decode, a whole prompt), a step
// with a padding member, then 40 greedy decode steps (graph replays, contexts crossing
// block and 16-block boundaries); every step's logits against the CPU runner's.
TEST_P(CudaRunnerVsCpuTest, LogitsMatchTheCpuRunnerStepByStep) {
  constexpr int32_t kBlock = 16;
  auto cpu = testing::MakeRunner(weights_, 48, kBlock);
  auto gpu = MakeCudaRunner(weights_, 48, kBlock);
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->NumCapturedGraphs(), 15);
  TokenStore tokens;
  tokens.AddPrompt(1, Tokens(70, 3));
  tokens.AddPrompt(2, Tokens(40, 4));
  tokens.AddPrompt(3, Tokens(33, 5));
  Request a = MakeRequest(1, 70, Blocks(0, 12, 3));  // interleaved block ids
  Request b = MakeRequest(2, 40, Blocks(1, 12, 3));
  Request c = MakeRequest(3, 33, Blocks(2, 12, 3));
  Request done = MakeRequest(4, 5, {});
  ScheduledRequest padding{&done, 1, 9, false, true};
  std::vector<double> errors;  // every row's max |diff| over its scale
  auto both = [&](std::vector<ScheduledRequest> seqs, const std::string& what, double rel = kBf16Rel) {
    const std::vector<float> want = RunStep(*cpu, tokens, seqs);
    const std::vector<float> got = RunStep(*gpu, tokens, seqs);
    EXPECT_EQ(got.size(), want.size()) << what;
    const size_t rows = want.size() / kVocab;
    for (size_t r = 0; r < rows; ++r) {
      const auto row = static_cast<int32_t>(r);
      EXPECT_TRUE(LogitsNear(Row(got, kVocab, row), Row(want, kVocab, row), rel)) << what << ", row " << r;
      errors.push_back(testing::LogitsRelError(Row(got, kVocab, row), Row(want, kVocab, row)));
    }
    return want;
  };
  both({Seq(b, 0, 40, true)}, "prefill");
  tokens.Append(2, 7);
  b.num_generated = 1;
  both({Seq(a, 0, 48, false), Seq(b, 40, 1, true), Seq(c, 0, 33, true)}, "mixed");
  EXPECT_FALSE(gpu->LastDecodeGraph().has_value());
  tokens.Append(2, 8);
  tokens.Append(3, 9);
  b.num_generated = 2;
  c.num_generated = 1;
  std::vector<float> last = both(
      {Seq(b, 41, 1, true), padding, Seq(a, 48, 22, true), Seq(c, 33, 1, true)}, "padding");
  // Greedy decode of all three (the CPU's argmax feeds both runners the same ids).
  Request* order[] = {&b, &a, &c};
  for (int32_t step = 0; step < 40; ++step) {
    std::vector<ScheduledRequest> seqs;
    for (int32_t i = 0; i < 3; ++i) {
      Request& r = *order[i];
      const int32_t next = testing::Argmax(Row(last, kVocab, i));
      tokens.Append(r.id, next);
      r.num_generated += 1;
      seqs.push_back(Seq(r, r.NumTokens() - 1, 1, true));
    }
    last = both(seqs, "decode step " + std::to_string(step), kBf16RowRelDecode);
    const std::optional<DecodeGraphRun> graph = gpu->LastDecodeGraph();
    ASSERT_TRUE(graph.has_value()) << step;
    EXPECT_EQ(graph->rows, 4) << step;  // three sequences and one padding row
  }
  std::vector<double> sorted = errors;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_FALSE(sorted.empty());
  const double median = sorted[sorted.size() / 2];
  std::printf("logits vs the CPU runner over %zu rows: median %.3f%%, p90 %.3f%%, max %.3f%% of the row's scale\n",
              sorted.size(), 100 * median, 100 * sorted[sorted.size() * 9 / 10], 100 * sorted.back());
  EXPECT_LE(median, kBf16MedianRel);
  // Batches 1, 2, 4, 8, 16 x context buckets 512, 1024, 2048, all captured at creation:
  // no step captured another.
  EXPECT_EQ(gpu->NumCapturedGraphs(), 15);
}

// One long prompt (1,300 tokens, in chunks of 256) then decodes: the decode kernel splits
// the context into partitions (128 tokens for one sequence) and merges them.
TEST_P(CudaRunnerVsCpuTest, LongContextSplitKvMatchesTheCpuRunner) {
  constexpr int32_t kBlock = 16;
  auto cpu = testing::MakeRunner(weights_, 100, kBlock);
  auto gpu = MakeCudaRunner(weights_, 100, kBlock);
  ASSERT_NE(gpu, nullptr);
  TokenStore tokens;
  tokens.AddPrompt(1, Tokens(1300, 7));
  std::vector<int32_t> blocks = Blocks(0, 95);
  std::reverse(blocks.begin(), blocks.end());  // a block table that is not the identity
  Request r = MakeRequest(1, 1300, blocks);
  std::vector<float> want, got;
  for (int32_t done = 0; done < 1300; done += 256) {
    const int32_t len = std::min(256, 1300 - done);
    want = RunStep(*cpu, tokens, {Seq(r, done, len, done + len == 1300)});
    got = RunStep(*gpu, tokens, {Seq(r, done, len, done + len == 1300)});
  }
  EXPECT_TRUE(LogitsNear(got, want, kBf16Rel));
  for (int32_t i = 0; i < 8; ++i) {
    tokens.Append(1, testing::Argmax(want));
    r.num_generated += 1;
    want = RunStep(*cpu, tokens, {Seq(r, r.NumTokens() - 1, 1, true)});
    got = RunStep(*gpu, tokens, {Seq(r, r.NumTokens() - 1, 1, true)});
    EXPECT_TRUE(LogitsNear(got, want, kBf16Rel)) << "decode " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaRunnerVsCpuTest,
    ::testing::Values(Shape{4, 4, ModelFamily::kLlama}, Shape{4, 1, ModelFamily::kLlama},
                      Shape{8, 1, ModelFamily::kLlama}, Shape{4, 2, ModelFamily::kQwen2}),
    [](const ::testing::TestParamInfo<Shape>& info) {
      return "heads" + std::to_string(std::get<0>(info.param)) + "_kv" +
             std::to_string(std::get<1>(info.param)) + "_" +
             std::string(ModelTypeName(std::get<2>(info.param)));
    });

class CudaRunnerTest : public CudaDeviceTest {
 protected:
  void SetUp() override {
    CudaDeviceTest::SetUp();
    if (IsSkipped()) return;
    weights_ = testing::WriteAndLoad(CudaTinyConfig(4, 2), dir_.path(), 11, 1, 0.05);
  }
  TempDir dir_;
  std::shared_ptr<const ModelWeights> weights_;
};

// Greedy decoding of 5 requests for 30 steps: replayed graphs (batch 5 padded to 8) and
// eager steps give the same tokens and logits to bf16 accuracy (cuBLAS may pick another
// algorithm for 8 rows than for 5), and device-side greedy equals the host's argmax.
TEST_F(CudaRunnerTest, GraphReplayAgreesWithEagerSteps) {
  auto graphed = MakeCudaRunner(weights_, 64, 16, /*graphs=*/true);
  auto eager = MakeCudaRunner(weights_, 64, 16, /*graphs=*/false);
  ASSERT_NE(graphed, nullptr);
  ASSERT_NE(eager, nullptr);
  TokenStore tokens;
  std::vector<Request> requests;
  for (int32_t i = 0; i < 5; ++i) {
    tokens.AddPrompt(i, Tokens(20 + 9 * i, i));
    requests.push_back(MakeRequest(i, 20 + 9 * i, Blocks(12 * i, 12)));
  }
  std::vector<ScheduledRequest> prefill;
  for (Request& r : requests) prefill.push_back(Seq(r, 0, r.prompt_len, true));
  std::vector<float> want = RunStep(*eager, tokens, prefill);
  RunStep(*graphed, tokens, prefill);
  for (int32_t step = 0; step < 30; ++step) {
    StepPlan plan;
    for (int32_t i = 0; i < 5; ++i) {
      Request& r = requests[static_cast<size_t>(i)];
      tokens.Append(r.id, testing::Argmax(Row(want, kVocab, i)));
      r.num_generated += 1;
      plan.seqs.push_back(Seq(r, r.NumTokens() - 1, 1, true));
    }
    plan.num_emitting = 5;
    std::vector<float> got;
    ASSERT_TRUE(graphed->Execute(plan, tokens, got).ok());
    const std::optional<DecodeGraphRun> graph = graphed->LastDecodeGraph();
    ASSERT_TRUE(graph.has_value());
    EXPECT_EQ(graph->rows, 8);
    EXPECT_EQ(graph->context_bucket, 512);  // contexts below 100
    // Sampling after a replay (the same step again: the same KV is written): greedy ids are
    // the argmax of the replay's logits; top-p ids are the twin's on them.
    std::vector<int32_t> graph_ids;
    const std::vector<double> draws{0.1, 0.3, 0.5, 0.7, 0.9};
    ASSERT_TRUE(graphed->ExecuteAndSample(plan, tokens, SamplingParams{}, draws, graph_ids).ok());
    ASSERT_EQ(graph_ids.size(), 5u);
    for (int32_t i = 0; i < 5; ++i) EXPECT_EQ(graph_ids[i], testing::Argmax(Row(got, kVocab, i)));
    if (step % 10 == 0) {
      const SamplingParams hot{0.9f, 0, 0.8f, 0};
      ASSERT_TRUE(graphed->ExecuteAndSample(plan, tokens, hot, draws, graph_ids).ok());
      EXPECT_TRUE(graphed->LastDecodeGraph().has_value());
      std::vector<int32_t> twin(5, -1);
      const std::vector<float> temperature(5, hot.temperature), top_p(5, hot.top_p);
      const std::vector<int32_t> top_k(5, hot.top_k);
      kernels::cpu::TopPSample(twin.data(), got.data(), temperature.data(), top_k.data(),
                               top_p.data(), draws.data(), 5, kVocab);
      EXPECT_EQ(graph_ids, twin) << "step " << step;
    }
    std::vector<int32_t> ids;
    const std::vector<double> uniforms(5, 0.5);
    ASSERT_TRUE(eager->ExecuteAndSample(plan, tokens, SamplingParams{}, uniforms, ids).ok());
    // The eager runner has now run this step; rerun it for its logits (same inputs, so the
    // same KV is written again).
    ASSERT_TRUE(eager->Execute(plan, tokens, want).ok());
    EXPECT_FALSE(eager->LastDecodeGraph().has_value());
    ASSERT_EQ(ids.size(), 5u);
    for (int32_t i = 0; i < 5; ++i) {
      EXPECT_TRUE(LogitsNear(Row(got, kVocab, i), Row(want, kVocab, i), 0.01)) << step << "/" << i;
      EXPECT_EQ(ids[static_cast<size_t>(i)], testing::Argmax(Row(want, kVocab, i)));
    }
  }
}

// The graph a decode step replays follows the runner's limits (max_num_seqs 6: 5 sequences
// run the graph of 6 rows, not 8; max_model_len 300: the bucket is 300, not 512), and a
// step that replays none (a prefill chunk; a decode while an op timer is set) reports none,
// whatever the step before it replayed.
TEST_F(CudaRunnerTest, TheGraphReportedFollowsTheRunnersLimits) {
  CudaRunnerOptions options;
  options.block_size = 16;
  options.num_blocks = 64;
  options.max_num_seqs = 6;
  options.max_num_batched_tokens = 512;
  options.max_model_len = 300;
  auto made = CudaModelRunner::Create(weights_, options);
  ASSERT_TRUE(made.ok()) << made.status().message();
  CudaModelRunner& runner = **made;
  TokenStore tokens;
  std::vector<Request> requests;
  std::vector<ScheduledRequest> prefill;
  for (int32_t i = 0; i < 5; ++i) {
    tokens.AddPrompt(i, Tokens(20 + 9 * i, i));
    requests.push_back(MakeRequest(i, 20 + 9 * i, Blocks(12 * i, 12)));
  }
  for (Request& r : requests) prefill.push_back(Seq(r, 0, r.prompt_len, true));
  RunStep(runner, tokens, prefill);
  EXPECT_FALSE(runner.LastDecodeGraph().has_value());
  auto decode = [&]() {
    std::vector<ScheduledRequest> seqs;
    for (Request& r : requests) {
      tokens.Append(r.id, 1);
      r.num_generated += 1;
      seqs.push_back(Seq(r, r.NumTokens() - 1, 1, true));
    }
    RunStep(runner, tokens, seqs);
  };
  decode();
  const std::optional<DecodeGraphRun> graph = runner.LastDecodeGraph();
  ASSERT_TRUE(graph.has_value());
  EXPECT_EQ(graph->rows, kernels::DecodeGraphBatch(5, 6));
  EXPECT_EQ(graph->rows, 6);
  EXPECT_EQ(graph->context_bucket, 300);
  // Timed op by op: run eagerly, no graph reported (not the last step's).
  struct Laps final : OpTimer {
    void Record(Op, double) override { ++count; }
    int64_t count = 0;
  } laps;
  runner.SetOpTimer(&laps);
  decode();
  runner.SetOpTimer(nullptr);
  EXPECT_GT(laps.count, 0);
  EXPECT_FALSE(runner.LastDecodeGraph().has_value());
  decode();
  EXPECT_TRUE(runner.LastDecodeGraph().has_value());
  tokens.AddPrompt(9, Tokens(40, 9));
  Request late = MakeRequest(9, 40, Blocks(60, 4));
  RunStep(runner, tokens, {Seq(late, 0, 40, true)});
  EXPECT_FALSE(runner.LastDecodeGraph().has_value());
}

// Decoding across a context bucket boundary (contexts 509 .. 520: graphs of bucket 512,
// then 1024, whose partition counts and block-table strides differ) against the CPU runner.
TEST_F(CudaRunnerTest, DecodeAcrossAContextBucketBoundary) {
  auto cpu = testing::MakeRunner(weights_, 48, 16);
  auto gpu = MakeCudaRunner(weights_, 48, 16);
  ASSERT_NE(gpu, nullptr);
  TokenStore tokens;
  tokens.AddPrompt(1, Tokens(508, 9));
  Request r = MakeRequest(1, 508, Blocks(0, 40));
  std::vector<float> want = RunStep(*cpu, tokens, {Seq(r, 0, 508, true)});
  std::vector<float> got = RunStep(*gpu, tokens, {Seq(r, 0, 508, true)});
  EXPECT_TRUE(LogitsNear(got, want, kBf16Rel));
  for (int32_t i = 0; i < 12; ++i) {
    tokens.Append(1, testing::Argmax(want));
    r.num_generated += 1;
    want = RunStep(*cpu, tokens, {Seq(r, r.NumTokens() - 1, 1, true)});
    got = RunStep(*gpu, tokens, {Seq(r, r.NumTokens() - 1, 1, true)});
    EXPECT_TRUE(gpu->LastDecodeGraph().has_value());
    EXPECT_TRUE(LogitsNear(got, want, kBf16Rel)) << "context " << r.NumTokens();
  }
  EXPECT_EQ(gpu->NumCapturedGraphs(), 15);
}

// Temperature sampling on the device: the token TopPSample draws from the step's logits
// equals the CPU twin's on the same logits and draws (kernels/top_p_sample.h's rule).
TEST_F(CudaRunnerTest, DeviceTopPSamplingFollowsItsTwin) {
  auto runner = MakeCudaRunner(weights_, 64, 16);
  ASSERT_NE(runner, nullptr);
  TokenStore tokens;
  std::vector<Request> requests;
  StepPlan plan;
  std::vector<double> uniforms;
  for (int32_t i = 0; i < 6; ++i) {
    tokens.AddPrompt(i, Tokens(10 + 5 * i, i + 20));
    requests.push_back(MakeRequest(i, 10 + 5 * i, Blocks(4 * i, 4)));
    uniforms.push_back((i + 0.37) / 6.0);
  }
  for (Request& r : requests) plan.seqs.push_back(Seq(r, 0, r.prompt_len, true));
  plan.num_emitting = 6;
  const SamplingParams params{0.7f, 40, 0.9f, 0};
  for (int32_t repeat = 0; repeat < 2; ++repeat) {  // the same step again: the same KV
    std::vector<float> logits;
    ASSERT_TRUE(runner->Execute(plan, tokens, logits).ok());
    std::vector<int32_t> got;
    ASSERT_TRUE(runner->ExecuteAndSample(plan, tokens, params, uniforms, got).ok());
    std::vector<int32_t> want(6, -1);
    const std::vector<float> temperature(6, params.temperature), top_p(6, params.top_p);
    const std::vector<int32_t> top_k(6, params.top_k);
    kernels::cpu::TopPSample(want.data(), logits.data(), temperature.data(), top_k.data(),
                             top_p.data(), uniforms.data(), 6, kVocab);
    EXPECT_EQ(got, want);
  }
}

// Swap out a request's blocks, let another request overwrite them, swap them back into
// other blocks: its next decode gives bit-identical logits to the run without swapping.
TEST_F(CudaRunnerTest, SwapOutAndInRestoresTheCache) {
  auto runner = MakeCudaRunner(weights_, 16, 16, true, int64_t{64} << 20);
  auto reference = MakeCudaRunner(weights_, 16, 16, true, 0);
  ASSERT_NE(runner, nullptr);
  ASSERT_NE(reference, nullptr);
  ASSERT_GT(runner->Capacity().num_cpu_blocks, 4);
  TokenStore tokens;
  tokens.AddPrompt(1, Tokens(40, 1));
  tokens.AddPrompt(2, Tokens(45, 2));
  Request a = MakeRequest(1, 40, {0, 1, 2});
  RunStep(*runner, tokens, {Seq(a, 0, 40, true)});
  RunStep(*reference, tokens, {Seq(a, 0, 40, true)});
  // Blocks 0 and 1 form a run (one 2D copy for both), block 2 goes alone.
  runner->SwapOut(std::vector<BlockCopy>{{0, 3}, {1, 4}, {2, 0}});
  Request b = MakeRequest(2, 45, {0, 1, 2});  // overwrites a's device blocks
  RunStep(*runner, tokens, {Seq(b, 0, 45, true)});
  runner->SwapIn(std::vector<BlockCopy>{{3, 5}, {4, 6}, {0, 7}});
  a.block_table = {5, 6, 7};
  tokens.Append(1, 17);
  a.num_generated = 1;
  const std::vector<float> got = RunStep(*runner, tokens, {Seq(a, 40, 1, true)});
  a.block_table = {0, 1, 2};
  const std::vector<float> want = RunStep(*reference, tokens, {Seq(a, 40, 1, true)});
  EXPECT_EQ(got, want);
}

// How many of `sampled` (request `id`'s greedy tokens from the CUDA engine) are not a
// greedy choice of the f32 CPU runner fed the same ids: a token counts as greedy when its
// CPU logit is within 2 x kBf16Rel of the row's scale from the row's maximum: the CUDA
// argmax's CPU logit can trail the CPU maximum by two logit errors, each <= kBf16Rel.
int32_t NonGreedyTokens(std::shared_ptr<const ModelWeights> weights, int64_t id,
                        const std::vector<int32_t>& prompt, const std::vector<int32_t>& sampled) {
  auto cpu = testing::MakeRunner(weights, 64, 4);
  TokenStore tokens;
  const auto prompt_len = static_cast<int32_t>(prompt.size());
  tokens.AddPrompt(id, prompt);
  Request r = MakeRequest(id, prompt_len, Blocks(0, 64));
  std::vector<float> logits = RunStep(*cpu, tokens, {Seq(r, 0, prompt_len, true)});
  int32_t bad = 0;
  for (const int32_t token : sampled) {
    const float top = *std::max_element(logits.begin(), logits.end());
    float scale = 0.0f;
    for (float x : logits) scale = std::max(scale, std::abs(x));
    if (top - logits[static_cast<size_t>(token)] > 2 * kBf16Rel * scale) ++bad;
    tokens.Append(id, token);
    r.num_generated += 1;
    logits = RunStep(*cpu, tokens, {Seq(r, r.NumTokens() - 1, 1, true)});
  }
  return bad;
}

// The scheduler-driven engine (chunked prefill mixed with decodes, as the CPU engine's
// tests), without preemption, with recompute and with swap: every request gets exactly
// its target, every id is released, and every sampled token is a greedy choice of the f32
// reference up to bf16 near-ties. (Exact equality across the three runs is not expected:
// after a preemption the batches differ, cuBLAS may pick other kernels, and a re-prefill
// runs the prefill kernel where decode steps ran; a near-tie may then flip a token and the
// rest of that request follows another path.)
TEST_F(CudaRunnerTest, PreemptionKeepsGreedyDecodingUnderTheScheduler) {
  testing::RunOptions options;
  options.backend.ignore_eos = true;
  const testing::Outcome reference = testing::DriveEngine(MakeCudaRunner(weights_, 200, 4), options);
  EXPECT_EQ(reference.preemptions, 0);
  const testing::Outcome recomputed = testing::DriveEngine(MakeCudaRunner(weights_, 24, 4), options);
  EXPECT_GT(recomputed.preemptions, 0);
  EXPECT_GT(recomputed.reprefills, 0);
  testing::RunOptions swap = options;
  swap.preemption = PreemptionMode::kSwap;
  const testing::Outcome swapped =
      testing::DriveEngine(MakeCudaRunner(weights_, 24, 4, true, int64_t{16} << 20), swap);
  EXPECT_GT(swapped.swap_steps, 0);
  for (const testing::Outcome* o : {&reference, &recomputed, &swapped}) {
    for (const auto& [id, sampled] : o->tokens) {
      EXPECT_EQ(static_cast<int32_t>(sampled.size()), o->target.at(id)) << id;
      EXPECT_EQ(NonGreedyTokens(weights_, id, o->prompts.at(id), sampled), 0)
          << "request " << id;
    }
    EXPECT_EQ(o->tokens_left, 0u);
  }
}

// Prefix caching on the CUDA runner: the same block tables as the CPU engine's test
// (shared prefixes, their blocks computed once; with room and under recompute
// preemption), every sampled token a greedy choice of the f32 reference.
TEST_F(CudaRunnerTest, PrefixCachingKeepsGreedyDecoding) {
  for (const PrefixCacheType type : {PrefixCacheType::kHash, PrefixCacheType::kRadix}) {
    for (const int32_t blocks : {200, 24}) {
      testing::RunOptions options;
      options.backend.ignore_eos = true;
      options.shared_prefixes = true;
      options.prefix_cache = type;
      const testing::Outcome o = testing::DriveEngine(MakeCudaRunner(weights_, blocks, 4), options);
      EXPECT_GT(o.cached_tokens, 0);
      if (blocks == 24) {
        EXPECT_GT(o.preemptions, 0);
      }
      for (const auto& [id, sampled] : o.tokens) {
        EXPECT_EQ(static_cast<int32_t>(sampled.size()), o.target.at(id)) << id;
        EXPECT_EQ(NonGreedyTokens(weights_, id, o.prompts.at(id), sampled), 0) << "request " << id;
      }
      EXPECT_EQ(o.tokens_left, 0u);
    }
  }
}

// The checker above, on the CPU engine (no device needed): its own greedy tokens pass,
// and a token replaced by the row's least likely one is caught.
TEST(CudaRunnerHelpersTest, GreedyCheckerAcceptsGreedyTokensAndCatchesOthers) {
  TempDir dir;
  auto weights = testing::WriteAndLoad(CudaTinyConfig(4, 2), dir.path(), 11, 1, 0.05);
  testing::RunOptions options;
  options.backend.ignore_eos = true;
  const testing::Outcome cpu = testing::DriveEngine(testing::MakeRunner(weights, 200, 4), options);
  ASSERT_EQ(cpu.tokens.size(), 8u);
  for (const auto& [id, sampled] : cpu.tokens) {
    EXPECT_EQ(NonGreedyTokens(weights, id, cpu.prompts.at(id), sampled), 0) << id;
  }
  const auto& [id, sampled] = *cpu.tokens.begin();
  // Replace the last token by the least likely one of its row.
  auto runner = testing::MakeRunner(weights, 64, 4);
  TokenStore tokens;
  const int32_t prompt = cpu.prompt_len.at(id);
  std::vector<int32_t> ids = SyntheticPrompt(0, id, prompt, kVocab);
  ids.insert(ids.end(), sampled.begin(), sampled.end() - 1);
  tokens.AddPrompt(id, ids);
  Request r = MakeRequest(id, static_cast<int32_t>(ids.size()), Blocks(0, 64));
  const std::vector<float> logits = RunStep(*runner, tokens, {Seq(r, 0, r.prompt_len, true)});
  std::vector<int32_t> wrong = sampled;
  wrong.back() = static_cast<int32_t>(std::min_element(logits.begin(), logits.end()) - logits.begin());
  EXPECT_EQ(NonGreedyTokens(weights, id, cpu.prompts.at(id), wrong), 1);
}

// No num_blocks: the pool takes total x memory_utilization less what is already in use
// (graphs off: with them 256 MiB more are left for capturing).
TEST_F(CudaRunnerTest, PoolFillsMemoryUtilization) {
  CudaRunnerOptions options;
  options.block_size = 16;
  options.memory_utilization = 0.3;
  options.cuda_graphs = false;  // with graphs, 256 MiB are held back for their capture
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 256;
  auto runner = CudaModelRunner::Create(weights_, options);
  ASSERT_TRUE(runner.ok()) << runner.status().message();
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  const double used = static_cast<double>(total - free);
  const double block = static_cast<double>((*runner)->Capacity().bytes_per_block);
  EXPECT_EQ(block, 2.0 * 2 * 16 * 2 * 64 * 2);  // K and V, 2 layers, 16 tokens, 2 kv heads, bf16
  EXPECT_LE(used, 0.3 * static_cast<double>(total) + block + (4 << 20));  // + page rounding
  EXPECT_GE(used, 0.3 * static_cast<double>(total) - 2 * block - (64 << 20));
  EXPECT_GT((*runner)->Capacity().num_gpu_blocks, 1000);
}

// Device-generated weights: the same seed gives bit-identical logits, another seed others.
TEST_F(CudaRunnerTest, RandomWeightsAreSeeded) {
  CudaRunnerOptions options;
  options.num_blocks = 8;
  options.max_num_seqs = 4;
  options.max_num_batched_tokens = 64;
  const ModelConfig config = CudaTinyConfig(4, 2);
  auto logits_for = [&](uint64_t seed) {
    auto runner = CudaModelRunner::CreateRandom(config, seed, 0.05, options);
    EXPECT_TRUE(runner.ok()) << runner.status().message();
    TokenStore tokens;
    tokens.AddPrompt(1, Tokens(20, 1));
    Request r = MakeRequest(1, 20, {0, 1});
    return RunStep(**runner, tokens, {Seq(r, 0, 20, true)});
  };
  const std::vector<float> a = logits_for(5), b = logits_for(5), c = logits_for(6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double sum_sq = 0;
  for (float x : a) sum_sq += static_cast<double>(x) * x;
  EXPECT_GT(sum_sq, 0.0);  // not all zeros
}

// A checkpoint read straight to the device gives the same bits as Create over the loaded
// float32 weights (bf16 bytes copied, F32/F16 rounded alike): one shard and three, bf16,
// f16 and f32 files, Qwen2's biases, tied embeddings.
TEST_F(CudaRunnerTest, CheckpointStraightToTheDeviceEqualsCreate) {
  struct Case {
    ModelFamily family;
    DType dtype;
    int32_t shards;
    bool tied;
  };
  for (const Case& c : {Case{ModelFamily::kLlama, DType::kBf16, 1, false},
                        Case{ModelFamily::kQwen2, DType::kFp16, 3, true},
                        Case{ModelFamily::kLlama, DType::kFp32, 2, false}}) {
    const std::string name = std::string(ModelTypeName(c.family)) + "_" +
                             std::string(TorchDTypeName(c.dtype));
    SCOPED_TRACE(name);
    const std::filesystem::path dir = dir_.path() / name;  // beside the fixture's model
    ModelConfig config = CudaTinyConfig(4, 2, c.family);
    config.torch_dtype = c.dtype;
    config.spec.tie_word_embeddings = c.tied;
    auto weights = testing::WriteAndLoad(config, dir, 5, c.shards, 0.05);
    ASSERT_NE(weights, nullptr);
    CudaRunnerOptions options;
    options.num_blocks = 8;
    options.max_num_seqs = 4;
    options.max_num_batched_tokens = 64;
    auto direct = CudaModelRunner::CreateFromCheckpoint(dir, options);
    ASSERT_TRUE(direct.ok()) << direct.status().message();
    auto loaded = CudaModelRunner::Create(weights, options);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    EXPECT_EQ((*direct)->WeightBytes(), (*loaded)->WeightBytes());
    TokenStore tokens;
    tokens.AddPrompt(1, Tokens(30, 2));
    Request r = MakeRequest(1, 30, {0, 1});
    EXPECT_EQ(RunStep(**direct, tokens, {Seq(r, 0, 30, true)}),
              RunStep(**loaded, tokens, {Seq(r, 0, 30, true)}));
  }
}

// Shapes the kernels do not serve are refused before any device work (this runs without
// a device too).
TEST(CudaRunnerArgumentsTest, UnsupportedShapesAreClearErrors) {
  CudaRunnerOptions options;
  ModelConfig config = CudaTinyConfig(4, 2);
  config.spec.head_dim = 16;
  config.spec.hidden_size = 64;
  auto runner = CudaModelRunner::CreateRandom(config, 1, 0.02, options);
  ASSERT_FALSE(runner.ok());
  EXPECT_EQ(runner.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(runner.status().message().find("head_dim 16"), std::string::npos)
      << runner.status().message();
  config = CudaTinyConfig(16, 1);  // 16 query heads per KV head
  runner = CudaModelRunner::CreateRandom(config, 1, 0.02, options);
  ASSERT_FALSE(runner.ok());
  EXPECT_NE(runner.status().message().find("at most 8"), std::string::npos);
  options.memory_utilization = 1.5;
  runner = CudaModelRunner::CreateRandom(CudaTinyConfig(4, 2), 1, 0.02, options);
  ASSERT_FALSE(runner.ok());
  EXPECT_NE(runner.status().message().find("memory_utilization"), std::string::npos);
  // A checkpoint: a missing folder, and one whose head_dim the kernels do not serve, are
  // refused before the device is touched.
  TempDir dir;
  auto missing = CudaModelRunner::CreateFromCheckpoint(dir.path() / "none", CudaRunnerOptions{});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().message();
  ASSERT_NE(testing::WriteAndLoad(testing::TinyConfig(2), dir.path()), nullptr);  // head_dim 16
  auto tiny = CudaModelRunner::CreateFromCheckpoint(dir.path(), CudaRunnerOptions{});
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("head_dim 16"), std::string::npos)
      << tiny.status().message();
}

}  // namespace
}  // namespace servelab
