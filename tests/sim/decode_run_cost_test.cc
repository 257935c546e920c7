// Decode runs: a cost model that times decode batches from their aggregates
// (CostModel::DecodeStepTime) must give bit for bit what StepTime gives the plan itself,
// and the simulator's backend must predict each iteration of a run as Execute() would.
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <random>

#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"
#include "sim/roofline_cost_model.h"
#include "sim/sim_backend.h"
#include "sim/simple_cost_models.h"

namespace servelab {
namespace {

// A decode-only plan: one decode token per seq at the given cached contexts.
struct DecodePlan {
  std::deque<Request> requests;
  StepPlan plan;
  int64_t context_tokens = 0;  // Σ CostedContextLen
};

void Fill(DecodePlan& p, const std::vector<int32_t>& cached) {
  for (const int32_t c : cached) {
    Request& r = p.requests.emplace_back();
    r.prompt_len = std::max(1, c / 2);
    r.num_computed_tokens = c;
    r.num_generated = c + 1 - r.prompt_len;
    p.plan.seqs.push_back(ScheduledRequest{&r, 1, c, true, false});
    p.context_tokens += c + 1;
  }
  p.plan.num_decode_tokens = static_cast<int32_t>(cached.size());
  p.plan.num_emitting = static_cast<int32_t>(cached.size());
}

std::vector<int32_t> RandomContexts(std::mt19937_64& rng) {
  std::vector<int32_t> cached(1 + rng() % 300);
  for (int32_t& c : cached) c = static_cast<int32_t>(rng() % 32768);
  return cached;
}

DeploymentSpec Deployment(const char* model, const char* gpu, int32_t tp, int32_t pp, int32_t ep) {
  DeploymentSpec d;
  d.model = FindModel(model).value();
  d.gpu = FindGpu(gpu).value();
  d.tensor_parallel = tp;
  d.pipeline_parallel = pp;
  d.expert_parallel = ep;
  return d;
}

void ExpectAggregatesGiveStepTime(const CostModel& model, uint64_t seed) {
  ASSERT_TRUE(model.TimesDecodeBatches()) << model.Name();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 300; ++i) {
    DecodePlan p;
    Fill(p, RandomContexts(rng));
    ASSERT_EQ(model.DecodeStepTime(static_cast<int64_t>(p.plan.seqs.size()), p.context_tokens),
              model.StepTime(p.plan))
        << model.Name() << ", " << p.plan.seqs.size() << " seqs, context " << p.context_tokens;
  }
}

TEST(DecodeRunCostTest, RooflineAggregatesGiveTheStepTimeBitForBit) {
  const DeploymentSpec deployments[] = {
      Deployment("llama-2-7b", "a100-80gb", 1, 1, 1),
      Deployment("llama-3-8b", "h100-80gb", 2, 1, 1),  // grouped-query attention
      Deployment("llama-2-70b", "h100-80gb", 4, 2, 1),
      Deployment("mixtral-8x7b", "h100-80gb", 4, 1, 4),  // experts, expert parallel
      Deployment("qwen3-30b-a3b", "a100-80gb", 2, 1, 1),
  };
  uint64_t seed = 1;
  for (const DeploymentSpec& d : deployments) {
    ExpectAggregatesGiveStepTime(RooflineCostModel(RooflineOptions{}, d), seed++);
  }
}

TEST(DecodeRunCostTest, LinearAndConstantAggregatesGiveTheStepTime) {
  LinearCostModelOptions linear;
  linear.base_ms = 3.25;
  linear.per_token_ms = 0.0371;
  linear.per_context_token_ms = 0.000113;
  ExpectAggregatesGiveStepTime(LinearCostModel(linear), 11);
  ExpectAggregatesGiveStepTime(ConstantCostModel(ConstantCostModelOptions{}), 12);
}

// A GPU whose memory is so fast that decode attention is compute-bound at long contexts:
// the per-seq bound then depends on each context, so the roofline cannot time the batch
// from its aggregates, and says so.
DeploymentSpec FastMemory() {
  DeploymentSpec d = Deployment("llama-2-7b", "a100-80gb", 1, 1, 1);
  d.gpu.mem_bandwidth_gbps = 1e7;
  return d;
}

TEST(DecodeRunCostTest, RooflineDeclinesWhenDecodeAttentionCanBeComputeBound) {
  EXPECT_FALSE(RooflineCostModel(RooflineOptions{}, FastMemory()).TimesDecodeBatches());
}

SimReplica Replica() {
  SimReplica r;
  r.capacity.num_gpu_blocks = 1000;
  r.max_model_len = 1 << 20;
  return r;
}

// Iteration j of a run is the first plan with every context j longer: the backend's
// prediction must equal Execute() of that plan, on both of its paths.
void ExpectRunMatchesExecute(const DeploymentSpec& d) {
  SimBackend backend(std::make_unique<RooflineCostModel>(RooflineOptions{}, d), Replica());
  ASSERT_TRUE(backend.PredictsDecodeRuns());
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    DecodePlan p;
    Fill(p, RandomContexts(rng));
    backend.BeginDecodeRun(p.plan);
    for (int32_t j = 0; j < 40; ++j) {
      const auto predicted = backend.DecodeRunStepTime(j);
      ASSERT_TRUE(predicted.ok());
      const auto executed = backend.Execute(p.plan);
      ASSERT_TRUE(executed.ok());
      ASSERT_EQ(*predicted, executed->elapsed) << "iteration " << j;
      for (ScheduledRequest& s : p.plan.seqs) ++s.num_computed_tokens;
    }
  }
}

TEST(DecodeRunCostTest, SimBackendPredictsEachIterationAsExecuteWould) {
  ExpectRunMatchesExecute(Deployment("llama-2-7b", "a100-80gb", 1, 1, 1));  // aggregates
  ExpectRunMatchesExecute(FastMemory());                                  // whole plans
}

}  // namespace
}  // namespace servelab
