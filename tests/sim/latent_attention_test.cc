// DeepSeek-V3 and multi-head latent attention (MLA): parameter counts against the
// published ones, the latent KV cache by hand, the memory checks of the issue, and the
// roofline's decode and prefill attention by hand.
#include <gtest/gtest.h>

#include <deque>

#include "driver/config_yaml.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"
#include "sim/memory.h"
#include "sim/roofline_cost_model.h"

namespace servelab {
namespace {

const ModelSpec& DeepSeekV3() {
  static const ModelSpec model = FindModel("deepseek-v3").value();
  return model;
}

// Per layer: q_a 7168x1536 + its norm 1536, q_b 1536 x 128x192, kv_a 7168 x (512+64) +
// its norm 512, kv_b 512 x 128x(128+128), o 128x128 x 7168, two RMSNorms of 7168.
TEST(LatentAttentionTest, DeepSeekV3AttentionParametersByHand) {
  const int64_t expected = 7168LL * 1536 + 1536 + 1536LL * 128 * 192 + 7168LL * 576 + 512 +
                           512LL * 128 * 256 + 128LL * 128 * 7168 + 2 * 7168;
  EXPECT_EQ(expected, 187'121'664);
  EXPECT_EQ(DeepSeekV3().AttentionParamsPerLayer(), expected);
}

// The DeepSeek-V3 report: 671 B parameters, 37 B activated per token (without the 14 B
// multi-token-prediction module of the 685 B checkpoint).
TEST(LatentAttentionTest, DeepSeekV3ParameterCountsMatchThePublishedOnes) {
  EXPECT_NEAR(static_cast<double>(DeepSeekV3().NumParams()) * 1e-9, 671.0, 0.5);
  EXPECT_NEAR(static_cast<double>(DeepSeekV3().NumActiveParams()) * 1e-9, 37.0, 0.6);
}

// 61 layers x (512 + 64) x 2 bytes in bf16, replicated on every GPU of a TP group; a
// pipeline stage holds ceil(61 / pp) layers.
TEST(LatentAttentionTest, DeepSeekV3CachesTheLatentAndRopeKeyPerTokenAndLayer) {
  const ModelSpec& m = DeepSeekV3();
  EXPECT_EQ(m.KvElementsPerToken(), 61 * 576);
  EXPECT_DOUBLE_EQ(m.KvBytesPerToken(DType::kBf16), 70'272.0);
  EXPECT_DOUBLE_EQ(KvBytesPerTokenPerGpu(m, DType::kBf16, 8, 1), 70'272.0);
  EXPECT_DOUBLE_EQ(KvBytesPerTokenPerGpu(m, DType::kBf16, 8, 2), 31.0 * 576 * 2);
  EXPECT_DOUBLE_EQ(KvBytesPerTokenPerGpu(m, DType::kFp8, 1, 1), 61.0 * 576);
}

// 671 B parameters: 1,342 GB in bf16 are more than 8 x H200 hold (each 140.4 GiB at 0.9);
// in fp8 (DeepSeek-V3's native weights) each GPU holds 78.1 GiB and keeps ~47 GiB of KV.
// 16 x H100 over two nodes (TP 8 in each, PP 2 across): fp8 fits, bf16 (78.1 GiB of
// weights per GPU against a 71.7 GiB budget) does not.
TEST(LatentAttentionTest, DeepSeekV3MemoryOnEightH200AndSixteenH100) {
  const ModelSpec& m = DeepSeekV3();
  MemoryOptions tp8;
  tp8.tensor_parallel = 8;
  tp8.weight_dtype = DType::kFp8;
  const MemoryEstimate h200_fp8 = EstimateMemory(m, FindGpu("h200-141gb").value(), tp8);
  EXPECT_TRUE(h200_fp8.fits);
  EXPECT_NEAR(h200_fp8.weights / (1 << 30), 671.03e9 / 8 / (1 << 30), 0.01);
  EXPECT_GT(h200_fp8.kv_cache / (1 << 30), 40.0);
  tp8.weight_dtype = DType::kBf16;
  EXPECT_FALSE(EstimateMemory(m, FindGpu("h200-141gb").value(), tp8).fits);

  MemoryOptions two_nodes;
  two_nodes.tensor_parallel = 8;
  two_nodes.pipeline_parallel = 2;
  two_nodes.weight_dtype = DType::kFp8;
  const MemoryEstimate h100_fp8 = EstimateMemory(m, FindGpu("h100-80gb").value(), two_nodes);
  EXPECT_TRUE(h100_fp8.fits);
  EXPECT_NEAR(h100_fp8.weights / (1 << 30), 671.03e9 / 16 / (1 << 30), 0.01);
  EXPECT_DOUBLE_EQ(h100_fp8.kv_bytes_per_token_per_gpu, 31.0 * 576 * 2);
  two_nodes.weight_dtype = DType::kBf16;
  EXPECT_FALSE(EstimateMemory(m, FindGpu("h100-80gb").value(), two_nodes).fits);

  const std::string report = FormatMemoryReport(m, FindGpu("h200-141gb").value(), tp8,
                                                EstimateMemory(m, FindGpu("h200-141gb").value(), tp8));
  EXPECT_NE(report.find("latent attention: 576 cached per token a layer"), std::string::npos) << report;
}

StepPlan OneSeq(std::deque<Request>& requests, int32_t cached, int32_t n) {
  Request& r = requests.emplace_back();
  r.prompt_len = n > 1 ? cached + n : std::max(1, cached);
  r.num_computed_tokens = cached;
  r.num_generated = cached + n - r.prompt_len;
  StepPlan plan;
  plan.seqs.push_back(ScheduledRequest{&r, n, cached, true, false});
  if (plan.seqs.back().IsDecode()) {
    plan.num_decode_tokens = 1;
  } else {
    plan.num_prefill_tokens = n;
  }
  plan.num_emitting = 1;
  return plan;
}

DeploymentSpec DeepSeekOnH200(int32_t tp) {
  DeploymentSpec d;
  d.model = DeepSeekV3();
  d.gpu = FindGpu("h200-141gb").value();
  d.tensor_parallel = tp;
  d.expert_parallel = tp;
  d.weight_dtype = DType::kFp8;
  return d;
}

// One decode at context 32,768 on TP 8 (16 heads a GPU): every GPU reads the whole
// latent, 32,768 x 576 x 2 bytes a layer, at 4.8 TB/s x 0.85; its compute, 32,768 pairs x
// 2 x 16 x (576 + 512) FLOPs at 989 TFLOP/s x 0.5, is less. Q in and O out: 16 x 1,088
// activations. Over 61 layers.
TEST(LatentAttentionTest, DecodeAttendsInTheLatentSpaceMemoryBound) {
  const RooflineCostModel model(RooflineOptions{}, DeepSeekOnH200(8));
  std::deque<Request> requests;
  const StepPlan plan = OneSeq(requests, 32767, 1);
  const double bw = 4800e9 * 0.85;
  const double memory = (32768.0 * 576 * 2 + 16.0 * 1088 * 2) / bw;
  const double compute = 32768.0 * 2 * 16 * 1088 / (989e12 * 0.5);
  ASSERT_LT(compute, memory);
  EXPECT_NEAR(model.Breakdown(plan).attention_s, 61 * memory, 61 * memory * 1e-12);
  EXPECT_TRUE(model.TimesDecodeBatches());
  // At TP 1 the 128 heads make decode compute-bound: the batch is no longer timed from
  // its aggregates.
  EXPECT_FALSE(RooflineCostModel(RooflineOptions{}, DeepSeekOnH200(1)).TimesDecodeBatches());
}

// A 4,096-token prefill on TP 8 attends with full keys and values: causal pairs
// 4096 x 4097 / 2, each 2 x 16 x (192 + 128) FLOPs: compute-bound, and nothing cached to
// up-project.
TEST(LatentAttentionTest, PrefillAttendsAtFullWidth) {
  const RooflineCostModel model(RooflineOptions{}, DeepSeekOnH200(8));
  std::deque<Request> requests;
  const StepPlan plan = OneSeq(requests, 0, 4096);
  const double compute = 4096.0 * 4097 / 2 * 2 * 16 * 320 / (989e12 * 0.5);
  EXPECT_NEAR(model.Breakdown(plan).attention_s, 61 * compute, 61 * compute * 1e-12);
  // A chunk after 4,096 cached tokens also up-projects their latents: 2 x 512 x 16 x 256
  // FLOPs each at the GEMM rate (fp8 weights: the H200's 1,979 TFLOP/s x 0.75).
  std::deque<Request> more;
  const StepPlan chunk = OneSeq(more, 4096, 4096);
  const double pairs = 4096.0 * 4096 + 4096.0 * 4097 / 2;
  const double chunk_compute =
      pairs * 2 * 16 * 320 / (989e12 * 0.5) + 4096.0 * 2 * 512 * 16 * 256 / (1979e12 * 0.75);
  EXPECT_NEAR(model.Breakdown(chunk).attention_s, 61 * chunk_compute, 61 * chunk_compute * 1e-12);
}

TEST(LatentAttentionTest, LatentSettingsAreCheckedWhereGiven) {
  const std::string base = "name: x\nworkload: {num_requests: 1}\n";
  auto partial = ParseExperiment(base + "model: {base: llama-2-7b, qk_rope_head_dim: 64}\n",
                                 "exp.yaml", "/");
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.status().message().find("exp.yaml:3: model: latent-attention settings without "
                                            "kv_lora_rank"),
            std::string::npos)
      << partial.status().message();
  auto no_value = ParseExperiment(base + "model: {base: llama-2-7b, kv_lora_rank: 512, "
                                         "qk_nope_head_dim: 128}\n",
                                  "exp.yaml", "/");
  ASSERT_FALSE(no_value.ok());
  EXPECT_NE(no_value.status().message().find("needs qk_nope_head_dim >= 1 and v_head_dim >= 1"),
            std::string::npos);
  EXPECT_TRUE(ParseExperiment(base + "hardware: {gpu: h200-141gb}\nmodel: deepseek-v3\n", "exp.yaml", "/").ok());
}

}  // namespace
}  // namespace servelab
