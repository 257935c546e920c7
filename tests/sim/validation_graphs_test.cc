// CUDA graphs in a validation: the graph each step ran as on the engine (Backend::
// DecodeGraph: the CUDA runner's LastDecodeGraph) against the one the simulator's cost model
// priced it as (CostModel::ExpectedDecodeGraph), counted by hand and through ValidateLoad
// with a fake engine whose graphs follow the runner's rule under limits of its own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "driver/config_yaml.h"
#include "kernels/decode_graph_shape.h"
#include "sim/calibration.h"
#include "sim/cost_model.h"
#include "sim/model_file.h"
#include "sim/recorded_engine.h"
#include "sim/sim_backend.h"
#include "sim/validation.h"
#include "sim/validation_report.h"
#include "tests/sim/calibration_fixtures.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

StepComparison Step(int32_t seqs, std::optional<DecodeGraphRun> engine, std::optional<DecodeGraphRun> sim) {
  StepComparison s;
  s.tokens = s.seqs = seqs;
  s.decode_only = true;
  s.measured_s = s.predicted_s = 0.01;
  s.graph_measured = engine;
  s.graph_predicted = sim;
  return s;
}

TEST(GraphAgreementTest, CountedByHand) {
  const std::vector<StepComparison> steps = {
      Step(5, DecodeGraphRun{8, 512}, DecodeGraphRun{8, 512}),     // the same graph
      Step(10, DecodeGraphRun{12, 700}, DecodeGraphRun{16, 1024}),  // another
      Step(6, DecodeGraphRun{8, 512}, std::nullopt),               // priced op by op
      Step(3, std::nullopt, DecodeGraphRun{4, 512}),               // a graph the engine did not run
      Step(2, std::nullopt, std::nullopt),                         // op by op on both sides
  };
  std::vector<StepComparison> more = steps;
  // Left out: a step with static batching's padding (3 sequences and 5 padding: the runner
  // runs the graph of 4 rows, the simulator prices 8), and one whose engine does not say.
  more.insert(more.begin(), Step(8, DecodeGraphRun{4, 512}, DecodeGraphRun{8, 512}));
  more.front().padding = 5;
  more.insert(more.begin(), Step(4, std::nullopt, DecodeGraphRun{4, 512}));
  more.front().graphs_reported = false;
  const GraphAgreement a = GraphAgreementOf(more);
  EXPECT_EQ(a.engine_graphs, 3);
  EXPECT_EQ(a.same, 1);
  EXPECT_EQ(a.other_graph, 1);
  EXPECT_EQ(a.priced_eager, 1);
  EXPECT_EQ(a.sim_only, 1);
  EXPECT_EQ(a.priced_graphs, 3);
  EXPECT_EQ(a.padded, 1);
  EXPECT_EQ(a.unreported, 1);
  EXPECT_TRUE(a.Any());
  EXPECT_EQ(a.first_difference,
            "step 4 (10 sequences): the engine ran a graph of 12 rows for context 700, the simulator priced a "
            "graph of 16 rows for context 1024");
  EXPECT_EQ(GraphAgreementOf(steps).first_difference.substr(0, 7), "step 2 ");
  // A CPU engine and a model without graphs: nothing to say.
  const GraphAgreement none = GraphAgreementOf(std::vector<StepComparison>{Step(2, std::nullopt, std::nullopt)});
  EXPECT_FALSE(none.Any());
  EXPECT_TRUE(none.first_difference.empty());
}

// An engine whose steps take what `cost` predicts and whose pure-decode steps (every
// sequence emitting) run as the graph the runner's rule gives under its own limits.
class GraphEngine final : public Backend {
 public:
  GraphEngine(std::unique_ptr<CostModel> cost, int32_t max_seqs, int32_t max_model_len)
      : cost_(std::move(cost)), max_seqs_(max_seqs), max_model_len_(max_model_len) {}
  std::string_view Name() const override { return "engine-fake"; }
  KvCapacity Capacity() const override {
    KvCapacity c;
    c.num_gpu_blocks = 2000;
    c.block_size = 16;
    return c;
  }
  int32_t MaxModelLen() const override { return 1024; }
  StatusOr<StepResult> Execute(const StepPlan& plan) override {
    StepResult r;
    r.elapsed = cost_->StepTime(plan);
    return r;
  }
  std::optional<DecodeGraphRun> DecodeGraph(const StepPlan& plan) const override {
    int32_t longest = 1;
    for (const ScheduledRequest& seq : plan.seqs) {
      if (seq.num_new_tokens != 1 || !seq.emits_token) return std::nullopt;
      longest = std::max(longest, seq.num_computed_tokens + 1);
    }
    const auto seqs = static_cast<int32_t>(plan.seqs.size());
    return DecodeGraphRun{kernels::DecodeGraphBatch(seqs, max_seqs_),
                          kernels::DecodeGraphContextBucket(longest, max_model_len_)};
  }
  bool ReportsDecodeGraphs() const override { return true; }

 private:
  std::unique_ptr<CostModel> cost_;
  int32_t max_seqs_, max_model_len_;
};

class ValidationGraphsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("servelab_validation_graphs_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    CalibratedModel model = testing::FreeOpsModel("h200-141gb");
    model.ops[Op::kAttentionDecode] = testing::DecodeGridTruth();
    model.decode_graphs = true;
    std::ofstream(dir_ / "graphs.yaml") << CalibratedModelYaml(model, {});
  }
  void TearDown() override { fs::remove_all(dir_); }

  ExperimentConfig Config() const {
    auto c = ParseExperiment(
        "name: g\nseed: 5\nbackend: engine\nmodel: llama-3-8b\nhardware: {gpu: h200-141gb}\n"
        "scheduler: {max_num_seqs: 16, max_num_batched_tokens: 512, max_model_len: 1024}\n"
        "workload: {num_requests: 40, arrival: {process: poisson, rate: 20},\n"
        "  input_tokens: {dist: uniform, min: 100, max: 900},\n"
        "  output_tokens: {dist: uniform, min: 2, max: 60}}\n"
        "cost_model: {type: calibrated, path: graphs.yaml}\n",
        "exp.yaml", dir_.string());
    EXPECT_TRUE(c.ok()) << c.status().message();
    return *c;
  }

  BackendFactory Engine(const ExperimentConfig& config, int32_t max_model_len) const {
    return [config, max_model_len](int32_t) -> StatusOr<std::unique_ptr<Backend>> {
      auto cost = BuiltinCostModels().Make(config.cost_model, DeploymentOf(config));
      if (!cost.ok()) return cost.status();
      return std::unique_ptr<Backend>(std::make_unique<GraphEngine>(std::move(cost).value(), 16, max_model_len));
    };
  }

  fs::path dir_;
};

// The engine's graphs under the limits the simulator's deployment has: every one priced
// as the same graph. Under a context served of 600 (the simulator's: 1,024), the steps
// whose longest context is past 512 ran a bucket of 600 and were priced at 1,024.
TEST_F(ValidationGraphsTest, TheEnginesGraphsAgainstTheSimulators) {
  const ExperimentConfig config = Config();
  auto same = ValidateLoad(config, Engine(config, 1024), (dir_ / "same").string(), false);
  ASSERT_TRUE(same.ok()) << same.status().message();
  same->label = "same";
  const GraphAgreement a = GraphAgreementOf(same->steps);
  EXPECT_GT(a.engine_graphs, 20);
  EXPECT_EQ(a.same, a.engine_graphs);
  EXPECT_EQ(a.priced_graphs, a.engine_graphs);
  EXPECT_TRUE(a.first_difference.empty());

  auto capped = ValidateLoad(config, Engine(config, 600), (dir_ / "capped").string(), false);
  ASSERT_TRUE(capped.ok()) << capped.status().message();
  capped->label = "capped";
  const GraphAgreement b = GraphAgreementOf(capped->steps);
  EXPECT_EQ(b.engine_graphs, a.engine_graphs);  // the same schedule: the step times are the model's
  EXPECT_GT(b.other_graph, 0);
  EXPECT_EQ(b.same + b.other_graph, b.engine_graphs);
  EXPECT_EQ(b.priced_eager + b.sim_only, 0);
  EXPECT_THAT(b.first_difference, HasSubstr("for context 600, the simulator priced a graph of"));
  EXPECT_THAT(b.first_difference, HasSubstr("for context 1024"));

  // An engine that cannot say how it ran its steps (a recording without graph_measured):
  // left out, not counted as op by op against the simulator's graphs.
  std::vector<StepComparison> unsaid = capped->steps;
  for (StepComparison& s : unsaid) {
    s.graphs_reported = false;
    s.graph_measured.reset();
  }
  EXPECT_FALSE(GraphAgreementOf(unsaid).Any());

  const std::string md = ValidationMarkdown("g", {*same, *capped});
  EXPECT_THAT(md, HasSubstr("| load | engine's graphs | priced as the same graph | as another graph |"));
  EXPECT_THAT(md, HasSubstr("| same | " + std::to_string(a.engine_graphs) + " | " + std::to_string(a.same) +
                                " | 0 | 0 | 0 |\n"));
  EXPECT_THAT(md, HasSubstr("- capped: step "));
  const std::string csv = ValidationCsv({*same, *capped});
  const std::string n = std::to_string(a.engine_graphs);
  EXPECT_THAT(csv, HasSubstr("\nsame,decode_graphs,same_graph," + n + "," + n + ",\nsame,decode_graphs,other_graph," +
                             n + ",0,\nsame,decode_graphs,priced_op_by_op," + n + ",0,\nsame,decode_graphs,graph_not_run," +
                             n + ",0,\n"));
  EXPECT_THAT(csv, HasSubstr("\ncapped,decode_graphs,other_graph," + n + "," + std::to_string(b.other_graph) + ",\n"));
  // A CPU engine (no graphs) against a model with graphs: every step a graph it did not
  // run, and no error to compute.
  std::vector<StepComparison> cpu = same->steps;
  for (StepComparison& s : cpu) s.graph_measured.reset();
  LoadValidation on_cpu = *same;
  on_cpu.label = "cpu";
  on_cpu.steps = cpu;
  EXPECT_THAT(ValidationCsv({on_cpu}), HasSubstr("\ncpu,decode_graphs,graph_not_run,0," + n + ",\n"));
  // A recording that does not say: no table, a line saying what was not compared.
  LoadValidation unsaid_run = on_cpu;
  unsaid_run.label = "played";
  for (StepComparison& s : unsaid_run.steps) s.graphs_reported = false;
  const std::string unsaid_md = ValidationMarkdown("g", {unsaid_run});
  EXPECT_THAT(unsaid_md, Not(HasSubstr("| load | engine's graphs |")));
  EXPECT_THAT(unsaid_md, HasSubstr("The engine of played does not say how it ran its steps (a recording without "
                                   "graph_measured): " + n + " steps the simulator priced as CUDA graphs are not "
                                   "compared."));
}

// A recording made since validate writes graph_measured plays each step's graph back
// (RecordedStep::graph); one without the column does not say (graphs_recorded false,
// left out of the comparison); a malformed cell is an error naming line and column.
TEST_F(ValidationGraphsTest, ARecordingKeepsTheGraphEachStepRanAs) {
  const fs::path load = dir_ / "rec" / "rate-1";
  fs::create_directories(load / "engine");
  std::ofstream(load / "engine" / "summary.json")
      << "{\"backend\": \"engine\", \"kv_blocks_per_replica\": 100, \"max_model_len\": 2048, \"block_size\": 16}";
  const std::string header =
      "tokens,seqs,context_tokens,decode_only,measured_ms,predicted_ms,experts_measured,experts_predicted,"
      "graph_measured,graph_predicted\n";
  auto write = [&](const std::string& text) { std::ofstream(load / "steps_compared.csv") << text; };
  write(header + "16,16,4000,1,7.0,7.0,,,16x1024,16x1024\n1,1,100,1,5.0,5.0,,,1x512,\n300,1,0,0,20.0,20.0,,,,\n");
  auto recording = ReadEngineRecording(load.string());
  ASSERT_TRUE(recording.ok()) << recording.status().message();
  EXPECT_TRUE(recording->graphs_recorded);
  ASSERT_EQ(recording->steps.size(), 3u);
  EXPECT_EQ(recording->steps[0].graph, (DecodeGraphRun{16, 1024}));
  EXPECT_EQ(recording->steps[1].graph, (DecodeGraphRun{1, 512}));
  EXPECT_FALSE(recording->steps[2].graph.has_value());
  for (const std::string bad : {"16x", "x512", "16x0", "16*1024", "16x99999999999"}) {
    write(header + "16,16,4000,1,7.0,7.0,,," + bad + ",\n");
    auto broken = ReadEngineRecording(load.string());
    ASSERT_FALSE(broken.ok()) << bad;
    EXPECT_THAT(broken.status().message(),
                HasSubstr("steps_compared.csv:2: expected ROWSxCONTEXT_BUCKET (each a whole number in [1, "
                          "2147483647]) or nothing, got '" + bad + "', column 'graph_measured'"));
  }
  write("tokens,seqs,context_tokens,decode_only,measured_ms,predicted_ms\n16,16,4000,1,7.0,7.0\n");
  auto old = ReadEngineRecording(load.string());
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_FALSE(old->graphs_recorded);
  EXPECT_FALSE(old->steps[0].graph.has_value());
}

}  // namespace
}  // namespace servelab
