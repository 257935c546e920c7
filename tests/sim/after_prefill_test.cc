// The first decode steps after a prefill step (sim/after_prefill.h): the fit recovers a
// known slowdown and decay from rows a known model made (with and without noise), says
// when rows are too few or have nothing to compare with, MODEL.yaml carries the fit, and
// the calibrated cost model prices a simulated run's decode steps by their place after
// the last prefill step, counted here from steps.csv, with decode runs and without.
#include "sim/after_prefill.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "driver/config_yaml.h"
#include "sim/calibrated_cost_model.h"
#include "sim/sim_backend.h"
#include "sim/validation.h"
#include "sim/validation_report.h"
#include "tests/sim/calibration_fixtures.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;
using testing::FreeOpsModel;
using testing::ReadModelText;

TEST(AfterPrefillTest, TheFactorDecaysFromTheFirstDecode) {
  AfterPrefill a;
  a.batches = {1};
  a.slowdown = {0.4};
  a.decay_steps = 2;
  EXPECT_EQ(a.Factor(0, 1), 1.0);  // a step with prompt tokens
  EXPECT_DOUBLE_EQ(a.Factor(1, 1), 1.4);
  EXPECT_DOUBLE_EQ(a.Factor(3, 1), 1 + 0.4 * std::exp(-1.0));
  EXPECT_DOUBLE_EQ(a.Factor(1, 64), 1.4);  // one size fitted: every batch's
  EXPECT_NEAR(a.Factor(60, 1), 1.0, 1e-12);
  EXPECT_EQ(AfterPrefill{}.Factor(1, 1), 1.0);  // none fitted
  // Between two fitted sizes, in log(B); beyond them, the nearest's.
  a.batches = {2, 32};
  a.slowdown = {0.4, 0.0};
  EXPECT_DOUBLE_EQ(a.SlowdownAt(1), 0.4);
  EXPECT_DOUBLE_EQ(a.SlowdownAt(8), 0.2);
  EXPECT_NEAR(a.SlowdownAt(4), 0.3, 1e-15);
  EXPECT_EQ(a.SlowdownAt(64), 0.0);
  EXPECT_EQ(a.Factor(1, 32), 1.0);
  EXPECT_EQ(a.Said(), "40.0% at 2, 0.0% at 32 sequences, decaying over 2.00 steps");
}

// A settled decode row and its rows k = 1 ... `steps` after a chunk of 128 tokens, timed
// as `factor(k)` times it.
template <typename Factor>
void AddDecode(ProfileTable& table, int64_t batch, double settled_ms, int32_t steps, Factor factor) {
  ProfileRow step;
  step.device = "cpu";
  step.shape = *FindModel("llama-2-7b");
  step.op = "step";
  step.tokens = step.batch = batch;
  step.context = 63;
  step.median_ms = settled_ms;
  step.line = static_cast<int64_t>(table.rows.size()) + 2;
  table.rows.push_back(step);
  for (int32_t k = 1; k <= steps; ++k) {
    ProfileRow r = step;
    r.op = kStepAfterPrefill;
    r.after_prefill = k;
    r.prefill_before = 128;
    r.median_ms = settled_ms * factor(k);
    r.line = static_cast<int64_t>(table.rows.size()) + 2;
    table.rows.push_back(r);
  }
}

// Rows from slowdowns 0.3, 0.1 and 0 at 1, 4 and 16 sequences and a decay of 4 steps (on
// the fit's grid: 0.25 x 2^(48/12)) give them back; with each time off by up to 2%
// (seeded), near them.
TEST(AfterPrefillTest, TheFitRecoversAKnownSlowdownAndDecay) {
  const std::map<int64_t, double> slowdown = {{1, 0.3}, {4, 0.1}, {16, 0.0}};
  const auto known = [&](int64_t batch) {
    return [&slowdown, batch](int32_t k) { return 1 + slowdown.at(batch) * std::exp(-(k - 1) / 4.0); };
  };
  ProfileTable table;
  table.path = "known.csv";
  for (const int64_t batch : {1, 4, 16}) AddDecode(table, batch, 2.0 + batch, 12, known(batch));
  auto fit = FitAfterPrefill(std::vector<ProfileTable>{table});
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  ASSERT_TRUE(fit->has_value());
  EXPECT_EQ((*fit)->decay_steps, 4.0);
  EXPECT_EQ((*fit)->batches, (std::vector<int64_t>{1, 4, 16}));
  ASSERT_EQ((*fit)->slowdown.size(), 3u);
  EXPECT_NEAR((*fit)->slowdown[0], 0.3, 1e-12);
  EXPECT_NEAR((*fit)->slowdown[1], 0.1, 1e-12);
  EXPECT_NEAR((*fit)->slowdown[2], 0.0, 1e-12);
  EXPECT_NEAR((*fit)->mape_pct, 0.0, 1e-9);
  EXPECT_EQ((*fit)->rows, 36);
  EXPECT_EQ((*fit)->prefill_tokens_min, 128);
  EXPECT_EQ((*fit)->prefill_tokens_max, 128);

  // Two shapes' rows of one size fit together; each time off by up to 2%.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> noise(-0.02, 0.02);
  ProfileTable noisy, other;
  noisy.path = "noisy.csv";
  other.path = "other.csv";
  for (const int64_t batch : {1, 4, 16}) {
    AddDecode(noisy, batch, 2.0 + batch, 12, [&](int32_t k) { return known(batch)(k) * (1 + noise(rng)); });
    AddDecode(other, batch, 3.0 + batch, 12, [&](int32_t k) { return known(batch)(k) * (1 + noise(rng)); });
  }
  other.rows.front().shape.hidden_size = 512;  // another shape's settled row...
  for (ProfileRow& r : other.rows) r.shape.hidden_size = 512;  // ...and its rows
  fit = FitAfterPrefill(std::vector<ProfileTable>{noisy, other});
  ASSERT_TRUE(fit.ok() && fit->has_value()) << fit.status().message();
  EXPECT_EQ((*fit)->rows, 72);
  EXPECT_NEAR((*fit)->slowdown[0], 0.3, 0.03);
  EXPECT_NEAR((*fit)->slowdown[1], 0.1, 0.03);
  EXPECT_NEAR((*fit)->slowdown[2], 0.0, 0.03);
  EXPECT_GT((*fit)->decay_steps, 3.0);
  EXPECT_LT((*fit)->decay_steps, 5.5);
  EXPECT_GT((*fit)->mape_pct, 0.1);
  EXPECT_LT((*fit)->mape_pct, 2.0);

  // Decodes that run as fast after a chunk as settled: no slowdown.
  ProfileTable flat;
  flat.path = "flat.csv";
  AddDecode(flat, 1, 2.0, 8, [](int32_t) { return 1.0; });
  fit = FitAfterPrefill(std::vector<ProfileTable>{flat});
  ASSERT_TRUE(fit.ok() && fit->has_value()) << fit.status().message();
  EXPECT_EQ((*fit)->slowdown, std::vector<double>{0.0});
}

TEST(AfterPrefillTest, TooFewRowsOrNothingToCompareWithIsSaid) {
  const auto known = [](int32_t k) { return 1 + 0.3 * std::exp(-(k - 1) / 4.0); };
  ProfileTable none;
  none.path = "none.csv";
  AddDecode(none, 1, 2.0, 0, known);
  auto fit = FitAfterPrefill(std::vector<ProfileTable>{none});
  ASSERT_TRUE(fit.ok());
  EXPECT_FALSE(fit->has_value());  // no such rows: no fit, no error

  ProfileTable two;
  two.path = "two.csv";
  AddDecode(two, 1, 2.0, 2, known);
  AddDecode(two, 4, 5.0, 2, known);
  fit = FitAfterPrefill(std::vector<ProfileTable>{two});
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(fit.status().message(), HasSubstr("4 step_after_prefill rows at 2 distinct places after the chunk: too few"));

  ProfileTable absurd;  // a settled median of 0: no ratio to take
  absurd.path = "absurd.csv";
  AddDecode(absurd, 1, 2.0, 4, known);
  absurd.rows[0].median_ms = 0;
  fit = FitAfterPrefill(std::vector<ProfileTable>{absurd});
  ASSERT_FALSE(fit.ok());
  EXPECT_THAT(fit.status().message(), HasSubstr("absurd.csv:3: a step_after_prefill row"));
  EXPECT_THAT(fit.status().message(), HasSubstr("(line 2): more than 11 times it"));

  ProfileTable orphan;
  orphan.path = "orphan.csv";
  AddDecode(orphan, 1, 2.0, 4, known);
  orphan.rows[2].context = 255;  // its settled row is at context 63
  fit = FitAfterPrefill(std::vector<ProfileTable>{orphan});
  ASSERT_FALSE(fit.ok());
  EXPECT_THAT(fit.status().message(),
              HasSubstr("orphan.csv:4: a step_after_prefill row of 1 sequences at context 255 and no step row"));
}

// MODEL.yaml carries the fit; out of its range, the key is named.
TEST(AfterPrefillTest, TheModelFileCarriesIt) {
  CalibratedModel model = FreeOpsModel("cpu");
  AfterPrefill a;
  a.batches = {1, 4, 16};
  a.slowdown = {0.125, 0.0625, 0};
  a.decay_steps = 3.5;
  a.rows = 36;
  a.prefill_tokens_min = a.prefill_tokens_max = 128;
  model.after_prefill = a;
  const std::string text = CalibratedModelYaml(model, {});
  EXPECT_THAT(text, HasSubstr("after_prefill:"));
  auto read = ReadModelText(text, "after_prefill");
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_TRUE(read->after_prefill.has_value());
  EXPECT_EQ(read->after_prefill->batches, a.batches);
  EXPECT_EQ(read->after_prefill->slowdown, a.slowdown);
  EXPECT_EQ(read->after_prefill->decay_steps, 3.5);
  EXPECT_EQ(read->after_prefill->rows, 36);
  EXPECT_EQ(read->after_prefill->prefill_tokens_max, 128);
  model.after_prefill.reset();
  read = ReadModelText(CalibratedModelYaml(model, {}), "after_prefill_none");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_FALSE(read->after_prefill.has_value());

  const auto refused = [&](const std::string& from, const std::string& to) {
    std::string bad = text;
    const size_t at = bad.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    bad.replace(at, from.size(), to);
    auto read = ReadModelText(bad, "after_prefill_bad");
    return read.ok() ? std::string("read") : read.status().message();
  };
  EXPECT_THAT(refused("slowdown: [0.125", "slowdown: [-0.1"), HasSubstr("after_prefill.slowdown[0]"));
  EXPECT_THAT(refused("slowdown: [0.125, 0.0625, 0.0]", "slowdown: [0.125, 0.0625]"),
              HasSubstr("after_prefill.slowdown: one a batch size"));
  EXPECT_THAT(refused("batches: [1, 4, 16]", "batches: [1, 16, 4]"),
              HasSubstr("after_prefill.batches[2]: whole numbers, increasing"));
  EXPECT_THAT(refused("batches: [1, 4, 16]", "batches: [1, 4.5, 16]"), HasSubstr("after_prefill.batches[1]"));
  EXPECT_THAT(refused("batches: [1, 4, 16]", "batches: []"), HasSubstr("after_prefill.batches: 1 to 64"));
  EXPECT_THAT(refused("decay_steps: 3.5", "decay_steps: 0"), HasSubstr("after_prefill.decay_steps"));
  EXPECT_THAT(refused("  decay_steps: 3.5\n", ""), HasSubstr("after_prefill.decay_steps: missing"));
  EXPECT_THAT(refused("prefill_tokens: [128, 128]", "prefill_tokens: [128]"),
              HasSubstr("after_prefill.prefill_tokens: the smallest and largest"));
  EXPECT_THAT(refused("rows: 36", "rows: many"), HasSubstr("after_prefill.rows"));
}

class AfterPrefillRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("servelab_after_prefill_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    WriteTenMillisecondModel(dir_ / "m.yaml", 0.5);
  }
  // Every op free and a 10 ms step: a prefill step takes 10 ms, a decode-only step 10 ms
  // x (1 + slowdown exp(-(k - 1) / 2)), whatever its sequences.
  static void WriteTenMillisecondModel(const std::filesystem::path& path, double slowdown) {
    CalibratedModel model = FreeOpsModel("a100-80gb");
    model.has_step_overhead = true;
    model.step_overhead_us = 10000;
    AfterPrefill a;
    a.batches = {1};
    a.slowdown = {slowdown};
    a.decay_steps = 2;
    model.after_prefill = a;
    std::ofstream(path) << CalibratedModelYaml(model, {});
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // steps.csv of a run on that model (`extra`: more of the cost model's parameters;
  // `blocks`: a KV pool of that many blocks, 0 the memory formula's).
  std::string Steps(const std::string& extra, int blocks = 0) {
    auto config = ParseExperiment(
        "name: t\nseed: 3\nmodel: llama-2-7b\nhardware: {gpu: a100-80gb" +
            (blocks > 0 ? ", num_gpu_blocks: " + std::to_string(blocks) : std::string()) + "}\n"
        "scheduler: {max_num_seqs: 8}\n"
        "workload: {num_requests: 60, arrival: {process: poisson, rate: 4},\n"
        "  input_tokens: {dist: uniform, min: 10, max: 300},\n"
        "  output_tokens: {dist: uniform, min: 1, max: 60}}\n"
        "cost_model: {type: calibrated, path: m.yaml" + extra + "}\n",
        (dir_ / "exp.yaml").string(), dir_.string());
    EXPECT_TRUE(config.ok()) << config.status().message();
    std::ostringstream steps;
    MetricsSinks sinks;
    sinks.steps_csv = &steps;
    auto run = RunSimulation(*config, sinks);
    EXPECT_TRUE(run.ok()) << run.status().message();
    return steps.str();
  }

  std::filesystem::path dir_;
};

// A steps.csv row's duration in ns (its exact decimal seconds).
int64_t DurationNs(const std::string& cell) {
  const size_t dot = cell.find('.');
  std::string frac = dot == std::string::npos ? "" : cell.substr(dot + 1);
  frac.resize(9, '0');
  return std::stoll(cell.substr(0, dot)) * 1'000'000'000 + std::stoll(frac);
}

// Each step's place after the last prefill step, counted from steps.csv itself, gives its
// time; the same with decode runs (the default) and stepping every iteration.
TEST_F(AfterPrefillRunTest, EachDecodeStepTakesItsPlaceAfterThePrefill) {
  // Also on a pool of 40 blocks of 16 tokens: requests preempted (recomputed, a prefill
  // step again) and decode runs cut where a block is wanting.
  for (const int blocks : {0, 40}) {
  for (const bool runs : {true, false}) {
    SCOPED_TRACE((runs ? "decode runs, " : "every iteration, ") + std::to_string(blocks) + " blocks");
    if (!runs) ::setenv("SERVELAB_DECODE_RUNS", "0", 1);
    const std::string csv = Steps("", blocks);
    ::unsetenv("SERVELAB_DECODE_RUNS");
    std::istringstream in(csv);
    std::string line;
    std::getline(in, line);
    ASSERT_THAT(line, HasSubstr("replica,start_s,duration_s,batch_size,prefill_tokens,decode_tokens"));
    int32_t k = 0;
    int64_t decodes = 0, late = 0, preempted = 0;
    while (std::getline(in, line)) {
      std::vector<std::string> cells;
      std::stringstream row(line);
      for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
      ASSERT_GE(cells.size(), 6u) << line;
      const bool prefill = std::stoi(cells[4]) > 0;
      k = prefill ? 0 : k + 1;
      const double expected_s = prefill ? 0.010 : 0.010 * (1 + 0.5 * std::exp(-(k - 1) / 2.0));
      EXPECT_NEAR(static_cast<double>(DurationNs(cells[2])), expected_s * 1e9, 1.0) << line << " k " << k;
      decodes += prefill ? 0 : 1;
      preempted += cells.size() > 9 ? std::stoll(cells[9]) : 0;
      late += k > 10 ? 1 : 0;
    }
    EXPECT_GT(decodes, 500);
    EXPECT_GT(late, 100);  // settled streaks, not only first decodes
    if (blocks > 0) EXPECT_GT(preempted, 0);
  }
  }
  // after_prefill: false: every step 10 ms.
  std::istringstream in(Steps(", after_prefill: false"));
  std::string line;
  std::getline(in, line);
  int64_t rows = 0;
  while (std::getline(in, line)) {
    std::stringstream row(line);
    std::vector<std::string> cells;
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    EXPECT_EQ(DurationNs(cells[2]), 10'000'000) << line;
    ++rows;
  }
  EXPECT_GT(rows, 500);
}

// An engine whose steps take 10 ms, its decode-only steps 10 ms x (1 + 0.3 exp(-(k - 1) /
// 2)), k counted here from the plans it runs.
class SlowAfterPrefillEngine final : public Backend {
 public:
  std::string_view Name() const override { return "engine-fake"; }
  KvCapacity Capacity() const override {
    KvCapacity c;
    c.num_gpu_blocks = 300;
    c.block_size = 16;
    return c;
  }
  int32_t MaxModelLen() const override { return 1024; }
  StatusOr<StepResult> Execute(const StepPlan& plan) override {
    const bool decode_only = plan.num_prefill_tokens == 0 && plan.num_decode_tokens > 0;
    k_ = plan.num_prefill_tokens > 0 ? 0 : k_ + (decode_only ? 1 : 0);
    StepResult r;
    r.elapsed = FromSeconds(decode_only ? 0.010 * (1 + 0.3 * std::exp(-(k_ - 1) / 2.0)) : 0.010);
    return r;
  }

 private:
  int32_t k_ = 0;
};

// Validated against that engine, a model with its slowdown has no error, step by step and
// end to end; one without it (after_prefill: false) is 1 / 1.3 - 1 off on the first decodes
// after a prefill step, and validation.md and .csv say so by place.
TEST_F(AfterPrefillRunTest, AValidationOfAnEngineSlowAfterAPrefillStep) {
  WriteTenMillisecondModel(dir_ / "engine.yaml", 0.3);
  const BackendFactory engine = [](int32_t) -> StatusOr<std::unique_ptr<Backend>> {
    return std::unique_ptr<Backend>(std::make_unique<SlowAfterPrefillEngine>());
  };
  for (const bool knows : {true, false}) {
    SCOPED_TRACE(knows ? "with after_prefill" : "without");
    auto config = ParseExperiment(
        "name: v\nseed: 3\nbackend: engine\nmodel: llama-3-8b\nhardware: {gpu: a100-80gb}\n"
        "scheduler: {max_num_seqs: 16, max_num_batched_tokens: 512}\n"
        "workload: {num_requests: 60, arrival: {process: poisson, rate: 12},\n"
        "  input_tokens: {dist: uniform, min: 20, max: 400},\n"
        "  output_tokens: {dist: uniform, min: 2, max: 80}}\n"
        "cost_model: {type: calibrated, path: engine.yaml, after_prefill: " +
            std::string(knows ? "true" : "false") + "}\n",
        (dir_ / "exp.yaml").string(), dir_.string());
    ASSERT_TRUE(config.ok()) << config.status().message();
    auto v = ValidateLoad(*config, engine, (dir_ / (knows ? "knows" : "not")).string(), false);
    ASSERT_TRUE(v.ok()) << v.status().message();
    v->label = "r";
    const std::vector<StepRangeError> ranges = DecodeErrorsAfterPrefill(v->steps);
    ASSERT_GE(ranges.size(), 5u);
    EXPECT_EQ(ranges.front().steps, "k=1");
    EXPECT_GT(ranges.front().error.points, 10);
    if (knows) {
      EXPECT_NEAR(v->step_error.mape, 0.0, 1e-9);
      for (const MetricComparison& m : v->metrics) EXPECT_NEAR(m.error_pct, 0.0, 1e-9) << m.metric;
      continue;
    }
    EXPECT_NEAR(ranges.front().error.bias, 100 * (1 / 1.3 - 1), 1e-6);
    EXPECT_NEAR(ranges[1].error.bias, 100 * (1 / (1 + 0.3 * std::exp(-0.5)) - 1), 1e-6);
    EXPECT_GT(ranges.back().error.bias, -0.1);  // k = 16 and later: settled
    EXPECT_LT(v->ErrorPct("tpot", "p50"), 0.0);
    EXPECT_THAT(ValidationMarkdown("v", {*v}), HasSubstr("| k=1 | 23.1 / -23.1 ("));
    EXPECT_THAT(ValidationCsv({*v}), HasSubstr("\nr,step_time_decode_after_prefill_k=1,bias,"));
  }
}

// By hand: decode-only steps by their place, the mixed and unmeasured left out.
TEST(DecodeErrorsAfterPrefillTest, ByPlaceByHand) {
  auto step = [](int32_t k, bool decode, double measured_ms, double predicted_ms) {
    StepComparison s;
    s.decode_only = decode;
    s.after_prefill = k;
    s.measured_s = measured_ms * 1e-3;
    s.predicted_s = predicted_ms * 1e-3;
    return s;
  };
  const std::vector<StepComparison> steps = {step(0, false, 20, 10), step(1, true, 2, 1),  step(2, true, 2, 3),
                                             step(5, true, 4, 3),    step(7, true, 4, 5),  step(30, true, 1, 1),
                                             step(1, true, 0, 1)};
  const std::vector<StepRangeError> r = DecodeErrorsAfterPrefill(steps);
  ASSERT_EQ(r.size(), 4u);  // k=1, k=2, k=4-7, k=16+ (none at 3 or 8-15)
  EXPECT_EQ(r[0].steps, "k=1");
  EXPECT_EQ(r[0].error.points, 1);
  EXPECT_DOUBLE_EQ(r[0].error.bias, -50.0);
  EXPECT_EQ(r[1].steps, "k=2");
  EXPECT_DOUBLE_EQ(r[1].error.bias, 50.0);
  EXPECT_EQ(r[2].steps, "k=4-7");
  EXPECT_EQ(r[2].top, 7);
  EXPECT_DOUBLE_EQ(r[2].error.mape, 25.0);
  EXPECT_DOUBLE_EQ(r[2].error.bias, 0.0);
  EXPECT_EQ(r[3].steps, "k=16+");
  EXPECT_EQ(r[3].top, 0);
  EXPECT_DOUBLE_EQ(r[3].error.mape, 0.0);
}

}  // namespace
}  // namespace servelab
