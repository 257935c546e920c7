// Validation: the engine's steps costed by the simulator, and the two runs compared. A
// fake engine whose step time is a known function of the plan stands in for the real
// one: equal to the simulator's cost model, every error is exactly zero; a fixed
// multiple of it, the step error is exactly that multiple's.
#include "sim/validation.h"
#include "sim/validation_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>

#include "driver/config_yaml.h"
#include "sim/cost_model.h"
#include "sim/expert_routing.h"
#include "sim/sim_backend.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

// An "engine" whose steps take `factor` x what the roofline predicts for its plan, with
// a KV pool of its own (not the memory formula's).
class FakeEngine final : public Backend {
 public:
  FakeEngine(std::unique_ptr<CostModel> cost, double factor, int64_t blocks = 300)
      : cost_(std::move(cost)), factor_(factor), blocks_(blocks) {}
  std::string_view Name() const override { return "engine-fake"; }
  KvCapacity Capacity() const override {
    KvCapacity c;
    c.num_gpu_blocks = blocks_;
    c.block_size = 16;
    return c;
  }
  int32_t MaxModelLen() const override { return 1024; }
  StatusOr<StepResult> Execute(const StepPlan& plan) override {
    StepResult r;
    r.elapsed = static_cast<TimeNs>(
        std::llround(factor_ * static_cast<double>(cost_->StepTime(plan))));
    ++steps_;
    if (stopped_at_ != nullptr) {
      // Samples a stop token for the first request to emit its second token of at least
      // four, and says at which step.
      for (const ScheduledRequest& seq : plan.seqs) {
        if (!seq.emits_token) continue;
        const Request& q = *seq.request;
        const bool stop = *stopped_at_ == 0 && q.num_generated == 1 && q.target_output_len >= 4;
        if (stop) *stopped_at_ = steps_;
        r.stopped.push_back(stop ? 1 : 0);
      }
    }
    return r;
  }
  // From now on the engine samples one stop token, and `*step` is set to its (1-based) step.
  void StopOnce(std::shared_ptr<int64_t> step) { stopped_at_ = std::move(step); }
  // A mixture of experts: from now on the engine counts `factor` x the experts (and one-row
  // experts) the cost model expects of each step, or, given `routing`, what it expects.
  void CountRouting(double factor, std::optional<ExpertRouting> routing = std::nullopt) {
    routing_factor_ = factor;
    routing_ = std::move(routing);
  }
  std::optional<ExpertsRun> Routing(const StepPlan& plan) const override {
    std::optional<ExpertsRun> r = routing_ ? routing_->Expected(plan) : cost_->ExpectedRouting(plan);
    if (!r || routing_factor_ == 0) return std::nullopt;
    return ExpertsRun{r->run * routing_factor_, r->single_row * routing_factor_};
  }

 private:
  std::unique_ptr<CostModel> cost_;
  double factor_;
  int64_t blocks_;
  int64_t steps_ = 0;
  std::shared_ptr<int64_t> stopped_at_;
  double routing_factor_ = 0;
  std::optional<ExpertRouting> routing_;
};

class ValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("servelab_validation_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static ExperimentConfig Config() {
    auto c = ParseExperiment(
        "name: v\nseed: 3\nbackend: engine\nmodel: llama-3-8b\nhardware: {gpu: a100-80gb}\n"
        "scheduler: {max_num_seqs: 16, max_num_batched_tokens: 512}\n"
        "workload: {num_requests: 60, arrival: {process: poisson, rate: 12},\n"
        "  input_tokens: {dist: uniform, min: 20, max: 400},\n"
        "  output_tokens: {dist: uniform, min: 2, max: 80}}\n",
        "exp.yaml", "/");
    EXPECT_TRUE(c.ok()) << c.status().message();
    return *c;
  }

  // FakeEngines `factor` x the experiment's cost model, each set up by `setup` when given.
  static BackendFactory Engine(const ExperimentConfig& config, double factor,
                               std::function<void(FakeEngine&)> setup = {}, int64_t blocks = 300) {
    return [config, factor, setup, blocks](int32_t) -> StatusOr<std::unique_ptr<Backend>> {
      auto cost = BuiltinCostModels().Make(config.cost_model, DeploymentOf(config));
      if (!cost.ok()) return cost.status();
      auto fake = std::make_unique<FakeEngine>(std::move(cost).value(), factor, blocks);
      if (setup) setup(*fake);
      return std::unique_ptr<Backend>(std::move(fake));
    };
  }

  fs::path dir_;
};

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_F(ValidationTest, AnEngineThatIsTheCostModelHasNoError) {
  const ExperimentConfig config = Config();
  auto v = ValidateLoad(config, Engine(config, 1.0), dir_.string(), false);
  ASSERT_TRUE(v.ok()) << v.status().message();
  ASSERT_GT(v->steps.size(), 50u);
  EXPECT_EQ(v->step_error.points, static_cast<int64_t>(v->steps.size()));
  EXPECT_EQ(v->step_error.mape, 0.0);
  EXPECT_EQ(v->step_error.max_error, 0.0);
  EXPECT_GT(v->decode_step_error.points, 0);
  EXPECT_GT(v->mixed_step_error.points, 0);
  ASSERT_EQ(v->metrics.size(), 18u);  // 4 latencies x 4 statistics + 2 throughputs
  for (const MetricComparison& m : v->metrics) {
    EXPECT_EQ(m.error_pct, 0.0) << m.metric << " " << m.statistic;
    EXPECT_GT(m.engine, 0.0) << m.metric << " " << m.statistic;
  }
  // The same requests, scheduled over the same pool, to the nanosecond.
  EXPECT_EQ(Read(dir_ / "engine" / "requests.csv"), Read(dir_ / "sim" / "requests.csv"));
  // The simulated twin has the engine's pool, not the A100 memory formula's.
  EXPECT_EQ(v->sim.kv_blocks_per_replica, 300);
  EXPECT_EQ(v->engine.kv_blocks_per_replica, 300);
}

TEST_F(ValidationTest, AnEngineAQuarterSlowerIsATwentyPercentStepError) {
  const ExperimentConfig config = Config();
  auto v = ValidateLoad(config, Engine(config, 1.25), dir_.string(), false);
  ASSERT_TRUE(v.ok()) << v.status().message();
  // predicted / measured - 1 = 1 / 1.25 - 1 = -20% on every step (to the rounding of a
  // step to whole nanoseconds).
  EXPECT_NEAR(v->step_error.mape, 20.0, 1e-4);
  EXPECT_NEAR(v->step_error.bias, -20.0, 1e-4);
  EXPECT_NEAR(v->step_error.max_error, 20.0, 1e-4);
  // End to end the simulated run is faster (its TPOT by exactly that much only when no
  // queueing reshapes the batches; the sign is certain).
  EXPECT_LT(v->ErrorPct("tpot", "p50"), 0.0);
  EXPECT_LT(v->ErrorPct("e2e", "mean"), 0.0);
  EXPECT_TRUE(std::isnan(v->ErrorPct("e2e", "p42")));
}

// The simulated run replayed on the engine's step times: an engine a quarter slower than
// the cost model (so the simulated run itself is off), yet the replay's schedule is the
// engine's step for step and its figures and requests the engine's to the nanosecond.
TEST_F(ValidationTest, TheReplayOnTheEnginesStepTimesIsTheEngineToTheNanosecond) {
  const ExperimentConfig config = Config();
  auto v = ValidateLoad(config, Engine(config, 1.25), dir_.string(), false);
  ASSERT_TRUE(v.ok()) << v.status().message();
  v->label = "r";
  EXPECT_LT(v->ErrorPct("e2e", "mean"), -1.0);
  ASSERT_TRUE(v->replay.has_value());
  const StepReplay& r = *v->replay;
  EXPECT_TRUE(r.Identical()) << r.Account();
  EXPECT_EQ(r.steps, static_cast<int64_t>(v->steps.size()));  // no swap-only steps here
  // What each step had cached: nothing before the first request's first chunk; a decode's
  // sequences at least their prompts (20 to 400 tokens) and less than prompt and output.
  ASSERT_FALSE(v->steps.empty());
  EXPECT_EQ(v->steps[0].context_tokens, 0);
  int decodes = 0;
  for (const StepComparison& s : v->steps) {
    if (!s.decode_only) continue;
    ++decodes;
    EXPECT_GE(s.context_tokens, 20 * s.seqs);
    EXPECT_LT(s.context_tokens, (400 + 80) * s.seqs);
  }
  EXPECT_GT(decodes, 100);
  EXPECT_EQ(r.replayed, r.steps);
  EXPECT_EQ(r.matched, r.steps);
  EXPECT_EQ(r.shifted, 0);
  ASSERT_EQ(r.metrics.size(), 18u);
  for (const MetricComparison& m : r.metrics) {
    EXPECT_EQ(m.error_pct, 0.0) << m.metric << " " << m.statistic;
    EXPECT_EQ(m.sim, m.engine) << m.metric << " " << m.statistic;
  }
  EXPECT_EQ(Read(dir_ / "replay" / "requests.csv"), Read(dir_ / "engine" / "requests.csv"));
  EXPECT_NE(Read(dir_ / "sim" / "requests.csv"), Read(dir_ / "engine" / "requests.csv"));
  const std::string n = std::to_string(r.steps);
  const std::string csv = ValidationCsv({*v});
  EXPECT_THAT(csv, HasSubstr("\nr/replay,schedule,steps," + n + "," + n + ",0\n"));
  EXPECT_THAT(csv, HasSubstr("\nr/replay,schedule,matched," + n + "," + n + ",0\n"));
  EXPECT_THAT(csv, HasSubstr("\nr/replay,schedule,shifted," + n + ",0,0\n"));
  EXPECT_THAT(csv, HasSubstr("\nr/replay,e2e,p99,"));
  EXPECT_THAT(ValidationMarkdown("v", {*v}), HasSubstr("| r | " + n + " | " + n + " | " + n + " | +0.00 | one |\n"));
}

// A stop token parts the schedules: the engine finishes the request there, the
// simulator (which samples none) runs it on, so the engine's next step is not the
// replay's; from then on the replay runs on the simulator's own times.
TEST_F(ValidationTest, AStopTokenPartsTheReplayAtTheNextStep) {
  const ExperimentConfig config = Config();
  auto stopped_at = std::make_shared<int64_t>(0);
  auto v = ValidateLoad(config, Engine(config, 1.0, [stopped_at](FakeEngine& e) { e.StopOnce(stopped_at); }),
                        dir_.string(), false);
  ASSERT_TRUE(v.ok()) << v.status().message();
  ASSERT_GT(*stopped_at, 0);
  ASSERT_TRUE(v->replay.has_value());
  const StepReplay& r = *v->replay;
  EXPECT_FALSE(r.Identical());
  EXPECT_THAT(r.parted, HasSubstr("replica 0, step " + std::to_string(*stopped_at + 1) + ": the replay ran "));
  EXPECT_EQ(r.matched, *stopped_at);
  EXPECT_EQ(r.shifted, 0);
  // The replay generated the tokens the engine's stop cut off.
  EXPECT_GT(r.summary.output_tokens, v->engine.output_tokens);
  EXPECT_EQ(r.summary.output_tokens, v->sim.output_tokens);
  EXPECT_THAT(r.Account(), HasSubstr("parted: replica 0, step "));
}

// A mixture of experts whose engine counts its routing: each step's experts run, counted
// and as the simulator's routing model expects them, by kind of step. An engine that runs
// a quarter more experts than expected is -20% on every row; one decoding a single
// sequence runs exactly its 2 experts, each on its one row, and the model expects that.
TEST_F(ValidationTest, AMixtureOfExpertsRoutingIsComparedByKindOfStep) {
  auto moe = ParseExperiment(
      "name: v\nseed: 3\nbackend: engine\nmodel: mixtral-8x7b\nhardware: {gpu: h100-80gb, tensor_parallel: 2}\n"
      "scheduler: {max_num_seqs: 16, max_num_batched_tokens: 512}\n"
      "workload: {num_requests: 60, arrival: {process: poisson, rate: 12},\n"
      "  input_tokens: {dist: uniform, min: 20, max: 400},\n"
      "  output_tokens: {dist: uniform, min: 2, max: 80}}\n",
      "exp.yaml", "/");
  ASSERT_TRUE(moe.ok()) << moe.status().message();
  const ExperimentConfig config = *moe;
  auto v = ValidateLoad(config, Engine(config, 1.0, [](FakeEngine& e) { e.CountRouting(1.25); }, 3000),
                        dir_.string(), false);
  ASSERT_TRUE(v.ok()) << v.status().message();
  v->label = "r";
  int64_t single = 0;
  for (const StepComparison& s : v->steps) {
    ASSERT_TRUE(s.experts_measured && s.experts_predicted);
    EXPECT_NEAR(s.experts_measured->run, 1.25 * s.experts_predicted->run, 1e-12);
    if (s.decode_only && s.seqs == 1) {
      ++single;
      EXPECT_DOUBLE_EQ(s.experts_predicted->run, 2.0);  // 8 (1 - (1 - 2/8)^1)
      EXPECT_DOUBLE_EQ(s.experts_predicted->single_row, 2.0);
    }
  }
  EXPECT_GT(single, 0);
  const std::string csv = ValidationCsv({*v});
  EXPECT_THAT(csv, HasSubstr("\nr,routing_experts,decode_1,2.5,2,-20\n"));
  EXPECT_THAT(csv, HasSubstr("\nr,routing_single_row,decode_1,2.5,2,-20\n"));
  EXPECT_THAT(csv, MatchesRegex("(.|\n)*\nr,routing_experts,decode_9-16,[^,\n]+,[^,\n]+,-20\n(.|\n)*"));
  EXPECT_THAT(csv, MatchesRegex("(.|\n)*\nr,routing_experts,mixed,[^,\n]+,[^,\n]+,-20\n(.|\n)*"));
  const std::string md = ValidationMarkdown("v", {*v});
  EXPECT_THAT(md, HasSubstr("| load | steps | count | experts run | expected | error % |"));
  EXPECT_THAT(md, HasSubstr(" | 2.50 | 2.00 | -20.0 | 2.50 | 2.00 | -20.0 |\n"));
  // Decode batches routed as uniform routing expects (the roofline's) fit a skew of 0, on
  // both sides.
  EXPECT_THAT(csv, HasSubstr("\nr,routing_skew,decode,0,0,0\n"));
  EXPECT_THAT(md, HasSubstr("| load | decode steps | skew, engine | skew, simulator | lone chunks | "
                            "locality, favourites: engine | locality, favourites: simulator |"));
  // Its lone prefill chunks route as the roofline's (locality 0) on both sides too.
  EXPECT_THAT(csv, HasSubstr("\nr,routing_locality,chunk,0,0,0\nr,routing_favourites,chunk,1,1,0\n"));
  // The validation of an engine whose router routes as `options` say, labelled `label`.
  auto routed_as = [&](const std::string& label, const ExpertRoutingOptions& options) {
    const ExpertRouting routing(8, 2, 1, options);
    auto v = ValidateLoad(config, Engine(config, 1.0, [routing](FakeEngine& e) { e.CountRouting(1.0, routing); }, 3000),
                          (dir_ / label).string(), false);
    EXPECT_TRUE(v.ok()) << v.status().message();
    if (v.ok()) v->label = label;
    return v;
  };
  // An engine whose router favours some experts (a Zipf exponent of 0.8): the skew that
  // fits its decode batches is 0.8, the simulator's still 0.
  ExpertRoutingOptions skewed;
  skewed.routing_skew = 0.8;
  auto s = routed_as("skewed", skewed);
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(ValidationCsv({*s}), HasSubstr("\nskewed,routing_skew,decode,0.8,0,-0.8\n"));
  // One whose chunks' tokens also route together (a locality of 0.6 over one favourite):
  // at the skew it fits, the locality its lone chunks fit is 0.6, the simulator's 0.
  ExpertRoutingOptions local = skewed;
  local.routing_locality = 0.6;
  auto l = routed_as("local", local);
  ASSERT_TRUE(l.ok());
  EXPECT_THAT(ValidationCsv({*l}), HasSubstr("\nlocal,routing_skew,decode,0.8,0,-0.8\n"));
  EXPECT_THAT(ValidationCsv({*l}), HasSubstr("\nlocal,routing_locality,chunk,0.6,0,-0.6\n"));
  EXPECT_THAT(ValidationCsv({*l}), HasSubstr("\nlocal,routing_favourites,chunk,1,1,0\n"));
  EXPECT_THAT(ValidationMarkdown("v", {*l}),
              MatchesRegex("(.|\n)*\n\\| local \\| [0-9]+ \\| 0\\.80 \\| 0\\.00 \\| [1-9][0-9]* \\| "
                           "0\\.600, 1\\.0 \\| 0\\.000, 1\\.0 \\|\n(.|\n)*"));
  // A dense model has no routing: no rows, no table.
  auto dense = ValidateLoad(Config(), Engine(Config(), 1.0), (dir_ / "dense").string(), false);
  ASSERT_TRUE(dense.ok());
  for (const StepComparison& s : dense->steps) EXPECT_FALSE(s.experts_predicted.has_value());
  EXPECT_THAT(ValidationCsv({*dense}), Not(HasSubstr("routing_")));
  EXPECT_THAT(ValidationMarkdown("v", {*dense}), Not(HasSubstr("experts run")));
}

TEST(CompareRunsTest, RelativeErrorsOfEachStatistic) {
  RunSummary engine, sim;
  engine.ttft_s.p50 = 2.0;
  sim.ttft_s.p50 = 2.5;
  engine.e2e_s.p99 = 4.0;
  sim.e2e_s.p99 = 3.0;
  engine.output_throughput = 100;
  sim.output_throughput = 110;
  const std::vector<MetricComparison> m = CompareRuns(engine, sim);
  auto find = [&](const std::string& metric, const std::string& statistic) {
    for (const MetricComparison& c : m) {
      if (c.metric == metric && c.statistic == statistic) return c.error_pct;
    }
    return -1e9;
  };
  EXPECT_DOUBLE_EQ(find("ttft", "p50"), 25.0);
  EXPECT_DOUBLE_EQ(find("e2e", "p99"), -25.0);
  EXPECT_NEAR(find("output_throughput", "value"), 10.0, 1e-12);
  EXPECT_EQ(find("tpot", "mean"), 0.0);  // both 0
  engine.ttft_s.p50 = 0;  // only the engine's 0: no finite relative error
  int found = 0;
  for (const MetricComparison& c : CompareRuns(engine, sim)) {
    if (c.metric != "ttft" || c.statistic != "p50") continue;
    EXPECT_EQ(c.error_pct, std::numeric_limits<double>::infinity());
    ++found;
  }
  EXPECT_EQ(found, 1);
}

// validation.csv's engine and sim columns on step rows: the mean measured and predicted
// time of the steps each row is about (decode-only, mixed, all), by hand; a step with no
// measured time is in none of them, as it is in no error.
TEST(ValidationCsvTest, StepRowsCarryTheirOwnStepsMeans) {
  LoadValidation v;
  v.label = "rate-1";
  v.steps = {StepComparison{1, 1, true, 0.002, 0.001, {}, {}}, StepComparison{2, 2, true, 0.004, 0.003, {}, {}},
             StepComparison{64, 2, false, 0.010, 0.012, {}, {}}, StepComparison{1, 1, true, 0.0, 0.005, {}, {}}};
  v.step_error.points = 3;
  v.decode_step_error.points = 2;
  v.mixed_step_error.points = 1;
  const std::string csv = ValidationCsv({v});
  // all: (2 + 4 + 10) / 3 ms measured, (1 + 3 + 12) / 3 predicted.
  EXPECT_THAT(csv, HasSubstr("\nrate-1,step_time_all,mape,0.00533333,0.00533333,0\n"));
  EXPECT_THAT(csv, HasSubstr("\nrate-1,step_time_decode,mape,0.003,0.002,0\n"));
  EXPECT_THAT(csv, HasSubstr("\nrate-1,step_time_mixed,bias,0.01,0.012,0\n"));
  // The summed time's error: all (16 - 16) / 16; decode-only (4 - 6) / 6; mixed (12 - 10) / 10.
  EXPECT_THAT(csv, HasSubstr("\nrate-1,step_time_all,time,0.00533333,0.00533333,0\n"));
  EXPECT_THAT(csv, HasSubstr("\nrate-1,step_time_decode,time,0.003,0.002,-33.3333\n"));
  EXPECT_THAT(csv, HasSubstr("\nrate-1,step_time_mixed,time,0.01,0.012,20\n"));
  // In the markdown, the row's seventh column.
  EXPECT_THAT(ValidationMarkdown("v", {v}), HasSubstr("| rate-1 | 0% | 3 | 0.00 | +0.00 | 0.0 | +0.00 | 0.00 | 0.00 |\n"));
}

// The step-time error by kind of step, by hand: decode-only steps by their batch's range
// (1, 2, 3-4, 5-8, 9-16, ...), then the steps with a prefill chunk; a step with no
// measured time in none; in validation.csv the decode ranges (mixed is step_time_mixed),
// in validation.md a column a run.
TEST(ValidationCsvTest, StepErrorsByKindOfStep) {
  LoadValidation v;
  v.label = "rate-1";
  auto step = [](int32_t seqs, bool decode, double measured_ms, double predicted_ms) {
    StepComparison s;
    s.seqs = seqs;
    s.tokens = decode ? seqs : 64;
    s.decode_only = decode;
    s.measured_s = measured_ms * 1e-3;
    s.predicted_s = predicted_ms * 1e-3;
    return s;
  };
  v.steps = {step(1, true, 2, 3),    step(9, true, 10, 9),    step(2, false, 20, 19),
             step(1, true, 4, 3),    step(3, true, 10, 11),   step(2, true, 5, 4),
             step(16, true, 8, 10),  step(1, true, 0, 5)};
  const std::vector<StepRangeError> ranges = StepErrorsByRange(v.steps);
  ASSERT_EQ(ranges.size(), 5u);
  const char* names[] = {"decode_1", "decode_2", "decode_3-4", "decode_9-16", "mixed"};
  for (size_t i = 0; i < ranges.size(); ++i) EXPECT_EQ(ranges[i].steps, names[i]);
  // decode_1: +50% and -25%; the unmeasured one left out.
  EXPECT_EQ(ranges[0].error.points, 2);
  EXPECT_DOUBLE_EQ(ranges[0].error.mape, 37.5);
  EXPECT_DOUBLE_EQ(ranges[0].error.bias, 12.5);
  EXPECT_DOUBLE_EQ(ranges[0].measured_s, 3e-3);
  EXPECT_DOUBLE_EQ(ranges[0].predicted_s, 3e-3);
  EXPECT_DOUBLE_EQ(ranges[1].error.bias, -20.0);
  EXPECT_NEAR(ranges[2].error.bias, 10.0, 1e-9);
  // decode_9-16: -10% and +25%.
  EXPECT_DOUBLE_EQ(ranges[3].error.mape, 17.5);
  EXPECT_DOUBLE_EQ(ranges[3].error.bias, 7.5);
  EXPECT_EQ(ranges[4].top, 0);
  EXPECT_NEAR(ranges[4].error.bias, -5.0, 1e-9);
  const std::string csv = ValidationCsv({v});
  EXPECT_THAT(csv, HasSubstr("\nrate-1,step_time_decode_1,mape,0.003,0.003,37.5\n"));
  EXPECT_THAT(csv, HasSubstr("\nrate-1,step_time_decode_9-16,bias,0.009,0.0095,7.5\n"));
  EXPECT_THAT(csv, Not(HasSubstr("step_time_mixed,mape,0.02")));  // mixed: its own rows, from step_error
  const std::string md = ValidationMarkdown("v", {v});
  EXPECT_THAT(md, HasSubstr("| steps | rate-1 |\n|---|---|\n| decode_1 | 37.5 / +12.5 (2) |\n"
                            "| decode_2 | 20.0 / -20.0 (1) |\n| decode_3-4 | 10.0 / +10.0 (1) |\n"
                            "| decode_9-16 | 17.5 / +7.5 (2) |\n| mixed | 5.0 / -5.0 (1) |\n"));
}

// A load's label, however long, keeps its markdown rows whole.
TEST(ValidationMarkdownTest, LongLabelsKeepTheirRows) {
  LoadValidation v;
  v.label = std::string(300, 'r');  // past any fixed row buffer
  v.decode_wander.windows = 2;
  v.decode_wander.window_min_pct = -123456.7;
  v.host.steps.push_back(ReferenceStep{true, 16, 255, 0.001, 0.002, 0.0015});
  v.attempts = 3;
  const std::string md = ValidationMarkdown("v", {v});
  for (const std::string& tail : {std::string(" | 0.00 |\n"), std::string(" | -123456.7 | +0.0 |\n"),
                                  std::string(" | +50.00 | -25.00 |\n")}) {
    EXPECT_THAT(md, HasSubstr(tail));
  }
  EXPECT_THAT(md, HasSubstr("| " + v.label + " | decode-16@255 | 1.000 | 2.000 | +100.00 |"));
  EXPECT_THAT(md, HasSubstr("runs: " + v.label + " 3.\n"));
}

TEST_F(ValidationTest, TheReportsListEveryLoad) {
  const ExperimentConfig config = Config();
  auto a = ValidateLoad(config, Engine(config, 1.0), (dir_ / "a").string(), false);
  auto b = ValidateLoad(config, Engine(config, 2.0), (dir_ / "b").string(), false);
  ASSERT_TRUE(a.ok() && b.ok());
  a->label = "rate-12";
  b->label = "slow";
  const std::string csv = ValidationCsv({*a, *b});
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "load,quantity,statistic,engine,sim,error_pct");
  EXPECT_THAT(csv, HasSubstr("\nrate-12,step_time_all,mape,"));
  EXPECT_THAT(csv, HasSubstr("\nslow,step_time_all,mape,"));
  EXPECT_THAT(csv, MatchesRegex("(.|\n)*\nslow,step_time_all,mape,[^,\n]+,[^,\n]+,50\n(.|\n)*"));
  EXPECT_THAT(csv, HasSubstr("\nrate-12,e2e,p99,"));
  const std::string md = ValidationMarkdown("v", {*a, *b});
  EXPECT_THAT(md, HasSubstr("| metric | rate-12 | slow |"));
  EXPECT_THAT(md, HasSubstr("| e2e p99 | +0.00 |"));
}

// The engine run again (--engine-runs): each rerun is costed step by step as the first
// run is, compared with the first run's simulated run (none of its own), and its engine
// held against the first's. An engine a quarter slower on its first run than the cost
// model, then equal to it on the second: the second run is the simulated run itself, so
// its run-to-run change is exactly the simulator's error on the first run, and the
// simulator is within the engine's change on all six judged figures; run again a quarter
// slower, the engine does not move and the simulator's -20% is within it on none.
TEST_F(ValidationTest, AnEngineRunAgainIsHeldAgainstTheFirstRunAndItsSimulation) {
  const ExperimentConfig config = Config();
  auto factor = std::make_shared<double>(1.25);
  auto blocks = std::make_shared<int64_t>(300);
  const BackendFactory engine = [config, factor, blocks](int32_t) -> StatusOr<std::unique_ptr<Backend>> {
    auto cost = BuiltinCostModels().Make(config.cost_model, DeploymentOf(config));
    if (!cost.ok()) return cost.status();
    return std::unique_ptr<Backend>(
        std::make_unique<FakeEngine>(std::move(cost).value(), *factor, *blocks));
  };
  auto first = ValidateLoad(config, engine, dir_.string(), false);
  ASSERT_TRUE(first.ok()) << first.status().message();
  first->label = "r";
  *factor = 1.0;
  auto again = ValidateLoadAgain(config, engine, (dir_ / "run-2").string(), *first, 2, false);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->run, 2);
  EXPECT_EQ(again->label, "r/run-2");
  EXPECT_EQ(again->step_error.mape, 0.0);  // its steps are the cost model's
  EXPECT_TRUE(again->host.steps.empty());
  // Its engine run is the first's simulated run, to the nanosecond; no simulated run of
  // its own is written.
  EXPECT_EQ(Read(dir_ / "run-2" / "engine" / "requests.csv"), Read(dir_ / "sim" / "requests.csv"));
  EXPECT_FALSE(fs::exists(dir_ / "run-2" / "sim"));
  ASSERT_EQ(again->run_to_run.size(), first->metrics.size());
  for (size_t m = 0; m < first->metrics.size(); ++m) {
    const MetricComparison& change = again->run_to_run[m];
    EXPECT_EQ(change.engine, first->metrics[m].engine) << change.metric << " " << change.statistic;
    EXPECT_EQ(change.sim, again->metrics[m].engine);
    EXPECT_EQ(change.error_pct, first->metrics[m].error_pct) << change.metric << " " << change.statistic;
    EXPECT_EQ(again->metrics[m].error_pct, 0.0);  // against the same simulated run
  }
  EXPECT_LT(first->ErrorPct("tpot", "p50"), 0.0);
  first->reruns.push_back(*again);
  std::string md = ValidationMarkdown("v", {*first});
  EXPECT_THAT(md, HasSubstr("| metric | r | r/run-2 |"));  // the end-to-end table
  EXPECT_THAT(md, HasSubstr("\nRun to run: "));
  char tpot[64];
  std::snprintf(tpot, sizeof tpot, "| tpot p50 | %+.2f |\n", first->ErrorPct("tpot", "p50"));
  EXPECT_THAT(md, HasSubstr(tpot));
  EXPECT_THAT(md, HasSubstr("within the engine's largest change between its runs on 6 of 6.\n"));
  const std::string csv = ValidationCsv({*first});
  EXPECT_THAT(csv, HasSubstr("\nr/run-2,step_time_all,mape,"));
  EXPECT_THAT(csv, HasSubstr("\nr/run-2,e2e,p99,"));
  EXPECT_THAT(csv, HasSubstr("\nr/mean,e2e,p99,"));
  // Against the mean of a run a quarter slower and one that is the simulated run: the
  // mean of the two, by hand.
  const std::vector<MetricComparison> mean = first->AgainstEngineMean();
  ASSERT_EQ(mean.size(), first->metrics.size());
  for (size_t m = 0; m < mean.size(); ++m) {
    const double engine = (first->metrics[m].engine + first->metrics[m].sim) / 2;
    EXPECT_DOUBLE_EQ(mean[m].engine, engine) << mean[m].metric << " " << mean[m].statistic;
    EXPECT_EQ(mean[m].sim, first->metrics[m].sim);
    if (engine > 0) {
      EXPECT_NEAR(mean[m].error_pct, (first->metrics[m].sim - engine) / engine * 100, 1e-9);
    }
  }
  EXPECT_THAT(md, HasSubstr("| metric | r (2 runs) |"));

  *factor = 1.25;
  auto same = ValidateLoadAgain(config, engine, (dir_ / "run-3").string(), *first, 3, false);
  ASSERT_TRUE(same.ok()) << same.status().message();
  for (const MetricComparison& change : same->run_to_run) EXPECT_EQ(change.error_pct, 0.0);
  first->reruns = {*same};
  // The engine where it was: the mean is the first run, and so are the errors.
  for (size_t m = 0; m < first->metrics.size(); ++m) {
    EXPECT_EQ(first->AgainstEngineMean()[m].error_pct, first->metrics[m].error_pct);
  }
  md = ValidationMarkdown("v", {*first});
  EXPECT_THAT(md, HasSubstr("within the engine's largest change between its runs on 0 of 6.\n"));
  // Without reruns, no such section.
  first->reruns.clear();
  EXPECT_THAT(ValidationMarkdown("v", {*first}), Not(HasSubstr("Run to run")));

  // An engine whose pool changed between runs: the first run's simulated run is not
  // this one's, and the rerun says so rather than compare with it.
  *blocks = 299;
  auto other = ValidateLoadAgain(config, engine, (dir_ / "run-4").string(), *first, 4, false);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kInternal);
  EXPECT_THAT(other.status().message(), HasSubstr("(300 blocks of 16, context 1024 -> 299 of 16, 1024)"));
}

// The decode errors' wander, by hand: two stretches that part (+10%, -10%) are
// neighbours alike; alternating errors are neighbours opposed, and their stretches agree.
TEST(ErrorWanderTest, AutocorrelationAndStretchesByHand) {
  const std::vector<double> parting = {0.1, 0.1, -0.1, -0.1};
  ErrorWander w = ErrorWander::Of(parting, 2);
  // Mean 0; lagged products 0.01 - 0.01 + 0.01 over squares 4 x 0.01.
  EXPECT_NEAR(w.autocorrelation, 0.25, 1e-12);
  EXPECT_EQ(w.windows, 2);
  EXPECT_NEAR(w.window_min_pct, -10.0, 1e-12);
  EXPECT_NEAR(w.window_max_pct, 10.0, 1e-12);
  // Their means span 20 points: past a limit of 19.99, not of 20.
  EXPECT_NEAR(w.SpreadPct(), 20.0, 1e-12);
  EXPECT_TRUE(w.Wandered(19.99));
  EXPECT_FALSE(w.Wandered(20.01));

  const std::vector<double> alternating = {0.1, -0.1, 0.1, -0.1, 0.1};
  w = ErrorWander::Of(alternating, 2);
  // Mean 0.02: deviations 0.08, -0.12, 0.08, -0.12, 0.08; lagged 4 x -0.0096, squares
  // 3 x 0.0064 + 2 x 0.0144.
  EXPECT_NEAR(w.autocorrelation, -0.0384 / 0.048, 1e-12);
  EXPECT_EQ(w.windows, 2);  // the fifth error is a partial stretch, left out
  EXPECT_NEAR(w.window_min_pct, 0.0, 1e-12);
  EXPECT_NEAR(w.window_max_pct, 0.0, 1e-12);
  EXPECT_FALSE(w.Wandered(0));

  // One whole stretch (+10%) and a partial one: nothing to wander from.
  const std::vector<double> once = {0.1, 0.1, -0.5};
  w = ErrorWander::Of(once, 2);
  EXPECT_EQ(w.windows, 1);
  EXPECT_NEAR(w.window_min_pct, 10.0, 1e-12);
  EXPECT_EQ(w.SpreadPct(), 0.0);
  EXPECT_FALSE(w.Wandered(0));

  const std::vector<double> constant(250, -0.2);
  w = ErrorWander::Of(constant);
  EXPECT_EQ(w.autocorrelation, 0.0);  // no variance: nothing to correlate
  EXPECT_EQ(w.windows, 2);
  EXPECT_NEAR(w.window_min_pct, -20.0, 1e-12);
  EXPECT_NEAR(w.window_max_pct, -20.0, 1e-12);

  const std::vector<double> few = {0.3, -0.3};
  w = ErrorWander::Of(few);
  EXPECT_EQ(w.autocorrelation, 0.0);
  EXPECT_EQ(w.windows, 0);
  EXPECT_EQ(w.window_min_pct, 0.0);
}

TEST_F(ValidationTest, TheDecodeWanderIsReportedWhenThereIsAStretch) {
  const ExperimentConfig config = Config();
  auto v = ValidateLoad(config, Engine(config, 1.25), dir_.string(), false);
  ASSERT_TRUE(v.ok()) << v.status().message();
  // The engine a quarter slower on every step: -20% everywhere, no wander.
  const ErrorWander& run = v->decode_wander;
  EXPECT_NEAR(run.autocorrelation, 0.0, 1e-6);
  ASSERT_GT(run.windows, 0) << "the run has fewer than 100 decode-only steps";
  EXPECT_NEAR(run.window_min_pct, -20.0, 1e-4);
  EXPECT_NEAR(run.window_max_pct, -20.0, 1e-4);
  // Over shorter stretches: ten times as many (of the same decode-only steps), alike.
  const ErrorWander tenths = v->DecodeWander(10);
  EXPECT_EQ(tenths.window, 10);
  EXPECT_EQ(tenths.windows, v->decode_step_error.points / 10);
  EXPECT_GE(tenths.windows, 10 * run.windows);
  EXPECT_NEAR(tenths.window_min_pct, -20.0, 1e-4);
  EXPECT_NEAR(tenths.window_max_pct, -20.0, 1e-4);
  EXPECT_FALSE(tenths.Wandered(0.001));
  EXPECT_EQ(v->DecodeWander(100).windows, run.windows);
  v->label = "rate-12";
  v->decode_wander = ErrorWander{};
  EXPECT_THAT(ValidationCsv({*v}), Not(HasSubstr("autocorrelation")));
  EXPECT_THAT(ValidationMarkdown("v", {*v}), Not(HasSubstr("lag-one")));
  v->decode_wander.windows = 3;
  v->decode_wander.autocorrelation = 0.75;
  v->decode_wander.window_min_pct = -12.5;
  v->decode_wander.window_max_pct = 6.25;
  const std::string csv = ValidationCsv({*v});
  EXPECT_THAT(csv, HasSubstr(",0.75\n"));
  EXPECT_THAT(csv, HasSubstr("\nrate-12,step_time_decode,autocorrelation,"));
  EXPECT_THAT(csv, HasSubstr("\nrate-12,step_time_decode,window_min,"));
  EXPECT_THAT(csv, HasSubstr(",-12.5\nrate-12,step_time_decode,window_max,"));
  EXPECT_THAT(csv, HasSubstr(",6.25\n"));
  const std::string md = ValidationMarkdown("v", {*v});
  EXPECT_THAT(md, HasSubstr("over stretches of 100"));
  EXPECT_THAT(md, HasSubstr(" | 0.75 | 3 | -12.5 | +6.2 |\n"));
}

// The host check's reference steps are costed as the run's steps are, on the simulator's
// backend: with a linear cost model (1 ms + 0.1 ms a new token + 0.01 ms a token of
// context, each sequence's context counting its new token), by hand.
TEST(ReferenceStepsTest, PredictedByTheSimulatorsCostModel) {
  auto config = ParseExperiment(
      "name: v\nbackend: sim\nmodel: llama-3-8b\nhardware: {gpu: a100-80gb}\n"
      "cost_model: {type: linear, base_ms: 1, per_token_ms: 0.1, per_context_token_ms: 0.01}\n",
      "exp.yaml", "/");
  ASSERT_TRUE(config.ok()) << config.status().message();
  std::vector<ReferenceStep> steps = {
      {true, 1, 63, 0, 0, 0}, {true, 4, 255, 0, 0, 0}, {false, 128, 0, 0, 0, 0}, {false, 32, 512, 0, 0, 0}};
  ASSERT_TRUE(PredictReferenceSteps(*config, steps).ok());
  EXPECT_NEAR(steps[0].predicted_s, 1e-3 * (1 + 0.1 + 0.01 * 64), 1e-12);
  EXPECT_NEAR(steps[1].predicted_s, 1e-3 * (1 + 0.4 + 0.01 * 4 * 256), 1e-12);
  EXPECT_NEAR(steps[2].predicted_s, 1e-3 * (1 + 12.8 + 0.01 * 128), 1e-12);
  EXPECT_NEAR(steps[3].predicted_s, 1e-3 * (1 + 3.2 + 0.01 * 544), 1e-12);
}

// Drift is the reference steps' mean relative change across the run, each step weighing
// the same; a load drifted when one step changed by more than the limit (a step that
// slowed and one that sped up do not cancel); error is the simulator's mean relative
// error on them.
TEST_F(ValidationTest, TheHostCheckIsReportedPerLoad) {
  HostCheck host;
  // Seconds exact in binary, so the sums and percentages are too.
  host.steps = {{true, 1, 63, 0.25, 0.3125, 0.3125}, {false, 128, 0, 0.75, 0.75, 0.75}};
  EXPECT_EQ(host.steps[0].Label(), "decode-1@63");
  EXPECT_EQ(host.steps[1].Label(), "prefill-128@0");
  EXPECT_EQ(host.Before(), 1.0);
  EXPECT_EQ(host.After(), 1.0625);
  EXPECT_EQ(host.Predicted(), 1.0625);
  EXPECT_EQ(host.DriftPct(), 12.5);  // +25% and 0%, not the sums' +6.25%
  EXPECT_EQ(host.MaxDriftPct(), 25.0);
  EXPECT_TRUE(host.Drifted(24.99));
  EXPECT_FALSE(host.Drifted(25));
  EXPECT_EQ(host.ErrorPct(false), 12.5);  // +25% and 0%
  EXPECT_EQ(host.ErrorPct(true), 0.0);
  EXPECT_EQ(HostCheck{}.DriftPct(), 0.0);
  EXPECT_FALSE(HostCheck{}.Drifted(0));
  HostCheck opposite;
  opposite.steps = {{true, 1, 63, 0.5, 0.625, 0}, {false, 128, 0, 0.5, 0.375, 0}};
  EXPECT_EQ(opposite.DriftPct(), 0.0);  // +25% and -25%
  EXPECT_EQ(opposite.MaxDriftPct(), 25.0);
  EXPECT_TRUE(opposite.Drifted(5));

  const ExperimentConfig config = Config();
  auto v = ValidateLoad(config, Engine(config, 1.0), dir_.string(), false);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->sim_config.backend, BackendKind::kSim);
  EXPECT_EQ(v->sim_config.hardware.num_gpu_blocks, 300);  // the twin's, with the engine's pool
  v->label = "rate-12";
  const std::string plain = ValidationCsv({*v});
  EXPECT_THAT(plain, Not(HasSubstr("reference_step")));
  EXPECT_THAT(ValidationMarkdown("v", {*v}), Not(HasSubstr("Host check")));
  EXPECT_THAT(plain, HasSubstr("\nrate-12,attempts,runs,1,,\n"));
  EXPECT_THAT(ValidationMarkdown("v", {*v}), Not(HasSubstr("Run again")));
  v->host = host;
  v->attempts = 2;
  const std::string csv = ValidationCsv({*v});
  // Each step before and after: its median, its predicted time, the error.
  EXPECT_THAT(csv, HasSubstr("\nrate-12,reference_step,before:decode-1@63,0.25,0.3125,25\n"
                             "rate-12,reference_step,before:prefill-128@0,0.75,0.75,0\n"
                             "rate-12,reference_step,after:decode-1@63,0.3125,0.3125,0\n"
                             "rate-12,reference_step,after:prefill-128@0,0.75,0.75,0\n"));
  const std::string md = ValidationMarkdown("v", {*v});
  EXPECT_THAT(md, HasSubstr("| rate-12 | decode-1@63 prefill-128@0 | 1000.000 | 1062.500 | "
                            "+12.50 | 25.00 | +12.50 | +0.00 |"));
  // The load took two runs, the last kept.
  EXPECT_THAT(csv, HasSubstr("\nrate-12,attempts,runs,2,,\n"));
  EXPECT_THAT(md, HasSubstr("the last run kept, runs: rate-12 2.\n"));
}

}  // namespace
}  // namespace servelab
