// Decode steps as servelab's CUDA runner replays them, as CUDA graphs: which graph a step
// takes (kernels/decode_graph_shape.h, by hand), the decode grid launched for a context
// bucket (sim/paged_decode_grid.h), the calibrated cost model pricing the graph's padded
// rows and bucket, the fit predicting its profile's decode steps the same way and
// recovering their overhead exactly, and MODEL.yaml and the cost model's parameter.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "core/uniform_step.h"
#include "driver/config_yaml.h"
#include "driver/gpu_catalog.h"
#include "driver/model_catalog.h"
#include "kernels/decode_graph_shape.h"
#include "sim/calibrated_cost_model.h"
#include "sim/calibration.h"
#include "sim/fit_evaluation.h"
#include "sim/model_file.h"
#include "sim/paged_decode_grid.h"
#include "sim/sim_backend.h"
#include "tests/sim/calibration_fixtures.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;

TEST(DecodeGraphsTest, TheGraphRuleByHand) {
  using kernels::DecodeGraphBatch;
  using kernels::DecodeGraphContextBucket;
  EXPECT_EQ(DecodeGraphBatch(1, 0), 1);
  EXPECT_EQ(DecodeGraphBatch(2, 0), 2);
  EXPECT_EQ(DecodeGraphBatch(3, 0), 4);
  EXPECT_EQ(DecodeGraphBatch(5, 0), 8);
  EXPECT_EQ(DecodeGraphBatch(8, 0), 8);
  EXPECT_EQ(DecodeGraphBatch(9, 0), 16);
  EXPECT_EQ(DecodeGraphBatch(121, 0), 128);
  EXPECT_EQ(DecodeGraphBatch(17, 20), 20);    // max_num_seqs 20 has a graph of its own
  EXPECT_EQ(DecodeGraphBatch(128, 128), 128);
  EXPECT_EQ(DecodeGraphBatch(INT32_MAX, 0), INT32_MAX);
  EXPECT_EQ(DecodeGraphContextBucket(16, 4096), 512);
  EXPECT_EQ(DecodeGraphContextBucket(512, 4096), 512);
  EXPECT_EQ(DecodeGraphContextBucket(513, 4096), 1024);
  EXPECT_EQ(DecodeGraphContextBucket(2049, 4096), 4096);
  EXPECT_EQ(DecodeGraphContextBucket(4096, 3000), 3000);  // the context served caps it
  EXPECT_EQ(DecodeGraphContextBucket(100, 256), 256);
  EXPECT_EQ(DecodeGraphContextBucket(4097, 0), 8192);
  EXPECT_EQ(DecodeGraphContextBucket(INT32_MAX, 0), INT32_MAX);
}

OpShape Llama3() {
  OpShape s;
  s.model = *FindModel("llama-3-8b");  // 8 KV heads
  return s;
}

// The launch's context sets the partitions (length and count); the blocks past each
// sequence's context exit, so the walk is still the sequences' own.
TEST(DecodeGraphsTest, TheGridLaunchedForABucketByHand) {
  const OpShape s = Llama3();
  auto grid = [&](int64_t seqs, int64_t attended, int64_t launch) {
    OpWork w;
    AddPagedDecodeGridWork(w, s, 132, 4, seqs, [&](int64_t) { return attended; }, launch);
    return w;
  };
  // Nine of 1,100: for 1,100, 512 gives 9 x 8 x 3 = 216 blocks (short of 264), 256 gives
  // 360: partitions of 256, 5, one wave of 528 slots, each walking 256.
  OpWork w = grid(9, 1100, 0);
  EXPECT_DOUBLE_EQ(w.cta_tokens, 256);
  EXPECT_DOUBLE_EQ(w.partitions, 5);
  // Launched for 2,048: 512 gives 9 x 8 x 4 = 288: partitions of 512; the blocks of the
  // sequences' 3 partitions walk 512, the fourth's exit; the reduce merges their 3.
  w = grid(9, 1100, 2048);
  EXPECT_DOUBLE_EQ(w.cta_tokens, 512);
  EXPECT_DOUBLE_EQ(w.reduce, 1);
  EXPECT_DOUBLE_EQ(w.partitions, 3);
  // One of 16 launched for 512: partitions of 128 (even 128 gives 32 blocks), 4 of them,
  // the first walking 16 tokens: the reduce runs, over its one; alone, no reduce.
  w = grid(1, 16, 512);
  EXPECT_DOUBLE_EQ(w.cta_tokens, 16);
  EXPECT_DOUBLE_EQ(w.reduce, 1);
  EXPECT_DOUBLE_EQ(w.partitions, 1);
  w = grid(1, 16, 0);
  EXPECT_DOUBLE_EQ(w.reduce, 0);
  EXPECT_DOUBLE_EQ(w.partitions, 0);
  // A launch context below the longest is the longest's.
  EXPECT_DOUBLE_EQ(grid(9, 1100, 64).partitions, 5);
}

// Every op free but decode attention (DecodeGridTruth's grid, fixed cost and rows; its
// bytes free), and qkv_proj's FLOPs when `gemm`.
CalibratedModel GraphModel(bool gemm) {
  CalibratedModel model = testing::FreeOpsModel("h200-141gb");
  OpFit decode = testing::DecodeGridTruth();
  decode.memory_efficiency = std::numeric_limits<double>::infinity();
  model.ops[Op::kAttentionDecode] = decode;
  if (gemm) model.ops[Op::kQkvProj].compute_efficiency = 0.5;
  model.decode_graphs = true;
  return model;
}

DeploymentSpec H200(int32_t max_num_seqs = 256) {
  DeploymentSpec d;
  d.model = *FindModel("llama-3-8b");
  d.gpu = *FindGpu("h200-141gb");
  d.max_num_seqs = max_num_seqs;
  d.max_model_len = 4096;
  return d;
}

double Ops(const CalibratedCostModel& cost, int32_t seqs, int32_t context) {
  const UniformStep step(UniformStepShape{seqs, 1, context, true});
  return cost.OpsSeconds(step.Plan());
}

TEST(DecodeGraphsTest, TheCostModelPricesADecodeStepAsItsGraphRunsIt) {
  const CalibratedModel model = GraphModel(false);
  const CalibratedCostModel graphs(model, "m.yaml", H200(), 0);
  const CalibratedCostModel eager(model, "m.yaml", H200(), 0, 0, {}, true, /*decode_graphs=*/false);
  EXPECT_THAT(graphs.Describe(), HasSubstr("decode steps as CUDA graphs"));
  EXPECT_THAT(eager.Describe(), ::testing::Not(HasSubstr("CUDA graphs")));
  // Five decodes at context 0 (each attending 1): eager, 40 blocks of partitions of 128,
  // one partition, no reduce: 7 + 0.08 x 1 + 5 x 0.03 us a layer. As the graph of 8 rows
  // launched for 512 tokens: 8 rows, 4 partitions of 128, so the reduce runs, over each
  // sequence's one: 7 + 0.08 + 8 x 0.03 + 4 + 0.1 us. 32 layers.
  EXPECT_NEAR(Ops(eager, 5, 0), 32 * (7 + 0.08 + 5 * 0.03) * 1e-6, 1e-12);
  EXPECT_NEAR(Ops(graphs, 5, 0), 32 * (7 + 0.08 + 8 * 0.03 + 4 + 0.1) * 1e-6, 1e-12);
  // Nine at 1,100 (attending 1,101): eager, partitions of 256 (512 gives 9 x 8 x 3 = 216
  // blocks, short of 264), 5 merged. The graph of 16 launched for 2,048: 512 gives
  // 16 x 8 x 4 = 512 blocks: partitions of 512, each block walking 256 tokens more, 3
  // merged, 7 rows more.
  EXPECT_NEAR(Ops(graphs, 9, 1100) - Ops(eager, 9, 1100), 32 * (0.08 * 256 - 2 * 0.1 + 7 * 0.03) * 1e-6,
              1e-12);
  // A step that is not a graph's: a sequence that does not emit (a prompt's chunk of one
  // token before its end) runs eagerly.
  Request mid;
  mid.prompt_len = 10;
  mid.target_output_len = 5;
  const UniformStep five(UniformStepShape{5, 1, 0, true});
  StepPlan mixed = five.Plan();
  mixed.seqs.push_back(ScheduledRequest{&mid, 1, 3, false, false});
  EXPECT_DOUBLE_EQ(graphs.OpsSeconds(mixed), eager.OpsSeconds(mixed));
  // And takes the step overhead, not the graphs' decode overhead; without the model's
  // graphs every decode-only step takes the decode overhead, as before.
  CalibratedModel with_overhead = model;
  with_overhead.has_decode_step_overhead = true;
  with_overhead.decode_step_overhead_us = -20;
  const CalibratedCostModel replayed(with_overhead, "m.yaml", H200(), /*step_overhead_ms=*/0.5);
  EXPECT_EQ(replayed.StepTime(five.Plan()), FromSeconds(replayed.OpsSeconds(five.Plan()) - 20e-6));
  EXPECT_EQ(replayed.StepTime(mixed), FromSeconds(replayed.OpsSeconds(mixed) + 0.5e-3));
  const CalibratedCostModel unreplayed(with_overhead, "m.yaml", H200(), 0.5, 0, {}, true, false);
  EXPECT_EQ(unreplayed.StepTime(mixed), FromSeconds(unreplayed.OpsSeconds(mixed) - 20e-6));
}

TEST(DecodeGraphsTest, EveryOpRunsTheGraphsPaddedRows) {
  const CalibratedModel model = GraphModel(true);
  const CalibratedCostModel graphs(model, "m.yaml", H200(), 0);
  const CalibratedCostModel eager(model, "m.yaml", H200(), 0, 0, {}, true, false);
  // At context 0 a padding row is a decode like the others: 5 cost what 8 cost.
  EXPECT_DOUBLE_EQ(Ops(graphs, 5, 0), Ops(graphs, 8, 0));
  EXPECT_LT(Ops(eager, 5, 0), Ops(eager, 8, 0));
  // Eight need no padding; the graph's launch for 512 tokens adds the reduce (4 us a
  // layer, and 0.1 for the one partition each merges).
  EXPECT_NEAR(Ops(graphs, 8, 0) - Ops(eager, 8, 0), 32 * 4.1e-6, 1e-12);
  // Up to max_num_seqs only: with 6, five run as six.
  const CalibratedCostModel six(model, "m.yaml", H200(6), 0);
  EXPECT_DOUBLE_EQ(Ops(six, 5, 0), Ops(six, 6, 0));
  EXPECT_LT(Ops(six, 5, 0), Ops(graphs, 5, 0));
}

// A decode step row of servelab's CUDA kernels, graph not recorded.
ProfileRow StepRow(int64_t batch, int64_t context) {
  ProfileRow r;
  r.device = "h200-141gb";
  r.shape = *FindModel("llama-3-8b");
  r.op = "step";
  r.tokens = r.batch = batch;
  r.context = context;
  return r;
}

// A profile's decode step rows (servelab's CUDA kernels): predicted as their graphs run
// them when the model says decode_graphs.
TEST(DecodeGraphsTest, TheFitPredictsDecodeStepRowsAsGraphs) {
  const GpuSpec gpu = *FindGpu("h200-141gb");
  CalibratedModel model = GraphModel(true);
  const auto row = StepRow;
  EXPECT_DOUBLE_EQ(PredictOps(model, gpu, row(5, 0)), PredictOps(model, gpu, row(8, 0)));
  // The cost model prices the same step the same way.
  const CalibratedCostModel cost(model, "m.yaml", H200(), 0);
  EXPECT_NEAR(PredictOps(model, gpu, row(5, 600)), Ops(cost, 5, 600), 1e-12);
  model.decode_graphs = false;
  EXPECT_LT(PredictOps(model, gpu, row(5, 0)), PredictOps(model, gpu, row(8, 0)));
  const CalibratedCostModel plain(model, "m.yaml", H200(), 0);
  EXPECT_NEAR(PredictOps(model, gpu, row(5, 600)), Ops(plain, 5, 600), 1e-12);
}

// Decode attention rows timed by DecodeGridTruth, and whole decode steps of those rows
// timed as their graphs run them plus `overhead_us`: the fit recovers the attention fit,
// says decode_graphs and finds the overhead exactly.
TEST(DecodeGraphsTest, TheFitRecoversTheGraphsOverheadExactly) {
  const GpuSpec gpu = *FindGpu("h200-141gb");
  CalibratedModel truth;
  truth.device = "h200-141gb";
  truth.ops[Op::kAttentionDecode] = testing::DecodeGridTruth();
  truth.decode_graphs = true;
  const double overhead_us = -300;
  ProfileTable table;
  table.path = "graphs.csv";
  for (ProfileRow r : testing::H200DecodeRows("attention_decode")) {
    r.median_ms = 1e3 * PredictRow(truth, gpu, Op::kAttentionDecode, r);
    table.rows.push_back(r);
    r.op = "step";
    r.median_ms = 1e3 * PredictOps(truth, gpu, r) + overhead_us * 1e-3;
    table.rows.push_back(r);
  }
  auto model = FitProfiles({table});
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_TRUE(model->decode_graphs);
  ASSERT_TRUE(model->has_decode_step_overhead);
  EXPECT_NEAR(model->decode_step_overhead_us, overhead_us, 1e-6);
  // Priced without the graphs' rows and bucket, the steps' residuals differ (3, 6 and 12
  // sequences pad, contexts below 512 launch for 512): no one overhead fits them all.
  CalibratedModel eager = *model;
  eager.decode_graphs = false;
  double lowest = 1e9, highest = -1e9;
  for (const ProfileRow& r : table.rows) {
    if (r.op != "step") continue;
    const double residual_us = r.median_ms * 1e3 - PredictOps(eager, gpu, r) * 1e6;
    lowest = std::min(lowest, residual_us);
    highest = std::max(highest, residual_us);
  }
  EXPECT_GT(highest - lowest, 1.0);
  // MODEL.yaml keeps it; the cost model reads it, and `decode_graphs: false` turns it off.
  const std::string yaml = CalibratedModelYaml(*model, {});
  EXPECT_THAT(yaml, HasSubstr("\ndecode_graphs: true\n"));
  auto back = testing::ReadModelText(yaml, "decode_graphs");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->decode_graphs);
  EXPECT_EQ(CalibratedModelYaml(*back, {}), yaml);
  // A value not a boolean, or graphs on a CPU model: the key named, with its line.
  EXPECT_THAT(testing::ReadModelText("device: h200-141gb\ndecode_graphs: maybe\nops: {}\n", "graphs_bad")
                  .status()
                  .message(),
              HasSubstr(":2: decode_graphs"));
  EXPECT_THAT(testing::ReadModelText("device: cpu\ndecode_graphs: true\nops: {}\n", "graphs_cpu").status().message(),
              HasSubstr(":2: decode_graphs: true on a cpu model"));
}

// A profile that records how its runner ran each decode step (here max_num_seqs 12 and a
// context served of 700: 10 sequences at context 600 run the graph of 12 rows launched for
// 700): the fit prices each step as its recorded graph, as the cost model does under those
// limits; the same row unrecorded is priced as the uncapped graph (16 rows, 1,024).
TEST(DecodeGraphsTest, TheFitPricesTheGraphEachRowRecords) {
  const GpuSpec gpu = *FindGpu("h200-141gb");
  const CalibratedModel model = GraphModel(true);
  DeploymentSpec capped = H200(12);
  capped.max_model_len = 700;
  DeploymentSpec uncapped = H200(256);
  uncapped.max_model_len = 8192;
  const CalibratedCostModel capped_cost(model, "m.yaml", capped, 0);
  const CalibratedCostModel uncapped_cost(model, "m.yaml", uncapped, 0);
  ProfileRow recorded = StepRow(10, 600);
  recorded.graph_rows = 12;
  recorded.graph_context = 700;
  const ProfileRow unrecorded = StepRow(10, 600);
  ASSERT_TRUE(StepGraphOf(model, gpu, recorded).has_value());
  EXPECT_EQ(StepGraphOf(model, gpu, unrecorded)->rows, 16);
  EXPECT_EQ(StepGraphOf(model, gpu, unrecorded)->context_bucket, 1024);
  EXPECT_NEAR(PredictOps(model, gpu, recorded), Ops(capped_cost, 10, 600), 1e-12);
  EXPECT_NEAR(PredictOps(model, gpu, unrecorded), Ops(uncapped_cost, 10, 600), 1e-12);
  EXPECT_GT(PredictOps(model, gpu, unrecorded), PredictOps(model, gpu, recorded));
  // Recorded as run op by op: the step's own rows, as a model without graphs prices it.
  ProfileRow eager = recorded;
  eager.graph_rows = eager.graph_context = 0;
  EXPECT_FALSE(StepGraphOf(model, gpu, eager).has_value());
  CalibratedModel plain = model;
  plain.decode_graphs = false;
  EXPECT_DOUBLE_EQ(PredictOps(model, gpu, eager), PredictOps(plain, gpu, unrecorded));
}

// Whole decode steps timed as graphs capped by the runner's limits, recorded on their
// rows: the fit recovers their overhead exactly. A CUDA profile whose steps all ran op by
// op (engine.cuda_graphs: false) fits no decode graphs and recovers its step overhead
// instead; unrecorded, the same rows would be taken for graphs.
TEST(DecodeGraphsTest, TheFitRecoversOverheadsFromRecordedGraphs) {
  const GpuSpec gpu = *FindGpu("h200-141gb");
  CalibratedModel truth;
  truth.device = "h200-141gb";
  truth.ops[Op::kAttentionDecode] = testing::DecodeGridTruth();
  truth.decode_graphs = true;
  auto profile = [&](bool graphs, double overhead_us) {
    ProfileTable table;
    table.path = graphs ? "capped.csv" : "eager.csv";
    for (ProfileRow r : testing::H200DecodeRows("attention_decode")) {
      r.median_ms = 1e3 * PredictRow(truth, gpu, Op::kAttentionDecode, r);
      table.rows.push_back(r);
    }
    for (int64_t batch : {1, 3, 5, 9, 10, 12}) {
      for (int64_t context : {15, 300, 600, 699}) {
        ProfileRow r = StepRow(batch, context);
        r.graph_rows = graphs ? kernels::DecodeGraphBatch(static_cast<int32_t>(batch), 12) : 0;
        r.graph_context = graphs ? kernels::DecodeGraphContextBucket(static_cast<int32_t>(context + 1), 700) : 0;
        r.median_ms = 1e3 * PredictOps(truth, gpu, r) + overhead_us * 1e-3;
        table.rows.push_back(r);
      }
    }
    return table;
  };
  const ProfileTable capped = profile(true, -300);
  auto graphs = FitProfiles({capped});
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  EXPECT_TRUE(graphs->decode_graphs);
  ASSERT_TRUE(graphs->has_decode_step_overhead);
  EXPECT_NEAR(graphs->decode_step_overhead_us, -300, 1e-6);
  // The same medians with the rows' graphs forgotten: priced as the uncapped graphs, the
  // residuals part (12 rows taken for 16, 700 for 1,024), and the overhead is missed.
  ProfileTable forgotten = capped;
  for (ProfileRow& r : forgotten.rows) r.graph_rows = r.graph_context = ProfileRow::kNotRecorded;
  auto assumed = FitProfiles({forgotten});
  ASSERT_TRUE(assumed.ok()) << assumed.status().message();
  EXPECT_TRUE(assumed->decode_graphs);
  EXPECT_GT(std::abs(assumed->decode_step_overhead_us + 300), 0.1);

  // An older profile that does not record its graphs, fitted with one whose decode steps
  // ran op by op: the older one's decode steps are still taken as graphs, the other's not.
  const ProfileTable eager_table = profile(false, 40);
  auto both = FitProfiles({forgotten, eager_table});
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_TRUE(both->decode_graphs);
  EXPECT_TRUE(StepGraphOf(*both, gpu, forgotten.rows.back()).has_value());
  EXPECT_FALSE(StepGraphOf(*both, gpu, eager_table.rows.back()).has_value());

  auto eager = FitProfiles({eager_table});
  ASSERT_TRUE(eager.ok()) << eager.status().message();
  EXPECT_FALSE(eager->decode_graphs);
  EXPECT_FALSE(eager->has_decode_step_overhead);
  ASSERT_TRUE(eager->has_step_overhead);
  EXPECT_NEAR(eager->step_overhead_us, 40, 1e-6);
  EXPECT_THAT(CalibratedModelYaml(*eager, {}), ::testing::Not(HasSubstr("\ndecode_graphs: true")));
}

// Through an experiment: the key is read (and recorded) when the model has graphs; asked
// of a model without them, an error naming the experiment's place.
TEST(DecodeGraphsTest, TheExperimentsKeyTurnsThemOff) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("servelab_graphs_key_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  CalibratedModel model = GraphModel(true);
  model.has_decode_step_overhead = true;
  model.decode_step_overhead_us = -50;
  std::ofstream(dir / "graphs.yaml") << CalibratedModelYaml(model, {});
  model.decode_graphs = false;
  std::ofstream(dir / "eager.yaml") << CalibratedModelYaml(model, {});
  auto run = [&](const std::string& cost_model) -> StatusOr<std::string> {
    auto c = ParseExperiment("name: t\nmodel: llama-3-8b\nhardware: {gpu: h200-141gb}\n"
                             "workload: {num_requests: 60, arrival: {process: poisson, rate: 20},\n"
                             "  input_tokens: {dist: uniform, min: 10, max: 900},\n"
                             "  output_tokens: {dist: uniform, min: 1, max: 300}}\n"
                             "cost_model: " + cost_model + "\n",
                             "exp.yaml", dir.string());
    if (!c.ok()) return c.status();
    std::ostringstream steps;
    MetricsSinks sinks;
    sinks.steps_csv = &steps;
    auto result = RunSimulation(*c, sinks);
    if (!result.ok()) return result.status();
    return steps.str();
  };
  auto on = run("{type: calibrated, path: graphs.yaml}");
  auto off = run("{type: calibrated, path: graphs.yaml, decode_graphs: false}");
  auto eager = run("{type: calibrated, path: eager.yaml}");
  ASSERT_TRUE(on.ok()) << on.status().message();
  ASSERT_TRUE(off.ok()) << off.status().message();
  ASSERT_TRUE(eager.ok()) << eager.status().message();
  EXPECT_NE(*on, *off);
  EXPECT_EQ(*off, *eager);
  auto asked = run("{type: calibrated, path: eager.yaml, decode_graphs: true}");
  ASSERT_FALSE(asked.ok());
  EXPECT_THAT(asked.status().message(), HasSubstr("exp.yaml"));
  EXPECT_THAT(asked.status().message(), HasSubstr("cost_model.decode_graphs"));
  EXPECT_THAT(asked.status().message(), HasSubstr("was not fitted on decode steps run as CUDA graphs"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace servelab
