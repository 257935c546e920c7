// The simulator's backend: its facts (KV pool, context served, swap space) come from the
// experiment once, and bad deployments are bad input naming the key.
#include "sim/sim_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "driver/config_yaml.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;

ExperimentConfig Parse(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  auto c = ParseExperiment(yaml, "exp.yaml", "/", sets);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

constexpr const char* k70b = "model: llama-2-70b\nhardware: {gpu: a100-80gb}\n";

TEST(SimReplicaTest, AModelThatDoesNotFitSaysByHowMuch) {
  ExperimentConfig c = Parse(k70b);
  auto r = SimReplicaOf(c);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsBadInput());
  EXPECT_THAT(r.status().message(),
              HasSubstr("exp.yaml:1: model: llama-2-70b (bf16) does not fit on a100-80gb x1: short by"));
  c.hardware.tensor_parallel = 4;
  EXPECT_TRUE(SimReplicaOf(c).ok());
  // A fixed pool needs no memory formula.
  EXPECT_TRUE(SimReplicaOf(Parse(k70b, {"hardware.num_gpu_blocks=100"})).ok());
}

// Llama-2-70B at TP 4: 8 KV heads, 2 per GPU, 80 layers, 128 dims, bf16:
// 2 * 80 * 2 * 128 * 2 = 81,920 B per token per GPU, x16 tokens = 1,310,720 B per block
// per GPU, and a swap copy moves every GPU's shard: 4 x that.
TEST(SimReplicaTest, BlockBytesAreThePerGpuShardTimesTheGpus) {
  auto r = SimReplicaOf(Parse(k70b, {"hardware.tensor_parallel=4"}));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->kv_bytes_per_block_per_gpu, 1'310'720);
  EXPECT_EQ(r->capacity.bytes_per_block, 4 * 1'310'720);
  EXPECT_EQ(r->capacity.block_size, 16);
  EXPECT_EQ(r->capacity.num_gpu_blocks, r->memory.kv_blocks);
  // 4 GiB of host memory per GPU holds 4 GiB / 1,310,720 B = 3,276.8 -> 3,276 blocks.
  EXPECT_EQ(r->capacity.num_cpu_blocks, 3276);
}

TEST(SimReplicaTest, ContextServedIsTheWindowOrTheLowerLimit) {
  const std::string yaml = "model: llama-2-7b\nhardware: {gpu: a100-80gb}\n";
  EXPECT_EQ(SimReplicaOf(Parse(yaml))->max_model_len, 4096);
  EXPECT_EQ(SimReplicaOf(Parse(yaml, {"scheduler.max_model_len=1000"}))->max_model_len, 1000);
  auto over = SimReplicaOf(Parse(yaml, {"scheduler.max_model_len=5000"}));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(),
            "--set scheduler.max_model_len: scheduler.max_model_len: 5000 exceeds the context "
            "window of llama-2-7b (4096)");
}

TEST(SimReplicaTest, SwapNeedsPcieBandwidth) {
  auto r = SimReplicaOf(Parse(
      "model: llama-2-7b\nhardware: {gpu: {base: a100-80gb, pcie_gbps: 0}}\n"
      "scheduler: {preemption: swap}\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("scheduler.preemption: swap needs"));
}

// The resolved cost model lists every parameter with its default, in canonical form, and
// parses back to the same model.
TEST(ResolveCostModelTest, FillsDefaultsAndKeepsGivenValues) {
  ExperimentConfig c = Parse("model: llama-2-7b\nhardware: {gpu: a100-80gb}\n"
                             "cost_model: {type: roofline, gemm_efficiency: 0.70}\n");
  ASSERT_TRUE(ResolveCostModel(c).ok());
  ASSERT_EQ(c.cost_model.params.size(), 10u);
  EXPECT_EQ(c.cost_model.params[0].key, "gemm_efficiency");
  EXPECT_EQ(c.cost_model.params[0].value, "0.7");
  EXPECT_EQ(c.cost_model.params[5].key, "step_overhead_ms");
  EXPECT_EQ(c.cost_model.params[5].value, "0.5");
  EXPECT_EQ(c.cost_model.params[6].key, "expert_imbalance");
  EXPECT_EQ(c.cost_model.params[6].value, "0.0");
  EXPECT_EQ(c.cost_model.params[7].key, "routing_skew");
  EXPECT_EQ(c.cost_model.params[7].value, "0.0");
  EXPECT_EQ(c.cost_model.params[8].key, "routing_locality");
  EXPECT_EQ(c.cost_model.params[8].value, "0.0");
  EXPECT_EQ(c.cost_model.params[9].key, "routing_favourites");
  EXPECT_EQ(c.cost_model.params[9].value, "1.0");
  const std::string emitted = EmitResolvedConfig(c);
  EXPECT_THAT(emitted, HasSubstr("cost_model:\n  type: roofline\n  gemm_efficiency: 0.7\n"));
  ExperimentConfig again = Parse(emitted);
  ASSERT_TRUE(ResolveCostModel(again).ok());
  EXPECT_EQ(EmitResolvedConfig(again), emitted);

  ExperimentConfig bad = Parse("model: llama-2-7b\nhardware: {gpu: a100-80gb}\n"
                               "cost_model: {type: constant, step_ms: -1}\n");
  const Status status = ResolveCostModel(bad);
  EXPECT_EQ(status.message(), "exp.yaml:3: cost_model.step_ms: value -1 out of range: must be in (0, 1000000]");
}

// The backend the factory builds reports those facts and predicts a lone prefill with the
// cost model (MLFQ sizes its levels by it).
TEST(SimBackendTest, ReportsItsFactsAndPredictsPrefill) {
  ExperimentConfig c = Parse("model: llama-2-7b\nhardware: {gpu: a100-80gb}\n"
                             "cost_model: {type: linear, base_ms: 2, per_token_ms: 0.5}\n");
  auto factory = MakeSimBackendFactory(c);
  ASSERT_TRUE(factory.ok()) << factory.status().message();
  auto backend = (*factory)(0);
  ASSERT_TRUE(backend.ok());
  EXPECT_EQ((*backend)->Name(), "sim");
  EXPECT_EQ((*backend)->MaxModelLen(), 4096);
  EXPECT_EQ((*backend)->Capacity().num_gpu_blocks, SimReplicaOf(c)->capacity.num_gpu_blocks);
  // 2 + 0.5 x 10 tokens = 7 ms; context 10 adds nothing (per_context_token_ms 0).
  EXPECT_EQ((*backend)->PredictPrefillTime(10), 7 * kNsPerMs);
}

}  // namespace
}  // namespace servelab
