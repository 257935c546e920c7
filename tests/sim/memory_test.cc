#include "sim/memory.h"

#include <gtest/gtest.h>

#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"

namespace servelab {
namespace {

constexpr double kGib = 1024.0 * 1024.0 * 1024.0;

MemoryEstimate Estimate(const char* model, const char* gpu, const MemoryOptions& options) {
  return EstimateMemory(FindModel(model).value(), FindGpu(gpu).value(), options);
}

// Llama-2-7B, bf16, on one A100-80GB at utilization 0.9, defaults otherwise.
TEST(MemoryTest, Llama2_7bOnA100ByHand) {
  const MemoryEstimate e = Estimate("llama-2-7b", "a100-80gb", MemoryOptions{});
  // total = 80 GiB = 85,899,345,920; budget = 0.9 * total = 77,309,411,328.
  EXPECT_DOUBLE_EQ(e.total, 85'899'345'920.0);
  EXPECT_DOUBLE_EQ(e.budget, 77'309'411'328.0);
  // weights = 6,738,415,616 params * 2 bytes = 13,476,831,232 (12.551 GiB).
  EXPECT_DOUBLE_EQ(e.weights, 13'476'831'232.0);
  EXPECT_NEAR(e.weights / kGib, 12.55, 0.01);
  // activations: per token 2*4096 + max(2*4096 + 2*4096, 3*11008) = 8192 + 33024 = 41216
  // elements * 2 bytes * 8192 tokens = 675,282,944; logits 256 * 32000 * 4 = 32,768,000.
  EXPECT_DOUBLE_EQ(e.activations, 675'282'944.0 + 32'768'000.0);
  EXPECT_DOUBLE_EQ(e.overhead, kGib);
  // kv_cache = 77,309,411,328 - 13,476,831,232 - 708,050,944 - 1,073,741,824
  //          = 62,050,787,328 (57.79 GiB).
  EXPECT_DOUBLE_EQ(e.kv_cache, 62'050'787'328.0);
  // KV per token = 2 * 32 layers * 32 heads * 128 * 2 bytes = 524,288 = 0.5 MiB; a block
  // of 16 tokens = 8 MiB; 62,050,787,328 / 8,388,608 = 7397.03 -> 7397 blocks.
  EXPECT_DOUBLE_EQ(e.kv_bytes_per_token_per_gpu, 524'288.0);
  EXPECT_EQ(e.kv_blocks, 7397);
  EXPECT_EQ(e.kv_tokens, 7397 * 16);
  EXPECT_TRUE(e.fits);
  EXPECT_DOUBLE_EQ(e.shortfall, 0.0);
  // At the model's 4096-token window: 118,352 / 4096 = 28.89 sequences.
  EXPECT_EQ(e.context_len, 4096);
  EXPECT_DOUBLE_EQ(e.concurrent_seqs, 118'352.0 / 4096.0);
}

TEST(MemoryTest, ConservationOfTheBudget) {
  for (const char* model : {"llama-3-8b", "qwen2.5-14b", "mistral-7b"}) {
    const MemoryEstimate e = Estimate(model, "h100-80gb", MemoryOptions{});
    EXPECT_NEAR(e.weights + e.activations + e.overhead + e.kv_cache, e.budget, 1.0);
    // Whole blocks, and less than one block of KV bytes left over.
    const double block_bytes = e.kv_bytes_per_token_per_gpu * 16;
    EXPECT_LE(e.kv_blocks * block_bytes, e.kv_cache);
    EXPECT_GT((e.kv_blocks + 1) * block_bytes, e.kv_cache);
  }
}

TEST(MemoryTest, TensorParallelHalvesWeightsAndKvPerToken) {
  const MemoryEstimate one = Estimate("llama-2-7b", "a100-80gb", MemoryOptions{});
  MemoryOptions options;
  options.tensor_parallel = 2;
  const MemoryEstimate two = Estimate("llama-2-7b", "a100-80gb", options);
  EXPECT_DOUBLE_EQ(two.weights, one.weights / 2);
  EXPECT_DOUBLE_EQ(two.kv_bytes_per_token_per_gpu, one.kv_bytes_per_token_per_gpu / 2);
  // Each GPU holds half of every token, and has more room: well over twice the tokens.
  EXPECT_GT(two.kv_tokens, 2 * one.kv_tokens);
}

TEST(MemoryTest, PipelineParallelSplitsLayers) {
  MemoryOptions options;
  options.pipeline_parallel = 3;  // 32 layers -> stages of ceil(32/3) = 11
  const MemoryEstimate e = Estimate("llama-2-7b", "a100-80gb", options);
  EXPECT_DOUBLE_EQ(e.kv_bytes_per_token_per_gpu, 2.0 * 11 * 32 * 128 * 2);
  EXPECT_DOUBLE_EQ(e.weights, 13'476'831'232.0 / 3);
}

TEST(MemoryTest, Llama2_70bBf16DoesNotFitOneA100) {
  const MemoryEstimate e = Estimate("llama-2-70b", "a100-80gb", MemoryOptions{});
  EXPECT_FALSE(e.fits);
  EXPECT_EQ(e.kv_blocks, 0);
  EXPECT_EQ(e.kv_tokens, 0);
  EXPECT_LT(e.kv_cache, 0);
  // 68.98e9 params * 2 bytes = 137.95e9 bytes of weights alone, against a 77.3e9 budget.
  EXPECT_DOUBLE_EQ(e.weights, 68'976'648'192.0 * 2);
  // Missing: everything but the KV cache, less the budget, plus one block (16 tokens *
  // 2 * 80 layers * 8 KV heads * 128 * 2 bytes = 5,242,880 bytes).
  EXPECT_NEAR(e.shortfall, e.weights + e.activations + e.overhead - e.budget + 5'242'880.0,
              1.0);
  EXPECT_NEAR(e.shortfall / kGib, 59.08, 0.01);
}

TEST(MemoryTest, Int4WeightsAreAQuarterOfBf16) {
  MemoryOptions options;
  const double bf16 = Estimate("llama-2-70b", "a100-80gb", options).weights;
  options.weight_dtype = DType::kInt4;
  const MemoryEstimate int4 = Estimate("llama-2-70b", "a100-80gb", options);
  EXPECT_DOUBLE_EQ(int4.weights, bf16 / 4);
  EXPECT_TRUE(int4.fits);  // 32.1 GiB of weights now fit
}

TEST(MemoryTest, KvHeadsReplicateWhenTensorParallelExceedsThem) {
  const ModelSpec qwen = FindModel("qwen2.5-7b").value();  // 4 KV heads
  EXPECT_EQ(KvHeadsPerGpu(qwen, 1), 4);
  EXPECT_EQ(KvHeadsPerGpu(qwen, 2), 2);
  EXPECT_EQ(KvHeadsPerGpu(qwen, 4), 1);
  EXPECT_EQ(KvHeadsPerGpu(qwen, 8), 1);  // replicated, not 0.5
  MemoryOptions options;
  options.tensor_parallel = 4;
  const double tp4 = Estimate("qwen2.5-7b", "a100-80gb", options).kv_bytes_per_token_per_gpu;
  options.tensor_parallel = 8;
  const double tp8 = Estimate("qwen2.5-7b", "a100-80gb", options).kv_bytes_per_token_per_gpu;
  EXPECT_DOUBLE_EQ(tp4, 2.0 * 28 * 1 * 128 * 2);
  EXPECT_DOUBLE_EQ(tp8, tp4);  // no further saving past 4 GPUs
}

TEST(MemoryTest, ContextLenOverridesTheWindow) {
  MemoryOptions options;
  options.context_len = 1024;
  const MemoryEstimate e = Estimate("llama-2-7b", "a100-80gb", options);
  EXPECT_EQ(e.context_len, 1024);
  EXPECT_DOUBLE_EQ(e.concurrent_seqs, 118'352.0 / 1024.0);
}

TEST(MemoryTest, ReportSaysWhatFitsAndWhatMisses) {
  const ModelSpec model = FindModel("llama-2-7b").value();
  const GpuSpec gpu = FindGpu("a100-80gb").value();
  const MemoryOptions options;
  const std::string report =
      FormatMemoryReport(model, gpu, options, EstimateMemory(model, gpu, options));
  EXPECT_NE(report.find("llama-2-7b on a100-80gb"), std::string::npos) << report;
  EXPECT_NE(report.find("12.55"), std::string::npos) << report;
  EXPECT_NE(report.find("57.79"), std::string::npos) << report;
  EXPECT_NE(report.find("fits: yes"), std::string::npos) << report;
  EXPECT_NE(report.find("118,352 in 7,397 blocks of 16"), std::string::npos) << report;
  EXPECT_NE(report.find("4,096 tokens: 28.9"), std::string::npos) << report;

  const ModelSpec big = FindModel("llama-2-70b").value();
  const std::string miss =
      FormatMemoryReport(big, gpu, options, EstimateMemory(big, gpu, options));
  EXPECT_NE(miss.find("fits: no (short by 59.08 GiB"), std::string::npos) << miss;
  EXPECT_EQ(report.find("mixture of experts"), std::string::npos) << report;
}

// Every expert is resident: Mixtral-8x7B's 46.70 B bf16 parameters over TP 2 are 43.50
// GiB a GPU, though a token uses 12.88 B of them.
TEST(MemoryTest, AMixtureKeepsEveryExpertResident) {
  const ModelSpec model = FindModel("mixtral-8x7b").value();
  const GpuSpec gpu = FindGpu("h100-80gb").value();
  MemoryOptions options;
  options.tensor_parallel = 2;
  const MemoryEstimate e = EstimateMemory(model, gpu, options);
  EXPECT_DOUBLE_EQ(e.weights, static_cast<double>(model.NumParams()) * 2 / 2);
  EXPECT_NEAR(e.weights / (1 << 30), 43.50, 0.005);
  const std::string report = FormatMemoryReport(model, gpu, options, e);
  EXPECT_NE(report.find("8 experts a layer, 2 per token; 46.70 B parameters resident, 12.88 B "
                        "active per token"),
            std::string::npos)
      << report;
}

}  // namespace
}  // namespace servelab
