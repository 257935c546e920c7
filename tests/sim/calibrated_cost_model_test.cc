// The calibrated cost model: the fitted ops' times, the roofline's for the rest, and a
// model that makes every op free and the step overhead fixed is the constant cost model.
#include "sim/calibrated_cost_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "driver/config_yaml.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"
#include "sim/calibration.h"
#include "sim/sim_backend.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;

class CalibratedCostModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("servelab_calibrated_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  // Every op servelab's step runs, free.
  std::string FreeOps() {
    std::string ops;
    for (const OpInfo& info : AllOps()) {
      if (!info.canonical) continue;
      ops += "  " + std::string(info.name) + ": {fixed_us: 0, memory_efficiency: .inf";
      if (info.form == OpForm::kRoofline) ops += ", compute_efficiency: .inf";
      if (info.op == Op::kAttentionPrefill) ops += ", causal_efficiency: .inf";
      ops += "}\n";
    }
    return ops;
  }
  std::filesystem::path dir_;
};

ExperimentConfig Experiment(const std::string& cost_model, const std::string& base_dir) {
  auto c = ParseExperiment("name: t\nmodel: llama-2-7b\nhardware: {gpu: a100-80gb}\n"
                           "workload: {num_requests: 200, arrival: {process: poisson, rate: 20},\n"
                           "  input_tokens: {dist: uniform, min: 10, max: 900},\n"
                           "  output_tokens: {dist: uniform, min: 1, max: 300}}\n"
                           "cost_model: " + cost_model + "\n",
                           "exp.yaml", base_dir);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

std::string Outputs(const ExperimentConfig& config) {
  std::ostringstream requests, steps;
  MetricsSinks sinks;
  sinks.requests_csv = &requests;
  sinks.steps_csv = &steps;
  auto run = RunSimulation(config, sinks);
  EXPECT_TRUE(run.ok()) << run.status().message();
  return requests.str() + steps.str();
}

// A model whose ops are all free and whose step overhead is 12.5 ms is the constant
// cost model of 12.5 ms: every request and step the same, to the nanosecond.
TEST_F(CalibratedCostModelTest, FreeOpsAndAFixedOverheadAreTheConstantModel) {
  Write("free.yaml", "device: a100-80gb\nstep_overhead_us: 12500\nops:\n" + FreeOps());
  const std::string constant = Outputs(Experiment("{type: constant, step_ms: 12.5}", "/"));
  const std::string calibrated =
      Outputs(Experiment("{type: calibrated, path: free.yaml}", dir_.string()));
  EXPECT_GT(constant.size(), 10000u);
  EXPECT_TRUE(calibrated == constant) << "the first difference at byte "
                                      << std::mismatch(constant.begin(), constant.end(),
                                                       calibrated.begin(), calibrated.end())
                                                 .first - constant.begin();
}

// Hand-computed: one decode step of Llama-2-7B at TP 1 with only qkv_proj fitted (fixed
// 10 us, memory-bound at 80% of 2,039 GB/s) and every other op free.
TEST_F(CalibratedCostModelTest, AFittedOpTakesItsFitOnTheDeploymentGpu) {
  std::string ops = FreeOps();
  ops.replace(ops.find("  qkv_proj: {fixed_us: 0"), std::string("  qkv_proj: {fixed_us: 0").size(),
              "  qkv_proj: {fixed_us: 10");
  ops.replace(ops.find("memory_efficiency: .inf, compute_efficiency: .inf}\n  rope"),
              std::string("memory_efficiency: .inf").size(), "memory_efficiency: 0.8");
  const std::string path = Write("one.yaml", "device: a100-80gb\nops:\n" + ops);
  auto model = ReadCalibratedModel(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  DeploymentSpec d;
  d.model = *FindModel("llama-2-7b");
  d.gpu = *FindGpu("a100-80gb");
  const CalibratedCostModel cost(*model, path, d, /*step_overhead_ms=*/0.5);
  Request r;
  r.prompt_len = 100;
  r.target_output_len = 10;
  StepPlan plan;
  plan.seqs.push_back(ScheduledRequest{&r, 1, 100, true, false});
  // qkv_proj at T = 1: K = 4096, N = 3 x 4096; bytes = K N 2 + (K + N) 2
  // = 100,663,296 + 32,768 = 100,696,064.
  const double qkv = 10e-6 + 100'696'064.0 / (2039e9 * 0.8);
  EXPECT_NEAR(cost.OpsSeconds(plan), 32 * qkv, 1e-12);
  EXPECT_EQ(cost.StepTime(plan), FromSeconds(32 * qkv + 0.5e-3));
  EXPECT_THAT(cost.Describe(), HasSubstr("fitted: embedding, input_norm, qkv_proj"));
  EXPECT_THAT(cost.Describe(), HasSubstr("roofline: none"));
}

// Ops the profile did not cover come from the roofline's form; Describe says which.
TEST_F(CalibratedCostModelTest, UncoveredOpsComeFromTheRoofline) {
  const std::string path = Write("gemms.yaml",
      "device: a100-80gb\nops:\n"
      "  qkv_proj: {fixed_us: 11, memory_efficiency: 0.9, compute_efficiency: 0.7}\n"
      "  residual_add: {fixed_us: 2, memory_efficiency: 0.5}\n");
  auto model = ReadCalibratedModel(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  DeploymentSpec d;
  d.model = *FindModel("llama-2-7b");
  d.gpu = *FindGpu("h100-80gb");
  const CalibratedCostModel cost(*model, path, d, 0.5);
  EXPECT_THAT(cost.Describe(), HasSubstr("fitted: qkv_proj, residual_add; roofline: embedding, "
                                         "input_norm, rope"));
  EXPECT_THAT(cost.Describe(), Not(HasSubstr("sampling")));
  // A prefill of 512 tokens costs more than a decode, and the fitted residual add counts.
  Request r;
  r.prompt_len = 512;
  r.target_output_len = 10;
  StepPlan decode, prefill;
  decode.seqs.push_back(ScheduledRequest{&r, 1, 511, true, false});
  prefill.seqs.push_back(ScheduledRequest{&r, 512, 0, true, false});
  EXPECT_GT(cost.StepTime(prefill), cost.StepTime(decode));
  EXPECT_GT(cost.OpsSeconds(decode), 32 * 2e-6);
}

// Tensor-parallel all-reduces, when the profile measures them, are fitted like any stream
// op (over the link's bandwidth) and charged twice per layer at tp > 1.
TEST_F(CalibratedCostModelTest, FittedAllReducesAreChargedTwicePerLayer) {
  OpFit truth;
  truth.op = Op::kAllReduce;
  truth.fixed_us = 9.0;
  truth.memory_efficiency = 0.7;
  const GpuSpec gpu = *FindGpu("a100-80gb");
  ProfileTable table;
  table.path = "ar.csv";
  for (int32_t tp : {2, 4, 8}) {
    for (int64_t tokens : {1, 8, 64, 256, 1024, 4096}) {
      ProfileRow r;
      r.device = "a100-80gb";
      r.shape = *FindModel("llama-2-7b");
      r.op = "allreduce";
      r.tokens = tokens;
      r.tp = tp;
      OpShape s;
      s.model = r.shape;
      s.tensor_parallel = tp;
      r.median_ms = 1e3 * OpSeconds(truth.On(gpu, s), RowsWork(Op::kAllReduce, s, double(tokens)));
      table.rows.push_back(r);
    }
  }
  auto fitted = FitProfiles({table});
  ASSERT_TRUE(fitted.ok()) << fitted.status().message();
  EXPECT_NEAR(fitted->ops.at(Op::kAllReduce).fixed_us, 9.0, 1e-6);
  EXPECT_NEAR(fitted->ops.at(Op::kAllReduce).memory_efficiency, 0.7, 1e-9);

  auto model = ReadCalibratedModel(Write("free.yaml", "device: a100-80gb\nops:\n" + FreeOps()));
  ASSERT_TRUE(model.ok()) << model.status().message();
  model->ops[Op::kAllReduce] = fitted->ops.at(Op::kAllReduce);
  DeploymentSpec d;
  d.model = *FindModel("llama-2-7b");
  d.gpu = gpu;
  d.tensor_parallel = 2;
  const CalibratedCostModel cost(*model, "free.yaml", d, 0.0);
  Request r;
  r.prompt_len = 300;
  r.target_output_len = 4;
  StepPlan plan;
  plan.seqs.push_back(ScheduledRequest{&r, 300, 0, true, false});
  // 300 tokens x 4096 x 2 bytes, ring at tp 2: 2 (2 - 1) / 2 of it over 300 GB/s x 0.7.
  const double one = 9e-6 + 300.0 * 4096 * 2 / (300e9 * 0.7);
  EXPECT_NEAR(cost.OpsSeconds(plan), 32 * 2 * one, 1e-12);
  EXPECT_THAT(cost.Describe(), HasSubstr("allreduce"));
}

TEST_F(CalibratedCostModelTest, PathIsRequiredAndResolvedAgainstTheExperiment) {
  auto missing = BuiltinCostModels().Make(NamedParams{"calibrated", {}, "cost_model", "e.yaml:4", ""},
                                         DeploymentSpec{});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(),
              HasSubstr("e.yaml:4: cost_model: 'calibrated' needs the parameter 'path'"));
  ExperimentConfig c = Experiment("{type: calibrated, path: nowhere.yaml}", dir_.string());
  const Status status = ResolveCostModel(c);
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(status.IsBadInput());
  EXPECT_THAT(status.message(), HasSubstr((dir_ / "nowhere.yaml").string() + ": cannot open"));
  Write("free.yaml", "device: a100-80gb\nops:\n" + FreeOps());
  ExperimentConfig ok = Experiment("{type: calibrated, path: free.yaml}", dir_.string());
  ASSERT_TRUE(ResolveCostModel(ok).ok());
  EXPECT_THAT(EmitResolvedConfig(ok),
              HasSubstr("path: \"" + (dir_ / "free.yaml").string() + "\""));
  EXPECT_THAT(EmitResolvedConfig(ok), HasSubstr("step_overhead_ms: 0.5"));
}

}  // namespace
}  // namespace servelab
