// The calibrated cost model: the fitted ops' times, the roofline's for the rest, and a
// model that makes every op free and the step overhead fixed is the constant cost model.
#include "sim/calibrated_cost_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "driver/config_yaml.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"
#include "sim/calibration.h"
#include "sim/model_file.h"
#include "sim/roofline_cost_model.h"
#include "sim/sim_backend.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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
  // FreeOps with qkv_proj a fixed 10 us plus its bytes at 80% of the bandwidth.
  std::string QkvOps() {
    std::string ops = FreeOps();
    const std::string qkv = "  qkv_proj: {fixed_us: 0";
    ops.replace(ops.find(qkv), qkv.size(), "  qkv_proj: {fixed_us: 10");
    ops.replace(ops.find("memory_efficiency: .inf, compute_efficiency: .inf}\n  rope"),
                std::string("memory_efficiency: .inf").size(), "memory_efficiency: 0.8");
    return ops;
  }
  // A model file that fits only an op servelab's step does not run (a free residual
  // add): every op of the step takes the roofline's form.
  std::string RooflineFormModel() {
    return Write("none.yaml",
                 "device: a100-80gb\nops:\n  residual_add: {fixed_us: 0, memory_efficiency: .inf}\n");
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
  std::string ops = QkvOps();
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

// A GEMM correction scales its op at the deployment's weight shape, by the step's rows:
// Llama-2-7B's qkv_proj ([4096, 12288] at TP 1) corrected 1.5x at 1 row and 2x at 64,
// o_proj a fixed 7 us with a 9x correction at a shape it does not have ([4096, 8192]),
// every other op free. Not at TP 2 (another shape), not on another GPU, not for int4
// weights, not with gemm_corrections: false.
TEST_F(CalibratedCostModelTest, GemmCorrectionsScaleTheirOpAtTheDeploymentsShape) {
  std::string ops = QkvOps();
  ops.replace(ops.find("  o_proj: {fixed_us: 0"), std::string("  o_proj: {fixed_us: 0").size(),
              "  o_proj: {fixed_us: 7");
  const std::string corrections =
      "gemm_corrections:\n"
      "  - {op: qkv_proj, k: 4096, n: 12288, rows: [1, 64], factor: [1.5, 2.0]}\n"
      "  - {op: o_proj, k: 4096, n: 8192, rows: [1, 64], factor: [9.0, 9.0]}\n";
  const std::string path = Write("corrected.yaml", "device: a100-80gb\n" + corrections + "ops:\n" + ops);
  auto model = ReadCalibratedModel(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  DeploymentSpec d;
  d.model = *FindModel("llama-2-7b");
  d.gpu = *FindGpu("a100-80gb");
  Request r;
  r.prompt_len = 100;
  r.target_output_len = 10;
  StepPlan decode, chunk;
  decode.seqs.push_back(ScheduledRequest{&r, 1, 100, true, false});
  chunk.seqs.push_back(ScheduledRequest{&r, 32, 0, false, false});
  // qkv_proj (memory-bound, the test above): K N 2 + T (K + N) 2 bytes at 80% of the
  // GPU's bandwidth, N = 12,288 / tp.
  auto qkv = [](double t, double tp = 1, double bandwidth = 2039e9) {
    const double n = 12288 / tp;
    return 10e-6 + (4096.0 * n * 2 + t * (4096 + n) * 2) / (bandwidth * 0.8);
  };
  const double o = 7e-6;
  const CalibratedCostModel cost(*model, path, d, 0.5);
  EXPECT_NEAR(cost.OpsSeconds(decode), 32 * (qkv(1) * 1.5 + o), 1e-12);
  EXPECT_NEAR(cost.OpsSeconds(chunk), 32 * (qkv(32) * (1.5 + 0.5 * 31.0 / 63.0) + o), 1e-12);
  EXPECT_THAT(cost.Describe(), ::testing::EndsWith("; measured GEMM corrections: qkv_proj"));
  const CalibratedCostModel off(*model, path, d, 0.5, 0, {}, /*gemm_corrections=*/false);
  EXPECT_NEAR(off.OpsSeconds(decode), 32 * (qkv(1) + o), 1e-12);
  EXPECT_THAT(off.Describe(), Not(HasSubstr("corrections")));
  DeploymentSpec tp2 = d;
  tp2.tensor_parallel = 2;
  EXPECT_NEAR(CalibratedCostModel(*model, path, tp2, 0.5).OpsSeconds(decode),
              32 * (qkv(1, 2) + o), 1e-12);
  DeploymentSpec h100 = d;
  h100.gpu = *FindGpu("h100-80gb");
  const CalibratedCostModel other_gpu(*model, path, h100, 0.5);
  EXPECT_NEAR(other_gpu.OpsSeconds(decode), 32 * (qkv(1, 1, 3350e9) + o), 1e-12);
  EXPECT_THAT(other_gpu.Describe(), Not(HasSubstr("corrections")));
  DeploymentSpec int4 = d;
  int4.weight_dtype = DType::kInt4;
  EXPECT_THAT(CalibratedCostModel(*model, path, int4, 0.5).Describe(), Not(HasSubstr("corrections")));
  // With a matrix-vector fit of its own (here the same terms), one row is that kernel's,
  // uncorrected; 32 rows are still the GEMM's, corrected.
  CalibratedModel gemv = *model;
  gemv.ops.at(Op::kQkvProj).single_row_fitted = true;
  gemv.ops.at(Op::kQkvProj).single_row_fixed_us = 10;
  gemv.ops.at(Op::kQkvProj).single_row_memory_efficiency = 0.8;
  const CalibratedCostModel with_gemv(gemv, path, d, 0.5);
  EXPECT_NEAR(with_gemv.OpsSeconds(decode), 32 * (qkv(1) + o), 1e-12);
  EXPECT_NEAR(with_gemv.OpsSeconds(chunk), 32 * (qkv(32) * (1.5 + 0.5 * 31.0 / 63.0) + o), 1e-12);
  // A model without dense MLPs (Mixtral) at a shape whose gate|up is corrected: its MLP is
  // the experts', uncorrected, and the summary does not claim otherwise.
  CalibratedModel moe = *model;
  DeploymentSpec mixtral = d;
  mixtral.model = *FindModel("mixtral-8x7b");
  const OpWork up = RowsWork(Op::kGateUpProj, OpShape{mixtral.model, 1}, 1);
  moe.gemm_corrections.push_back(GemmCorrection{Op::kGateUpProj, static_cast<int64_t>(up.gemm_k),
                                                static_cast<int64_t>(up.gemm_n), {1, 2}, {3.0, 3.0}});
  EXPECT_THAT(CalibratedCostModel(moe, path, mixtral, 0.5).Describe(),
              Not(HasSubstr("measured GEMM corrections")));
  mixtral.model.first_k_dense_replace = 1;  // a dense first layer: its MLP is corrected
  EXPECT_THAT(CalibratedCostModel(moe, path, mixtral, 0.5).Describe(),
              HasSubstr("; measured GEMM corrections: gate_up_proj; mixture of experts"));

  // Through the experiment: the key is read (and recorded) when the model has corrections.
  const std::string on = Outputs(Experiment("{type: calibrated, path: corrected.yaml}", dir_.string()));
  const std::string given_off = Outputs(
      Experiment("{type: calibrated, path: corrected.yaml, gemm_corrections: false}", dir_.string()));
  EXPECT_NE(on, given_off);
  Write("uncorrected.yaml", "device: a100-80gb\nops:\n" + ops);
  EXPECT_EQ(given_off, Outputs(Experiment("{type: calibrated, path: uncorrected.yaml}", dir_.string())));
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

// A decode batch of `seqs` sequences at `context` tokens each, over requests `owned`
// keeps.
StepPlan DecodeBatch(std::deque<Request>& owned, int32_t seqs, int32_t context) {
  StepPlan plan;
  for (int32_t i = 0; i < seqs; ++i) {
    Request& r = owned.emplace_back();
    r.id = static_cast<int64_t>(owned.size());
    r.prompt_len = context - 1;
    r.target_output_len = 100;
    r.num_computed_tokens = context - 1;
    plan.seqs.push_back(ScheduledRequest{&r, 1, context - 1, true, false});
  }
  return plan;
}

DeploymentSpec MoeDeployment(const ModelSpec& model, int32_t tp, int32_t ep = 1) {
  DeploymentSpec d;
  d.model = model;
  d.gpu = *FindGpu("a100-80gb");
  d.tensor_parallel = tp;
  d.expert_parallel = ep;
  return d;
}

// A Mixtral-shaped model with a shared expert (Qwen2-MoE's) and two dense first layers
// (DeepSeek's), to count every part of a MoE step.
ModelSpec SharedExpertModel() {
  ModelSpec m = *FindModel("mixtral-8x7b");
  m.name = "moe-shared";
  m.shared_expert_intermediate_size = 4096;
  m.first_k_dense_replace = 2;
  return m;
}

// Every op from the roofline's form (a model file that fits only an op servelab's step
// does not run): a MoE decode step then costs what the roofline costs it, the router,
// the shared expert, the experts touched, the dense first layers and the all-reduces
// counted alike, to rounding. (Decode steps: the roofline counts the final norm over
// every token, the calibrated model over the emitting rows, as the runners do.)
TEST_F(CalibratedCostModelTest, MixtureOfExpertsOnTheRooflinesFormIsTheRoofline) {
  const std::string path = RooflineFormModel();
  auto model = ReadCalibratedModel(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  std::deque<Request> owned;
  for (const auto& [spec, tp] : {std::pair{*FindModel("mixtral-8x7b"), 2},
                                 std::pair{*FindModel("qwen3-30b-a3b"), 1},
                                 std::pair{SharedExpertModel(), 4}}) {
    const DeploymentSpec d = MoeDeployment(spec, tp);
    const CalibratedCostModel calibrated(*model, path, d, 0.5);
    const RooflineCostModel roofline(RooflineOptions{}, d);
    for (const int32_t seqs : {1, 3, 16, 64, 256}) {
      const StepPlan plan = DecodeBatch(owned, seqs, 700);
      const double expected = roofline.Breakdown(plan).total_s();
      EXPECT_NEAR(calibrated.OpsSeconds(plan) + 0.5e-3, expected, 1e-12 * expected)
          << spec.name << " at TP " << tp << ", " << seqs << " sequences";
    }
    EXPECT_THAT(calibrated.Describe(), HasSubstr("mixture of experts: router (roofline)"));
  }
}

// Under expert parallelism each GPU computes SiLU x mul for its own rows only, in the
// calibrated model as in the roofline (RooflineCostModelTest's hand count); the
// all-to-all is the roofline's. On the roofline's form the two agree under EP too.
TEST_F(CalibratedCostModelTest, ExpertParallelGpusActivateTheirOwnRows) {
  const std::string path = RooflineFormModel();
  auto model = ReadCalibratedModel(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const ModelSpec mixtral = *FindModel("mixtral-8x7b");
  const DeploymentSpec d = MoeDeployment(mixtral, 4, 4);
  const CalibratedCostModel calibrated(*model, path, d, 0.5);
  const RooflineCostModel roofline(RooflineOptions{}, d);
  EXPECT_THAT(calibrated.Describe(), HasSubstr("all-to-all over 4 GPUs (roofline)"));
  std::deque<Request> owned;
  for (const int32_t seqs : {1, 32, 200}) {
    const StepPlan plan = DecodeBatch(owned, seqs, 300);
    const double expected = roofline.Breakdown(plan).total_s();
    EXPECT_NEAR(calibrated.OpsSeconds(plan) + 0.5e-3, expected, 1e-12 * expected) << seqs;
  }
}

// By hand: Mixtral at TP 1 with gate_up_proj fitted compute-bound (fixed 5 us, 50% of the
// 312 TFLOP/s bf16 peak, bytes free; its own tile of 128 rows is cuBLAS's, not the fused
// kernel's) and every other op free but the router (the roofline's). One token: its two
// experts each compute a whole block of vLLM's fused MoE, 16 rows (at most 8 tokens for
// 8 experts), 2 x 16 rows of [4096] x [4096, 2 x 14,336]. 4,096 tokens: blocks of 64,
// 8,444 rows (ExpertRoutingTest's hand count).
TEST_F(CalibratedCostModelTest, GroupedExpertsComputeWholeTilesPerExpert) {
  std::string ops = FreeOps();
  const std::string free_gate_up =
      "  gate_up_proj: {fixed_us: 0, memory_efficiency: .inf, compute_efficiency: .inf}\n";
  ops.replace(ops.find(free_gate_up), free_gate_up.size(),
              "  gate_up_proj: {fixed_us: 5, memory_efficiency: .inf, compute_efficiency: 0.5, "
              "row_tile: 128}\n");
  const std::string path = Write("tiles.yaml", "device: a100-80gb\nops:\n" + ops);
  auto model = ReadCalibratedModel(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const CalibratedCostModel cost(*model, path, MoeDeployment(*FindModel("mixtral-8x7b"), 1), 0);
  std::deque<Request> owned;
  const StepPlan plan = DecodeBatch(owned, 1, 10);
  const double experts = 5e-6 + 2.0 * (2 * 16) * 4096 * (2 * 14336) / (312e12 * 0.5);
  // The router, [1, 4096] x [4096, 8]: its bytes at 85% of 2,039 GB/s.
  const double router = (4096.0 * 8 * 2 + (4096 + 8) * 2) / (2039e9 * 0.85);
  EXPECT_NEAR(cost.OpsSeconds(plan), 32 * (experts + router), 1e-9 * 32 * experts);
  EXPECT_EQ(FusedMoeBlockRows(8, 8), 16);
  EXPECT_EQ(FusedMoeBlockRows(9, 8), 64);
  Request& r = owned.emplace_back();
  r.prompt_len = 4096;
  r.target_output_len = 10;
  StepPlan chunk;
  chunk.seqs.push_back(ScheduledRequest{&r, 4096, 0, true, false});
  const double padded = ExpertRouting(8, 2, 1, {}).BusiestGpuPaddedRows(4096, 64);
  EXPECT_NEAR(padded, 8444.3, 1.0);
  const double big = 5e-6 + 2.0 * padded * 4096 * (2 * 14336) / (312e12 * 0.5);
  const double big_router = std::max(2.0 * 4096 * 4096 * 8 / (312e12 * 0.75),
                                     (4096.0 * 8 * 2 + 4096.0 * (4096 + 8) * 2) / (2039e9 * 0.85));
  EXPECT_NEAR(cost.OpsSeconds(chunk), 32 * (big + big_router), 1e-9 * 32 * big);

  // An additive fit streaming weights at twice the HBM peak (as the A100's and H100's
  // GEMM fits do, the rest of their time in padded FLOPs) and a matrix-vector kernel at
  // half of it: the fused kernel reads the experts' weights at the latter's rate, its
  // FLOPs (free here) max()ed with them, not added.
  std::string gemv_ops = FreeOps();
  gemv_ops.replace(gemv_ops.find(free_gate_up), free_gate_up.size(),
                   "  gate_up_proj: {form: additive, fixed_us: 0, memory_efficiency: 2, "
                   "compute_efficiency: .inf, single_row: {fixed_us: 0, memory_efficiency: 0.5}}\n");
  const std::string gemv_path = Write("gemv.yaml", "device: a100-80gb\nops:\n" + gemv_ops);
  auto gemv_model = ReadCalibratedModel(gemv_path);
  ASSERT_TRUE(gemv_model.ok()) << gemv_model.status().message();
  const CalibratedCostModel gemv(*gemv_model, gemv_path,
                                 MoeDeployment(*FindModel("mixtral-8x7b"), 1), 0);
  // Two experts' [4096, 2 x 14,336] weights and two rows in and out, bf16.
  const double bytes = 2.0 * 4096 * 28672 * 2 + 2.0 * (4096 + 28672) * 2;
  EXPECT_NEAR(gemv.OpsSeconds(plan), 32 * (bytes / (2039e9 * 0.5) + router), 1e-12);
}

// A model that fits moe_mlp (the engine's profile of a MoE model) costs every MoE layer's
// MLP with it, its cost per expert run times the experts the step touches, instead of the
// parts; a dense model never runs it.
TEST_F(CalibratedCostModelTest, AFittedMoeMlpIsTheWholeMlpOfMoeLayers) {
  const std::string path = Write(
      "moe.yaml", "device: a100-80gb\nops:\n" + FreeOps() +
                      "  moe_mlp: {fixed_us: 7, memory_efficiency: .inf, compute_efficiency: .inf,"
                      " per_expert_us: 3}\n");
  auto model = ReadCalibratedModel(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const CalibratedCostModel moe(*model, path, MoeDeployment(*FindModel("mixtral-8x7b"), 1), 0);
  std::deque<Request> owned;
  // One token: 2 of 8 experts. 16 tokens: 8 (1 - (3/4)^16) of them.
  EXPECT_NEAR(moe.OpsSeconds(DecodeBatch(owned, 1, 50)), 32 * (7 + 3 * 2.0) * 1e-6, 1e-15);
  const double touched = 8 * (1 - std::pow(0.75, 16));
  EXPECT_NEAR(moe.OpsSeconds(DecodeBatch(owned, 16, 50)), 32 * (7 + 3 * touched) * 1e-6, 1e-15);
  EXPECT_THAT(moe.Describe(), HasSubstr("mixture of experts: moe_mlp (the whole MLP, fitted)"));
  EXPECT_THAT(moe.Describe(), Not(HasSubstr("gate_up_proj")));  // no dense layer runs it
  DeploymentSpec dense;
  dense.model = *FindModel("llama-2-7b");
  dense.gpu = *FindGpu("a100-80gb");
  const CalibratedCostModel llama(*model, path, dense, 0);
  EXPECT_EQ(llama.OpsSeconds(DecodeBatch(owned, 4, 50)), 0.0);
  EXPECT_THAT(llama.Describe(), Not(HasSubstr("moe_mlp")));
}

// A MoE experiment runs on a calibrated model with the roofline's routing parameters,
// checked alike; latent attention is still the roofline's alone.
TEST_F(CalibratedCostModelTest, MoeExperimentsTakeTheRoutingParameters) {
  Write("free.yaml", "device: a100-80gb\nops:\n" + FreeOps());
  auto experiment = [&](const std::string& model, const std::string& extra) {
    auto c = ParseExperiment("name: t\nmodel: " + model +
                                 "\nhardware: {gpu: h100-80gb, tensor_parallel: 2, "
                                 "expert_parallel: 2}\nworkload: {num_requests: 20}\n"
                                 "cost_model: {type: calibrated, path: free.yaml" + extra + "}\n",
                             "exp.yaml", dir_.string());
    EXPECT_TRUE(c.ok()) << c.status().message();
    return *c;
  };
  ExperimentConfig skewed = experiment("mixtral-8x7b", ", routing_skew: 1.2");
  ASSERT_TRUE(ResolveCostModel(skewed).ok());
  EXPECT_THAT(EmitResolvedConfig(skewed), HasSubstr("routing_skew: 1.2"));
  ExperimentConfig bad = experiment("mixtral-8x7b", ", expert_imbalance: 0.5");
  const Status imbalance = ResolveCostModel(bad);
  ASSERT_FALSE(imbalance.ok());
  EXPECT_TRUE(imbalance.IsBadInput());
  EXPECT_THAT(imbalance.message(), HasSubstr("exp.yaml:5: cost_model.expert_imbalance: the busiest "
                                             "GPU carries at least the mean load"));
  // A locality needs its favourites beside it (alone it once meant n^(1 - l) draws); at 0,
  // or with them, it is read; the favourites' bounds are checked.
  ExperimentConfig alone = experiment("mixtral-8x7b", ", routing_locality: 0.63");
  const Status locality = ResolveCostModel(alone);
  EXPECT_TRUE(locality.IsBadInput());
  EXPECT_THAT(locality.message(), HasSubstr("exp.yaml:5: cost_model.routing_locality: give "
                                            "routing_favourites beside it"));
  ExperimentConfig off = experiment("mixtral-8x7b", ", routing_locality: 0");
  EXPECT_TRUE(ResolveCostModel(off).ok());
  ExperimentConfig both = experiment("mixtral-8x7b", ", routing_locality: 0.98, routing_favourites: 3.8");
  ASSERT_TRUE(ResolveCostModel(both).ok());
  EXPECT_THAT(EmitResolvedConfig(both), HasSubstr("routing_locality: 0.98\n  routing_favourites: 3.8\n"));
  ExperimentConfig few = experiment("mixtral-8x7b", ", routing_locality: 0.5, routing_favourites: 0.5");
  EXPECT_THAT(ResolveCostModel(few).message(),
              HasSubstr("exp.yaml:5: cost_model.routing_favourites: value 0.5 out of range"));
  ExperimentConfig latent = experiment("deepseek-v3", "");
  EXPECT_TRUE(ResolveCostModel(latent).ok());
}

// The routing a MoE profile counted (MODEL.yaml's `routing`) is the default for a model of
// its shape, recorded in the resolved config; another shape routes uniformly, and the
// experiment's own keys win. At locality 1 over one favourite a prefill chunk of 64
// tokens runs the 2
// experts one token runs (moe_mlp: 7 us + 3 us an expert, each of 32 layers); decodes of
// distinct sequences still route independently.
TEST_F(CalibratedCostModelTest, TheCountedRoutingIsTheDefaultForItsModelsShape) {
  const std::string moe_mlp =
      "  moe_mlp: {fixed_us: 7, memory_efficiency: .inf, compute_efficiency: .inf,"
      " per_expert_us: 3}\n";
  const std::string routing =
      "routing:\n  - {num_experts: 8, experts_per_token: 2, hidden_size: 4096,"
      " expert_intermediate_size: 14336, routing_skew: 0, routing_locality: 1,"
      " routing_favourites: 1}\n";
  const std::string path =
      Write("counted.yaml", "device: a100-80gb\n" + routing + "ops:\n" + FreeOps() + moe_mlp);
  auto resolved = [&](const std::string& model, const std::string& extra) {
    auto c = ParseExperiment("name: t\nmodel: " + model +
                                 "\nhardware: {gpu: a100-80gb}\nworkload: {num_requests: 20}\n"
                                 "cost_model: {type: calibrated, path: counted.yaml" + extra + "}\n",
                             "exp.yaml", dir_.string());
    EXPECT_TRUE(c.ok()) << c.status().message();
    EXPECT_TRUE(ResolveCostModel(*c).ok());
    return EmitResolvedConfig(*c);
  };
  EXPECT_THAT(resolved("mixtral-8x7b", ""), HasSubstr("routing_locality: 1"));
  EXPECT_THAT(resolved("mixtral-8x7b", ", routing_locality: 0.25, routing_favourites: 1"),
              HasSubstr("routing_locality: 0.25"));
  EXPECT_THAT(resolved("mixtral-8x7b", ", routing_favourites: 6"), HasSubstr("routing_favourites: 6"));
  EXPECT_THAT(resolved("qwen3-30b-a3b", ""), HasSubstr("routing_locality: 0"));
  EXPECT_THAT(resolved("qwen3-30b-a3b", ""), HasSubstr("routing_favourites: 1"));

  auto model = ReadCalibratedModel(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  ASSERT_EQ(model->routing.size(), 1u);
  const DeploymentSpec d = MoeDeployment(*FindModel("mixtral-8x7b"), 1);
  const CalibratedCostModel local(*model, path, d, 0, 0, model->routing[0].Options());
  const CalibratedCostModel independent(*model, path, d, 0);
  EXPECT_THAT(local.Describe(), HasSubstr("routing skew 0.0 and locality 1.0 over 1.0 favourites"));
  std::deque<Request> owned;
  Request& r = owned.emplace_back();
  r.prompt_len = 64;
  r.target_output_len = 10;
  StepPlan chunk;
  chunk.seqs.push_back(ScheduledRequest{&r, 64, 0, true, false});
  EXPECT_NEAR(local.OpsSeconds(chunk), 32 * (7 + 3 * 2.0) * 1e-6, 1e-15);
  EXPECT_NEAR(independent.OpsSeconds(chunk), 32 * (7 + 3 * 8 * (1 - std::pow(0.75, 64))) * 1e-6,
              1e-15);
  const StepPlan decodes = DecodeBatch(owned, 16, 50);
  EXPECT_EQ(local.OpsSeconds(decodes), independent.OpsSeconds(decodes));
}

// DeepSeek-V3 (latent attention, 256 experts of which 8 a token, a shared expert, three
// dense layers first) at TP 8 with every op on the roofline's form: a decode step costs
// what the roofline costs it, to rounding. Its attention is the roofline's whatever the
// model fits; its projections take qkv_proj's and o_proj's fits.
TEST_F(CalibratedCostModelTest, LatentAttentionOnTheRooflinesFormIsTheRoofline) {
  const std::string path = RooflineFormModel();
  auto model = ReadCalibratedModel(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  DeploymentSpec d = MoeDeployment(*FindModel("deepseek-v3"), 8);
  d.gpu = *FindGpu("h200-141gb");
  d.weight_dtype = DType::kFp8;
  const CalibratedCostModel calibrated(*model, path, d, 0.5);
  const RooflineCostModel roofline(RooflineOptions{}, d);
  std::deque<Request> owned;
  for (const int32_t seqs : {1, 8, 100}) {
    const StepPlan plan = DecodeBatch(owned, seqs, 3000);
    const double expected = roofline.Breakdown(plan).total_s();
    EXPECT_NEAR(calibrated.OpsSeconds(plan) + 0.5e-3, expected, 1e-12 * expected) << seqs;
  }
  EXPECT_THAT(calibrated.Describe(),
              HasSubstr("latent attention: attention (roofline), its 4 projections from "
                        "qkv_proj and its output from o_proj"));
  // A fitted qkv_proj is charged for each of the 4 projections in every one of the 61
  // layers: 10 us more of its fixed cost is 61 x 4 x 10 us more a step.
  OpFit qkv;
  qkv.op = Op::kQkvProj;
  qkv.fixed_us = 10;
  qkv.memory_efficiency = 0.8;
  qkv.compute_efficiency = 0.7;
  model->ops[Op::kQkvProj] = qkv;
  const CalibratedCostModel ten(*model, path, d, 0.5);
  model->ops[Op::kQkvProj].fixed_us = 20;
  const CalibratedCostModel twenty(*model, path, d, 0.5);
  const StepPlan one = DecodeBatch(owned, 1, 3000);
  EXPECT_NEAR(twenty.OpsSeconds(one) - ten.OpsSeconds(one), 61 * 4 * 10e-6, 1e-12);
}

// Latent attention in a model without experts (DeepSeek-V3's attention, a dense MLP in
// every layer): its MLP is counted, as the roofline counts it.
TEST_F(CalibratedCostModelTest, LatentAttentionWithADenseMlpIsTheRoofline) {
  const std::string path = RooflineFormModel();
  auto model = ReadCalibratedModel(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  ModelSpec dense = *FindModel("deepseek-v3");
  dense.name = "mla-dense";
  dense.num_experts = 0;
  dense.num_experts_per_tok = 0;
  dense.first_k_dense_replace = 0;
  dense.num_hidden_layers = 8;
  DeploymentSpec d = MoeDeployment(dense, 8);
  const CalibratedCostModel calibrated(*model, path, d, 0.5);
  const RooflineCostModel roofline(RooflineOptions{}, d);
  std::deque<Request> owned;
  for (const int32_t seqs : {1, 64}) {
    const StepPlan plan = DecodeBatch(owned, seqs, 1000);
    const double expected = roofline.Breakdown(plan).total_s();
    EXPECT_NEAR(calibrated.OpsSeconds(plan) + 0.5e-3, expected, 1e-12 * expected) << seqs;
  }
}

// Pipeline parallelism, Llama-2-7B at TP 4 x PP 4 on 8-GPU nodes: the boundary after
// stage 1 is between nodes. On the roofline's form a decode step costs what the
// roofline costs it (its transfers: three over the link, one of them on the network).
// Stage by stage, each of the 8-layer stages does the same layers; the first also the
// embedding, the last the final norm and LM head, and stage 1 its transfer over the
// network (50 GB/s x 0.8, 10 us more latency) where stage 0's goes over NVLink (300 GB/s
// x 0.8): by hand, to the ns the stages' rounding allows.
TEST_F(CalibratedCostModelTest, PipelineStagesTransferOverTheLinkBetweenThem) {
  const std::string path = RooflineFormModel();
  auto model = ReadCalibratedModel(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  DeploymentSpec d = MoeDeployment(*FindModel("llama-2-7b"), 4);
  d.pipeline_parallel = 4;
  const CalibratedCostModel calibrated(*model, path, d, 0.5);
  const RooflineCostModel roofline(RooflineOptions{}, d);
  EXPECT_EQ(roofline.StageBoundariesOnTheNetwork(), 1);
  EXPECT_THAT(calibrated.Describe(), HasSubstr("stage transfers (roofline)"));
  std::deque<Request> owned;
  const StepPlan plan = DecodeBatch(owned, 16, 500);
  const double expected = roofline.Breakdown(plan).total_s();
  EXPECT_NEAR(calibrated.OpsSeconds(plan) + 0.5e-3, expected, 1e-12 * expected);
  std::array<TimeNs, 4> stages{};
  calibrated.StageTimes(plan, stages);
  EXPECT_EQ(stages[0] + stages[1] + stages[2] + stages[3], calibrated.StepTime(plan));
  const double hidden_bytes = 16.0 * 4096 * 2;
  const double nvlink = hidden_bytes / (300e9 * 0.8) + 10e-6;
  const double network = hidden_bytes / (50e9 * 0.8) + 20e-6;
  // The embedding: 16 tokens' rows, read (bf16) and written, at 85% of 2,039 GB/s.
  const double embedding = 16.0 * 4096 * (2 + 2) / (2039e9 * 0.85);
  EXPECT_NEAR(ToSeconds(stages[1] - stages[0]), network - nvlink - embedding, 2e-9);
  EXPECT_NEAR(ToSeconds(stages[1] - stages[2]), network - nvlink, 2e-9);
  EXPECT_GT(stages[3], stages[2] - FromSeconds(nvlink));  // the LM head, no transfer
}

// A TP group across two nodes (TP 16 on 8-GPU nodes) all-reduces over the network, the
// roofline's: a fitted all-reduce measured one node's NVLink. On one 16-GPU node the fit
// holds. Every other op free: 32 layers x 2 all-reduces of 2 (16 - 1) / 16 x 300 tokens
// x 4096 x 2 bytes, at 50 GB/s x 0.8 plus 10 + 10 us, or at the fit's 9 us + 300 GB/s x 0.7.
TEST_F(CalibratedCostModelTest, AllReducesAcrossNodesRunOnTheNetwork) {
  auto model = ReadCalibratedModel(Write("free.yaml", "device: a100-80gb\nops:\n" + FreeOps()));
  ASSERT_TRUE(model.ok()) << model.status().message();
  OpFit allreduce;
  allreduce.op = Op::kAllReduce;
  allreduce.fixed_us = 9;
  allreduce.memory_efficiency = 0.7;
  model->ops[Op::kAllReduce] = allreduce;
  DeploymentSpec d = MoeDeployment(*FindModel("llama-2-7b"), 16);
  Request r;
  r.prompt_len = 300;
  r.target_output_len = 4;
  StepPlan plan;
  plan.seqs.push_back(ScheduledRequest{&r, 300, 0, true, false});
  const double bytes = 2.0 * 15 / 16 * 300 * 4096 * 2;
  const CalibratedCostModel across(*model, "free.yaml", d, 0.0);
  EXPECT_NEAR(across.OpsSeconds(plan), 64 * (bytes / (50e9 * 0.8) + 20e-6), 1e-12);
  EXPECT_THAT(across.Describe(), HasSubstr("all-reduce over the network between nodes"));
  d.gpus_per_node = 16;
  const CalibratedCostModel within(*model, "free.yaml", d, 0.0);
  EXPECT_NEAR(within.OpsSeconds(plan), 64 * (bytes / (300e9 * 0.7) + 9e-6), 1e-12);
  EXPECT_THAT(within.Describe(), Not(HasSubstr("network")));
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
  // The experiment's key first (where the path was given), then the model file's error.
  EXPECT_THAT(status.message(),
              HasSubstr("cost_model.path: " + (dir_ / "nowhere.yaml").string() + ": cannot open"));
  Write("free.yaml", "device: a100-80gb\nops:\n" + FreeOps());
  ExperimentConfig ok = Experiment("{type: calibrated, path: free.yaml}", dir_.string());
  ASSERT_TRUE(ResolveCostModel(ok).ok());
  EXPECT_THAT(EmitResolvedConfig(ok),
              HasSubstr("path: \"" + (dir_ / "free.yaml").string() + "\""));
  EXPECT_THAT(EmitResolvedConfig(ok), HasSubstr("step_overhead_ms: 0.5"));
}

}  // namespace
}  // namespace servelab
