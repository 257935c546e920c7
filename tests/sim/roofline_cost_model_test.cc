#include "sim/roofline_cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>

#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"

namespace servelab {
namespace {

// Builds StepPlans over Requests it owns (a deque keeps their addresses stable).
class Plan {
 public:
  // A decode: one new token at context `context` (context - 1 tokens cached).
  Plan& Decode(int32_t context) { return Add(context - 1, 1, true); }
  // A prefill chunk of `n` tokens after `cached` ones; emits when it ends the prompt.
  Plan& Prefill(int32_t cached, int32_t n, bool emits = true) { return Add(cached, n, emits); }
  Plan& Padding(int32_t context) {
    Add(context - 1, 1, false);
    plan_.seqs.back().is_padding = true;
    ++plan_.num_padding;
    return *this;
  }
  const StepPlan& get() const { return plan_; }

 private:
  Plan& Add(int32_t cached, int32_t n, bool emits) {
    Request& r = requests_.emplace_back();
    r.id = static_cast<int64_t>(requests_.size());
    r.prompt_len = emits && n > 1 ? cached + n : std::max(1, cached);
    r.num_computed_tokens = cached;
    r.num_generated = cached + n - r.prompt_len;
    ScheduledRequest s{&r, n, cached, emits};
    plan_.seqs.push_back(s);
    if (s.IsDecode()) {
      ++plan_.num_decode_tokens;
    } else {
      plan_.num_prefill_tokens += n;
    }
    if (emits) ++plan_.num_emitting;
    return *this;
  }
  std::deque<Request> requests_;
  StepPlan plan_;
};

DeploymentSpec Deployment(const char* model, const char* gpu, int32_t tp = 1, int32_t pp = 1) {
  DeploymentSpec d;
  d.model = FindModel(model).value();
  d.gpu = FindGpu(gpu).value();
  d.tensor_parallel = tp;
  d.pipeline_parallel = pp;
  return d;
}

RooflineCostModel Llama7bOnA100(int32_t tp = 1, int32_t pp = 1) {
  return RooflineCostModel(RooflineOptions{}, Deployment("llama-2-7b", "a100-80gb", tp, pp));
}

// Llama-2-7B: 32 layers; per layer the four GEMMs hold 4*4096^2 + 3*4096*11008
// = 202,375,168 weights.
constexpr double kLayerGemmParams = 4.0 * 4096 * 4096 + 3.0 * 4096 * 11008;
constexpr double kA100Bandwidth = 2039e9;
constexpr double kA100Bf16 = 312e12;
// RooflineOptions defaults.
constexpr double kGemmEff = 0.75, kAttnEff = 0.5, kMemEff = 0.85, kLinkEff = 0.8;
constexpr double kOverheadS = 0.5e-3, kAllreduceLatencyS = 10e-6;

TEST(RooflineCostModelTest, Batch1DecodeStreamsTheWeights) {
  // Decode at context 512: every weight is read once; 13,476,831,232 bytes at
  // 2039 GB/s * 0.85 = 7.776 ms, plus 0.5 ms overhead. The embedding table is gathered
  // (not streamed) and the KV read (512 * 0.5 MiB = 268 MB) adds back about as much.
  const RooflineCostModel model = Llama7bOnA100();
  const double expected = 13'476'831'232.0 / (kA100Bandwidth * kMemEff) + kOverheadS;
  const double got = ToSeconds(model.StepTime(Plan().Decode(512).get()));
  EXPECT_NEAR(got / expected, 1.0, 0.03) << got << " vs " << expected;
}

TEST(RooflineCostModelTest, DecodeGemmsAreMemoryBoundByHand) {
  // Batch-1 GEMMs: each op costs (weights + (K+N) activations) bytes / (bw * 0.85).
  // Per layer the (K+N) sums are (4096+12288) + (4096+4096) + (4096+22016) + (11008+4096).
  const RooflineBreakdown b = Llama7bOnA100().Breakdown(Plan().Decode(512).get());
  const double bytes = 32 * (kLayerGemmParams * 2 + (16384 + 8192 + 26112 + 15104) * 2.0);
  EXPECT_NEAR(b.gemm_s, bytes / (kA100Bandwidth * kMemEff), 1e-12);
}

TEST(RooflineCostModelTest, ExpectedDistinctExpertsUnderUniformRouting) {
  // E (1 - (1 - k/E)^T): one token touches exactly k; two, k + k (1 - k/E); many, all E.
  EXPECT_DOUBLE_EQ(ExpectedExpertsTouched(8, 2, 1), 2.0);
  EXPECT_DOUBLE_EQ(ExpectedExpertsTouched(8, 2, 2), 3.5);  // 8 (1 - 0.75^2)
  EXPECT_DOUBLE_EQ(ExpectedExpertsTouched(128, 8, 1), 8.0);
  EXPECT_NEAR(ExpectedExpertsTouched(8, 2, 64), 8.0, 1e-6);
  EXPECT_NEAR(ExpectedExpertsTouched(128, 8, 60), 128 * (1 - std::pow(1 - 8.0 / 128, 60)), 1e-9);
  EXPECT_EQ(ExpectedExpertsTouched(8, 2, 0), 0.0);
  EXPECT_EQ(ExpectedExpertsTouched(0, 0, 10), 0.0);
}

// Mixtral-8x7B at batch 1 reads two of its eight experts a layer: per layer the
// attention projections (4096 x (4096 + 2 x 1024) + 4096 x 4096 = 41,943,040), two
// experts (2 x 3 x 4096 x 14336 = 352,321,536) and the router (4096 x 8 = 32,768), so
// 32 layers stream 12,617,515,008 bf16 weights: the 12.9 B active parameters less the
// embedding and LM head. At 64 tokens every expert is read (8 of 8).
TEST(RooflineCostModelTest, MixtralDecodeReadsTheExpertsItsTokensTouch) {
  const RooflineCostModel model(RooflineOptions{}, Deployment("mixtral-8x7b", "a100-80gb"));
  const double one = model.Breakdown(Plan().Decode(512).get()).gemm_s;
  EXPECT_NEAR(one, 12'617'515'008.0 * 2 / (kA100Bandwidth * kMemEff), 0.002 * one);
  Plan batch;
  for (int i = 0; i < 64; ++i) batch.Decode(512);
  const double many = model.Breakdown(batch.get()).gemm_s;
  // 32 x (41,943,040 + 8 x 176,160,768 + 32,768) = 46,437,744,640 weights, plus the
  // activations of 64 tokens (2 experts each), all still memory-bound.
  const double weights = 46'437'744'640.0 * 2 / (kA100Bandwidth * kMemEff);
  EXPECT_GT(many, weights * 0.998 * (1 - std::pow(0.75, 64)));
  EXPECT_LT(many, weights * 1.02);
  // A dense model of Mixtral's active size would read its whole MLP at any batch; the
  // MoE model at batch 1 costs about its active share of a batch-64 step's weights.
  EXPECT_NEAR(one / many, 12'617'515'008.0 / 46'437'744'640.0, 0.01);
}

TEST(RooflineCostModelTest, ExpertImbalanceOfUniformRouting) {
  EXPECT_EQ(ExpertImbalance(1, 100), 1.0);
  // ep 2, 100 rows: 1 + sqrt(2 ln 2 x (1 - 1/2) x 2 / 100) = 1.117741.
  EXPECT_NEAR(ExpertImbalance(2, 100), 1.117741, 1e-6);
  EXPECT_LT(ExpertImbalance(8, 1e6), 1.01);  // many rows even out
  EXPECT_EQ(ExpertImbalance(8, 1), 8.0);      // one row: one GPU does all of it
  EXPECT_GE(ExpertImbalance(8, 4), 2.0);      // 4 rows: the busiest has at least 1, mean 1/2
}

DeploymentSpec MixtralOnH100(int32_t ep) {
  DeploymentSpec d = Deployment("mixtral-8x7b", "h100-80gb", 2);
  d.expert_parallel = ep;
  return d;
}

// Expert parallelism over the two TP GPUs, by hand for one decode token (2 rows): each
// MoE layer's dispatch + combine moves 2 rows x 2 x (1/2)/2 x 4096 x 2 bytes = 8,192
// bytes, exactly what the MLP all-reduce it replaces moved (2 x (1/2) x 4096 x 2), but as
// two collectives instead of one: 32 layers x 10 us more latency.
TEST(RooflineCostModelTest, ExpertParallelAllToAllByHand) {
  const RooflineCostModel tp(RooflineOptions{}, MixtralOnH100(1));
  const RooflineCostModel ep(RooflineOptions{}, MixtralOnH100(2));
  Plan one;
  one.Decode(100);
  EXPECT_NEAR(ep.Breakdown(one.get()).communication_s - tp.Breakdown(one.get()).communication_s,
              32 * 10e-6, 1e-12);
  // At 64 tokens: 128 rows, 4096 bytes a row each way per layer, against 8192 bytes a
  // token for the all-reduce: the same bytes again (top-2 over 2 GPUs), plus latency.
  Plan batch;
  for (int i = 0; i < 64; ++i) batch.Decode(100);
  const double link = 450e9 * 0.8;
  const double a2a = 32 * (128 * 4096.0 / link + 20e-6);
  const double allreduce = 32 * (64 * 8192.0 / link + 10e-6);
  EXPECT_NEAR(ep.Breakdown(batch.get()).communication_s - tp.Breakdown(batch.get()).communication_s,
              a2a - allreduce, 1e-12);
  // With a perfect balance the experts' FLOPs and weight bytes per GPU are those of
  // splitting each expert's width (half the rows at full width, or all rows at half
  // width); only the rows' hidden vectors are read on one GPU instead of both (0.07%).
  RooflineOptions balanced;
  balanced.routing.expert_imbalance = 1;
  const RooflineCostModel even(balanced, MixtralOnH100(2));
  EXPECT_LT(even.Breakdown(batch.get()).gemm_s, tp.Breakdown(batch.get()).gemm_s);
  EXPECT_NEAR(even.Breakdown(batch.get()).gemm_s / tp.Breakdown(batch.get()).gemm_s, 1.0, 0.002);
  // Uniform routing's imbalance makes the busiest GPU slower, never faster.
  EXPECT_GE(ep.Breakdown(batch.get()).gemm_s, even.Breakdown(batch.get()).gemm_s);
}

// A routed expert's SiLU x mul runs where its rows are: split over TP, every GPU does all
// token x expert rows at half of Mixtral's 14,336 width; under EP 2, the busiest GPU's
// rows at the whole width. By hand, the elementwise difference in 32 layers: read 2, write
// 1 bf16 value a width element, at 85% of the H100's 3,350 GB/s. Perfectly balanced, EP
// costs what TP does; at 64 tokens uniform routing loads the busiest GPU
// ExpertImbalance(2, 128) times its share.
TEST(RooflineCostModelTest, ExpertParallelGpusActivateTheirOwnRows) {
  const RooflineCostModel tp(RooflineOptions{}, MixtralOnH100(1));
  const RooflineCostModel ep(RooflineOptions{}, MixtralOnH100(2));
  RooflineOptions balanced;
  balanced.routing.expert_imbalance = 1;
  const RooflineCostModel even(balanced, MixtralOnH100(2));
  const double s_per_width_element = 3.0 * 2 / (3350e9 * 0.85);
  for (const int tokens : {1, 64, 300}) {
    Plan batch;
    for (int i = 0; i < tokens; ++i) batch.Decode(100);
    const double tp_s = tp.Breakdown(batch.get()).elementwise_s;
    const double rows = 2.0 * tokens;
    const double busiest = rows / 2 * ExpertImbalance(2, rows);
    const double expected = 32 * (busiest * 14336 - rows * 7168) * s_per_width_element;
    EXPECT_NEAR(ep.Breakdown(batch.get()).elementwise_s - tp_s, expected, 1e-9 * tp_s) << tokens;
    EXPECT_NEAR(even.Breakdown(batch.get()).elementwise_s, tp_s, 1e-9 * tp_s) << tokens;
  }
}

TEST(RooflineCostModelTest, WhichLinksCrossNodesByHand) {
  // TP 4, PP 8 on 8-GPU nodes: stages {0,1} {2,3} {4,5} {6,7} share nodes, so the
  // boundaries after stages 1, 3 and 5 cross; TP 8 puts each stage on its own node.
  EXPECT_EQ(StageBoundariesCrossingNodes(4, 8, 8), 3);
  EXPECT_EQ(StageBoundariesCrossingNodes(8, 8, 8), 7);
  EXPECT_EQ(StageBoundariesCrossingNodes(1, 8, 8), 0);
  EXPECT_EQ(StageBoundariesCrossingNodes(2, 4, 4), 1);
  EXPECT_FALSE(TensorGroupsCrossNodes(4, 8, 8));
  EXPECT_TRUE(TensorGroupsCrossNodes(16, 1, 8));
  EXPECT_TRUE(TensorGroupsCrossNodes(3, 2, 4));  // the second group is GPUs 3, 4, 5
  EXPECT_FALSE(TensorGroupsCrossNodes(3, 1, 4));
}

// Llama-3.1-405B at TP 16: on 16-GPU nodes its all-reduces use NVLink (450 GB/s), on
// 8-GPU nodes the network (50 GB/s InfiniBand NDR), each at 80% efficiency, plus 10 us
// a collective. 2 x 126 all-reduces of 2 x 15/16 x 16384 x 2 bytes per token.
TEST(RooflineCostModelTest, ATensorParallelGroupAcrossNodesUsesTheNetwork) {
  DeploymentSpec one_node = Deployment("llama-3.1-405b", "h100-80gb", 16);
  one_node.gpus_per_node = 16;
  DeploymentSpec two_nodes = one_node;
  two_nodes.gpus_per_node = 8;
  const RooflineCostModel fast(RooflineOptions{}, one_node), slow(RooflineOptions{}, two_nodes);
  EXPECT_FALSE(fast.TensorParallelCrossesNodes());
  EXPECT_TRUE(slow.TensorParallelCrossesNodes());
  Plan batch;
  for (int i = 0; i < 32; ++i) batch.Decode(1000);
  const double bytes = 2.0 * 126 * 2.0 * 15.0 / 16.0 * 16384 * 2 * 32;  // 32 tokens
  const double expected = bytes * (1 / (50e9 * 0.8) - 1 / (450e9 * 0.8)) + 2 * 126 * 10e-6;
  EXPECT_NEAR(slow.Breakdown(batch.get()).communication_s - fast.Breakdown(batch.get()).communication_s,
              expected, 1e-12);
}

// Pipeline stage transfers: of Llama-2-70B's 7 boundaries at TP 4, PP 8 on 8-GPU nodes,
// 3 cross the network: one token's 8192 x 2 bytes, 3 x (1/(50 GB/s) - 1/(450 GB/s)) at
// 80%, plus 3 x 10 us.
TEST(RooflineCostModelTest, StageTransfersBetweenNodesUseTheNetwork) {
  DeploymentSpec nodes = Deployment("llama-2-70b", "h100-80gb", 4, 8);
  DeploymentSpec one = nodes;
  one.gpus_per_node = 32;
  const RooflineCostModel across(RooflineOptions{}, nodes), within(RooflineOptions{}, one);
  EXPECT_EQ(across.StageBoundariesOnTheNetwork(), 3);
  EXPECT_EQ(within.StageBoundariesOnTheNetwork(), 0);
  Plan decode;
  decode.Decode(100);
  const double expected = 3 * 8192 * 2 * (1 / (50e9 * 0.8) - 1 / (450e9 * 0.8)) + 3 * 10e-6;
  EXPECT_NEAR(across.Breakdown(decode.get()).communication_s -
                  within.Breakdown(decode.get()).communication_s,
              expected, 1e-12);
}

TEST(RooflineCostModelTest, DoublingShortDecodesBarelyChangesTheStep) {
  const RooflineCostModel model = Llama7bOnA100();
  Plan eight, sixteen;
  for (int i = 0; i < 8; ++i) eight.Decode(128);
  for (int i = 0; i < 16; ++i) sixteen.Decode(128);
  const double t8 = ToSeconds(model.StepTime(eight.get()));
  const double t16 = ToSeconds(model.StepTime(sixteen.get()));
  EXPECT_GT(t16, t8);
  EXPECT_LT(t16 / t8, 1.05);  // memory-bound: twice the tokens, < 5% more time
}

TEST(RooflineCostModelTest, LongPrefillIsComputeBound) {
  // 2048-token prefill: every GEMM is compute-bound, so
  // gemm_s = 32 layers * 2 * 202,375,168 * 2048 / (312e12 * 0.75) = 113.4 ms exactly.
  const RooflineCostModel model = Llama7bOnA100();
  const RooflineBreakdown b = model.Breakdown(Plan().Prefill(0, 2048).get());
  EXPECT_NEAR(b.gemm_s, 32 * 2 * kLayerGemmParams * 2048 / (kA100Bf16 * kGemmEff), 1e-12);
  // The whole step: ~2 * params * tokens / (peak * efficiency), within 10%. The rule
  // counts the embedding as a GEMM (-4%) and omits attention (+6%: 7.35 ms), the
  // elementwise ops (+6%: 7.5 ms) and the 0.5 ms overhead: about +9% net.
  const double params = 6'738'415'616.0;
  const double rule = 2 * params * 2048 / (kA100Bf16 * kGemmEff);
  EXPECT_NEAR(b.total_s() / rule, 1.0, 0.10) << b.total_s() << " vs " << rule;
  EXPECT_GT(b.gemm_s, 10 * (b.elementwise_s + b.lm_head_s));
}

TEST(RooflineCostModelTest, AttentionIsCostedPerSequence) {
  // A: 2048-token prefill from empty: pairs 2048*2049/2 = 2,098,176;
  //    FLOPs 4 * 32 heads * 128 * pairs = 34,376,515,584 -> 220.36 us at 312e12 * 0.5;
  //    bytes 2048*2*32*128*2 (KV) + 2*2048*4096*2 (Q, O) = 67,108,864 -> 38.72 us.
  //    Compute-bound.
  // B: decode at context 4000: FLOPs 16384 * 4000 = 65,536,000 -> 0.42 us;
  //    bytes 4000*16384 + 2*4096*2 = 65,552,384 -> 37.82 us. Memory-bound.
  const double a_flops = 4.0 * 32 * 128 * (2048.0 * 2049 / 2);
  const double a_bytes = 2048.0 * 2 * 32 * 128 * 2 + 2.0 * 2048 * 4096 * 2;
  const double b_flops = 4.0 * 32 * 128 * 4000;
  const double b_bytes = 4000.0 * 2 * 32 * 128 * 2 + 2.0 * 4096 * 2;
  const double compute = kA100Bf16 * kAttnEff;
  const double memory = kA100Bandwidth * kMemEff;
  const double per_seq = 32 * (a_flops / compute + b_bytes / memory);

  const RooflineBreakdown b =
      Llama7bOnA100().Breakdown(Plan().Prefill(0, 2048).Decode(4000).get());
  EXPECT_NEAR(b.attention_s, per_seq, 1e-12);
  // Costing the batch as one op, max(sum FLOPs, sum bytes), would hide the decode's
  // KV read behind the prefill's math: 17% less.
  const double pooled = 32 * std::max((a_flops + b_flops) / compute, (a_bytes + b_bytes) / memory);
  EXPECT_GT(b.attention_s, 1.15 * pooled);
}

TEST(RooflineCostModelTest, AttentionGrowsWithEachSequencesOwnContext) {
  // Two decodes at 4000 + 100 cost the same KV read as 2050 + 2050 (memory-bound, linear),
  // but more than one decode at 4000 alone.
  const RooflineCostModel model = Llama7bOnA100();
  const double skewed = model.Breakdown(Plan().Decode(4000).Decode(100).get()).attention_s;
  const double even = model.Breakdown(Plan().Decode(2050).Decode(2050).get()).attention_s;
  const double alone = model.Breakdown(Plan().Decode(4000).get()).attention_s;
  EXPECT_NEAR(skewed, even, 1e-15);
  EXPECT_GT(skewed, alone);
}

TEST(RooflineCostModelTest, TensorParallelHalvesGemmsAndAddsAllReduces) {
  Plan built;
  built.Prefill(0, 2048);
  const StepPlan& plan = built.get();
  const RooflineBreakdown one = Llama7bOnA100(1).Breakdown(plan);
  const RooflineBreakdown two = Llama7bOnA100(2).Breakdown(plan);
  EXPECT_NEAR(two.gemm_s, one.gemm_s / 2, 1e-12);
  EXPECT_DOUBLE_EQ(one.communication_s, 0.0);
  // 2 all-reduces per layer of 2048 * 4096 * 2 bytes: ring factor 2*(2-1)/2 = 1, over
  // 300 GB/s * 0.8, plus 10 us each: 64 * (16,777,216 / 240e9 + 10e-6) = 5.114 ms.
  const double allreduce = 2048.0 * 4096 * 2 / (300e9 * kLinkEff) + kAllreduceLatencyS;
  EXPECT_NEAR(two.communication_s, 64 * allreduce, 1e-12);
}

TEST(RooflineCostModelTest, PipelineParallelRunsStagesInSeries) {
  Plan built;
  built.Prefill(0, 1024).Decode(300);
  const StepPlan& plan = built.get();
  const RooflineBreakdown one = Llama7bOnA100(1, 1).Breakdown(plan);
  const RooflineBreakdown two = Llama7bOnA100(1, 2).Breakdown(plan);
  // One batch in flight: the layers' work is unchanged, one transfer of 1025 tokens'
  // hidden states is added.
  EXPECT_DOUBLE_EQ(two.gemm_s, one.gemm_s);
  EXPECT_DOUBLE_EQ(two.attention_s, one.attention_s);
  EXPECT_NEAR(two.communication_s, 1025.0 * 4096 * 2 / (300e9 * kLinkEff) + kAllreduceLatencyS,
              1e-15);
  EXPECT_GT(two.total_s(), one.total_s());
}

TEST(RooflineCostModelTest, LmHeadOnlyForEmittingRows) {
  const RooflineCostModel model = Llama7bOnA100();
  // A mid-prompt chunk samples nothing.
  EXPECT_DOUBLE_EQ(model.Breakdown(Plan().Prefill(0, 512, false).get()).lm_head_s, 0.0);
  // One row: memory-bound, 4096 * 32000 * 2 bytes + 4096*2 + 32000*4 per row.
  const double bytes = 4096.0 * 32000 * 2 + 4096 * 2 + 32000 * 4;
  EXPECT_NEAR(model.Breakdown(Plan().Prefill(0, 512).get()).lm_head_s,
              bytes / (kA100Bandwidth * kMemEff), 1e-15);
}

TEST(RooflineCostModelTest, PaddingCostsADecodeToken) {
  const RooflineCostModel model = Llama7bOnA100();
  const RooflineBreakdown padded = model.Breakdown(Plan().Decode(200).Padding(200).get());
  const RooflineBreakdown real = model.Breakdown(Plan().Decode(200).Decode(200).get());
  EXPECT_DOUBLE_EQ(padded.total_s(), real.total_s());
}

TEST(RooflineCostModelTest, PrecisionPicksThePeak) {
  const GpuSpec h100 = FindGpu("h100-80gb").value();
  const GpuSpec a100 = FindGpu("a100-80gb").value();
  EXPECT_DOUBLE_EQ(TensorPeakTflops(h100, DType::kFp8), 1979);
  EXPECT_DOUBLE_EQ(TensorPeakTflops(a100, DType::kFp8), 312);  // no FP8 units
  EXPECT_DOUBLE_EQ(TensorPeakTflops(a100, DType::kInt4), 312);  // weight-only
  EXPECT_DOUBLE_EQ(TensorPeakTflops(a100, DType::kFp32), 19.5);

  // Int4 weights: a quarter of the bytes, so batch-1 decode GEMMs run ~4x faster.
  DeploymentSpec d = Deployment("llama-2-7b", "a100-80gb");
  Plan built;
  built.Decode(64);
  const StepPlan& plan = built.get();
  const double bf16 = RooflineCostModel(RooflineOptions{}, d).Breakdown(plan).gemm_s;
  d.weight_dtype = DType::kInt4;
  const double int4 = RooflineCostModel(RooflineOptions{}, d).Breakdown(plan).gemm_s;
  EXPECT_NEAR(bf16 / int4, 4.0, 0.05);
}

TEST(RooflineCostModelTest, StepTimeRoundsTheBreakdown) {
  const RooflineCostModel model = Llama7bOnA100();
  Plan plan;
  plan.Prefill(100, 300).Decode(900).Decode(17);
  EXPECT_EQ(model.StepTime(plan.get()), FromSeconds(model.Breakdown(plan.get()).total_s()));
  EXPECT_EQ(model.StepTime(plan.get()), model.StepTime(plan.get()));
  EXPECT_EQ(model.Name(), "roofline");
}

TEST(RooflineCostModelTest, SwapOnlyPlanCostsTheOverhead) {
  StepPlan plan;
  plan.swap_in.push_back({3, 4});
  EXPECT_EQ(Llama7bOnA100().StepTime(plan), FromSeconds(kOverheadS));
}

TEST(RooflineCostModelTest, ValidateRejectsUncostableDeployments) {
  EXPECT_TRUE(RooflineCostModel::Validate(Deployment("llama-2-7b", "a100-80gb", 8, 4)).ok());
  const Status bad_tp = RooflineCostModel::Validate(Deployment("llama-2-7b", "a100-80gb", 3));
  EXPECT_EQ(bad_tp.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_tp.message().find("does not divide num_attention_heads 32"), std::string::npos);
  EXPECT_FALSE(RooflineCostModel::Validate(Deployment("llama-2-7b", "a100-80gb", 1, 33)).ok());
  DeploymentSpec no_link = Deployment("llama-2-7b", "a100-80gb", 2);
  no_link.gpu.interconnect_gbps = 0;
  EXPECT_FALSE(RooflineCostModel::Validate(no_link).ok());
}

TEST(CostModelRegistryTest, NamesTypesAndResolvedParameters) {
  const CostModelRegistry& registry = BuiltinCostModels();
  EXPECT_EQ(registry.Names(),
            (std::vector<std::string>{"calibrated", "constant", "linear", "roofline"}));
  const DeploymentSpec d = Deployment("llama-3-8b", "h100-80gb");
  for (const char* name : {"constant", "linear", "roofline"}) {  // no file needed
    StatusOr<std::unique_ptr<CostModel>> model =
        registry.Make(NamedParams{name, {}, "cost_model", "", ""}, d);
    ASSERT_TRUE(model.ok()) << model.status().message();
    EXPECT_EQ((*model)->Name(), name);
  }
  // Defaults are filled in, in the order the factory reads them; numbers canonical.
  NamedParams resolved;
  NamedParams linear{"linear", {Param{"per_token_ms", "0.10", "e.yaml:3"}}, "cost_model", "", ""};
  ASSERT_TRUE(registry.Make(linear, d, &resolved).ok());
  ASSERT_EQ(resolved.params.size(), 3u);
  EXPECT_EQ(resolved.params[0].key, "base_ms");
  EXPECT_EQ(resolved.params[0].value, "5.0");
  EXPECT_EQ(resolved.params[1].key, "per_token_ms");
  EXPECT_EQ(resolved.params[1].value, "0.1");
  EXPECT_EQ(resolved.params[1].where, "e.yaml:3");
  EXPECT_EQ(resolved.params[2].value, "0.0");

  const StatusOr<std::unique_ptr<CostModel>> bad =
      registry.Make(NamedParams{"roofline", {}, "cost_model", "", ""}, Deployment("llama-3-8b", "h100-80gb", 5));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  const auto unknown = registry.Make(NamedParams{"rooflin", {}, "cost_model", "e.yaml:7", ""}, d);
  EXPECT_EQ(unknown.status().message(),
            "e.yaml:7: cost_model: Unable to find cost model 'rooflin' (did you mean "
            "'roofline'?). Valid values are: calibrated, constant, linear, roofline.");
  const auto typo = registry.Make(
      NamedParams{"constant", {Param{"step_mss", "3", "e.yaml:8"}}, "cost_model", "e.yaml:7", ""}, d);
  EXPECT_EQ(typo.status().message(),
            "e.yaml:8: cost_model: unknown parameter 'step_mss' for 'constant' (did you mean "
            "'step_ms'?). Its parameters are: step_ms");
}

}  // namespace
}  // namespace servelab

namespace servelab {
namespace {

// 4 experts, 1 pick a token, Zipf exponent 1: popularity 1, 1/2, 1/3, 1/4 over 25/12, i.e.
// 12/25, 6/25, 4/25, 3/25. Round-robin on 2 GPUs: GPU 0 gets 16/25 of the picks, 1.28x
// the mean half.
TEST(RoutingSkewTest, ZipfPopularityAndTheBusiestGpuByHand) {
  const RoutingSkew skew = SkewedRouting(4, 1, 1.0, 2);
  ASSERT_EQ(skew.pick_probability.size(), 4u);
  EXPECT_NEAR(skew.pick_probability[0], 12.0 / 25, 1e-15);
  EXPECT_NEAR(skew.pick_probability[3], 3.0 / 25, 1e-15);
  EXPECT_NEAR(skew.busiest_gpu_share, 1.28, 1e-12);
  // Uniform: every expert k/E, no GPU busier than the mean.
  const RoutingSkew uniform = SkewedRouting(8, 2, 0.0, 4);
  for (const double q : uniform.pick_probability) EXPECT_DOUBLE_EQ(q, 0.25);
  EXPECT_DOUBLE_EQ(uniform.busiest_gpu_share, 1.0);
}

// Skewed routing: one token still reads 2 experts (the picks' probabilities sum to 2),
// but 8 tokens concentrate on the popular experts: 4.8 of 8 in expectation under a Zipf
// exponent of 2, against uniform routing's 7.2 (8 x (1 - 0.75^8)). Under expert
// parallelism the GPU holding the hottest experts does more.
TEST(RoutingSkewTest, SkewTouchesFewerExpertsAndLoadsOneGpuMore) {
  RooflineOptions skewed;
  skewed.routing.routing_skew = 2.0;
  const RooflineCostModel uniform(RooflineOptions{}, Deployment("mixtral-8x7b", "a100-80gb"));
  const RooflineCostModel zipf(skewed, Deployment("mixtral-8x7b", "a100-80gb"));
  Plan one;
  one.Decode(512);
  EXPECT_NEAR(zipf.Breakdown(one.get()).gemm_s, uniform.Breakdown(one.get()).gemm_s,
              1e-9 * uniform.Breakdown(one.get()).gemm_s);
  Plan batch;
  for (int i = 0; i < 8; ++i) batch.Decode(512);
  EXPECT_LT(zipf.Breakdown(batch.get()).gemm_s, 0.8 * uniform.Breakdown(batch.get()).gemm_s);

  const RooflineCostModel ep_uniform(RooflineOptions{}, MixtralOnH100(2));
  const RooflineCostModel ep_zipf(skewed, MixtralOnH100(2));
  Plan big;
  for (int i = 0; i < 2048; ++i) big.Prefill(0, 4);  // compute-bound: the rows decide
  EXPECT_GT(ep_zipf.Breakdown(big.get()).gemm_s, 1.1 * ep_uniform.Breakdown(big.get()).gemm_s);
}

// Locality: a prefill chunk of 8 tokens at locality 1 reads the 2 experts one token reads,
// not uniform routing's 7.2, so its memory-bound GEMMs take well under half the time (the
// attention projections and the chunk's rows stay); 8 decodes of 8 sequences still route
// independently, bit for bit.
TEST(RoutingSkewTest, LocalityKeepsAChunkOnFewExperts) {
  RooflineOptions together;
  together.routing.routing_locality = 1.0;
  const RooflineCostModel independent(RooflineOptions{}, Deployment("mixtral-8x7b", "a100-80gb"));
  const RooflineCostModel local(together, Deployment("mixtral-8x7b", "a100-80gb"));
  Plan chunk;
  chunk.Prefill(0, 8);
  EXPECT_LT(local.Breakdown(chunk.get()).gemm_s, 0.4 * independent.Breakdown(chunk.get()).gemm_s);
  // The difference is the 5.2 experts' weights, [4096, 3 x 14,336] bf16, in each of 32
  // layers at 85% of the A100's bandwidth.
  const double expert_s = 3.0 * 4096 * 14336 * 2 / (FindGpu("a100-80gb")->mem_bandwidth_gbps * 1e9 * 0.85);
  EXPECT_NEAR(independent.Breakdown(chunk.get()).gemm_s - local.Breakdown(chunk.get()).gemm_s,
              32 * (8 * (1 - std::pow(0.75, 8)) - 2) * expert_s, 1e-12);
  Plan batch;
  for (int i = 0; i < 8; ++i) batch.Decode(512);
  EXPECT_EQ(local.Breakdown(batch.get()).gemm_s, independent.Breakdown(batch.get()).gemm_s);
  EXPECT_EQ(local.StepTime(batch.get()), independent.StepTime(batch.get()));
}

}  // namespace
}  // namespace servelab
