// The engine profiler: the grid the scheduler produces, every op the CPU runner times,
// per-layer ops per layer, and the parts of a step never more than the step.
#include "engine/profiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/op.h"
#include "driver/config_yaml.h"
#include "engine/engine_setup.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A quick profile of the small model: no warm-up, `repeats` passes, contexts up to 40.
ProfileOptions Quick(int32_t repeats) {
  ProfileOptions options;
  options.warmup = 0;
  options.warmup_ms = 0;
  options.repeats = repeats;
  options.max_context = 40;
  return options;
}

class ProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("servelab_profiler_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  ExperimentConfig Config(const std::string& backend = "engine", const std::string& kv_gib = "0.01") {
    auto c = ParseExperiment(
        "name: p\nbackend: " + backend + "\n"
        "engine: {model_path: model, create_model: true, kv_cache_gib: " + kv_gib + "}\n"
        "model: {base: llama-3-8b, name: t, hidden_size: 64, num_hidden_layers: 2,\n"
        "        num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 128,\n"
        "        vocab_size: 97, max_position_embeddings: 512}\n"
        "hardware: {gpu: a10}\n"
        "scheduler: {max_num_seqs: 4, max_num_batched_tokens: 8}\n",
        (dir_ / "exp.yaml").string(), dir_.string());
    EXPECT_TRUE(c.ok()) << c.status().message();
    return *c;
  }

  fs::path dir_;
};

TEST_F(ProfilerTest, TimesEveryOpOverTheSchedulersGrid) {
  ProfileOptions options = Quick(1);  // each row is then one run's time, so a step's parts add up
  auto rows = ProfileEngine(Config(), options);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  // Prefill chunks 1, 2, 3, 4, 6, 8 (the scheduler's 8-token budget) at context 0 (128
  // is past max_context); decodes of 1, 2, 3, 4 sequences (max_num_seqs) at context 15.
  std::set<std::tuple<int64_t, int64_t, int64_t>> steps;
  std::map<std::tuple<int64_t, int64_t, int64_t>, double> parts, whole;
  int64_t after_prefill = 0;
  for (const ProfileRow& r : *rows) {
    EXPECT_EQ(r.device, "cpu");
    EXPECT_EQ(r.shape.hidden_size, 64);
    EXPECT_EQ(r.shape.num_hidden_layers, 2);
    EXPECT_EQ(r.repeats, 1);
    EXPECT_EQ(r.tp, 1);
    // One run: its time is the median, p10 and p90 alike.
    EXPECT_EQ(r.p10_ms, r.median_ms) << r.op;
    EXPECT_EQ(r.p90_ms, r.median_ms) << r.op;
    // The CPU runner has no graphs: every row recorded as run op by op.
    EXPECT_TRUE(r.GraphRecorded()) << r.op;
    EXPECT_EQ(r.graph_rows, 0) << r.op;
    EXPECT_EQ(r.graph_context, 0) << r.op;
    const auto key = std::make_tuple(r.tokens, r.batch, r.context);
    if (r.op == kStepAfterPrefill) {  // ProfilerTest.DecodesAfterAPrefillChunkAreTimedOneByOne
      ++after_prefill;
      continue;
    }
    EXPECT_EQ(r.after_prefill, 0);
    EXPECT_EQ(r.prefill_before, 0);
    if (r.op == "step") {
      steps.insert(key);
      whole[key] = r.median_ms;
      continue;
    }
    const auto op = OpByName(r.op);
    ASSERT_TRUE(op.has_value()) << r.op;
    parts[key] += r.median_ms * (InfoOf(*op).scope == OpScope::kPerLayer ? 2 : 1);
  }
  const std::set<std::tuple<int64_t, int64_t, int64_t>> expected = {
      {1, 1, 0}, {2, 1, 0}, {3, 1, 0}, {4, 1, 0}, {6, 1, 0}, {8, 1, 0},
      {1, 1, 15}, {2, 2, 15}, {3, 3, 15}, {4, 4, 15}};
  EXPECT_EQ(steps, expected);
  // Every op of the runner's step but the all-reduce (one GPU) and the attention it does
  // not run, once per configuration: 14 ops and the step.
  // And 12 decodes after a chunk (the default) for each of 1 and 4 sequences.
  EXPECT_EQ(after_prefill, 2 * 12);
  EXPECT_EQ(rows->size(), expected.size() * 15 + 2 * 12);
  for (const auto& key : expected) {
    EXPECT_GT(parts[key], 0.0);
    // The laps partition the forward pass; sampling is timed inside the step too.
    EXPECT_LE(parts[key], whole[key] * (1 + 1e-9));
  }
  // A step of single tokens runs decode attention; a chunk runs prefill attention.
  int decode = 0, prefill = 0;
  for (const ProfileRow& r : *rows) {
    if (r.op == "attention_decode") {
      ++decode;
      EXPECT_EQ(r.tokens, r.batch);
    }
    if (r.op == "attention_prefill") {
      ++prefill;
      EXPECT_GT(r.tokens, 1);
    }
  }
  EXPECT_EQ(decode, 5);
  EXPECT_EQ(prefill, 5);
}

// After each pass, decodes of 1, 4 and max_batch sequences at the host check's context
// run one by one right after the host check's chunk, each k-th decode its own row
// (kStepAfterPrefill) against the same decode's settled step row; passes only, and
// after_prefill_steps of them (0: none). Progress counts them.
TEST_F(ProfilerTest, DecodesAfterAPrefillChunkAreTimedOneByOne) {
  ProfileOptions options = Quick(3);
  options.settle_ms = 1;
  options.max_context = 100;
  options.after_prefill_steps = 5;
  int64_t done = 0, total = 0;
  options.on_progress = [&](int64_t d, int64_t t) {
    done = d;
    total = t;
  };
  auto c = Config();
  c.scheduler.max_num_seqs = 6;  // batches 1, 4 and 6
  auto rows = ProfileEngine(c, options);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  std::set<std::tuple<int64_t, int64_t, int32_t>> after;  // batch, context, k
  int64_t configurations = 0;
  for (const ProfileRow& r : *rows) {
    configurations += r.op == "step" ? 1 : 0;
    if (r.op != kStepAfterPrefill) continue;
    after.emplace(r.batch, r.context, r.after_prefill);
    EXPECT_EQ(r.tokens, r.batch);
    EXPECT_EQ(r.prefill_before, 8);  // min(128, max_num_batched_tokens)
    EXPECT_EQ(r.repeats, 3);
    EXPECT_GT(r.median_ms, 0);
    EXPECT_LE(r.p10_ms, r.median_ms);
    EXPECT_LE(r.median_ms, r.p90_ms);
    EXPECT_EQ(r.graph_rows, 0);  // the CPU runner: op by op, as its step row
    // Each has its settled row: the same decode in the grid.
    EXPECT_TRUE(std::any_of(rows->begin(), rows->end(), [&](const ProfileRow& s) {
      return s.op == "step" && s.tokens == r.tokens && s.batch == r.batch && s.context == r.context;
    }));
  }
  std::set<std::tuple<int64_t, int64_t, int32_t>> expected;
  for (const int64_t batch : {1, 4, 6}) {
    for (int32_t k = 1; k <= 5; ++k) expected.emplace(batch, 63, k);
  }
  EXPECT_EQ(after, expected);
  EXPECT_EQ(done, total);
  EXPECT_EQ(total, 3 * configurations + 3 * 3 * 5);
  // The profile as written is read back, the rows and their places alike.
  const fs::path csv = dir_ / "after.csv";
  {
    std::ofstream out(csv);
    out << ProfileCsvHeader();
    for (const ProfileRow& r : *rows) WriteProfileRow(out, r);
  }
  auto table = ReadProfile(csv.string());
  ASSERT_TRUE(table.ok()) << table.status().message();
  ASSERT_EQ(table->rows.size(), rows->size());
  for (size_t i = 0; i < rows->size(); ++i) {
    EXPECT_EQ(table->rows[i].op, (*rows)[i].op);
    EXPECT_EQ(table->rows[i].after_prefill, (*rows)[i].after_prefill);
    EXPECT_EQ(table->rows[i].prefill_before, (*rows)[i].prefill_before);
  }
  for (const bool interleave : {true, false}) {
    options.interleave = interleave;
    options.after_prefill_steps = interleave ? 0 : 5;  // none asked; none back to back
    auto none = ProfileEngine(c, options);
    ASSERT_TRUE(none.ok()) << none.status().message();
    EXPECT_TRUE(std::none_of(none->begin(), none->end(),
                             [](const ProfileRow& r) { return r.op == kStepAfterPrefill; }));
  }
  options.after_prefill_steps = 2;
  auto two = ProfileEngine(c, options);
  ASSERT_FALSE(two.ok());
  EXPECT_THAT(two.status().message(), HasSubstr("--after-prefill-steps 2: 0 (none) or at least 3"));
  options.after_prefill_steps = kMaxAfterPrefill + 1;
  auto refused = ProfileEngine(c, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("--after-prefill-steps 1001: must be in [0, 1000]"));
}

// A mixture of experts: its MLP is timed as one op, moe_mlp, in place of the dense MLP's
// three, and the profile rows carry its experts.
TEST_F(ProfilerTest, AMixtureOfExpertsTimesItsMlpAsOneOp) {
  auto c = ParseExperiment(
      "name: p\nbackend: engine\n"
      "engine: {model_path: moe, create_model: true, kv_cache_gib: 0.01}\n"
      "model: {base: mixtral-8x7b, name: m, hidden_size: 64, num_hidden_layers: 2,\n"
      "        num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 96,\n"
      "        vocab_size: 97, max_position_embeddings: 512}\n"
      "hardware: {gpu: a10}\n"
      "scheduler: {max_num_seqs: 2, max_num_batched_tokens: 4}\n",
      (dir_ / "exp.yaml").string(), dir_.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  ProfileOptions options = Quick(1);
  auto rows = ProfileEngine(*c, options);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  std::map<std::tuple<int64_t, int64_t, int64_t>, double> parts, whole;
  int moe = 0;
  for (const ProfileRow& r : *rows) {
    EXPECT_EQ(r.shape.num_experts, 8);
    EXPECT_EQ(r.shape.num_experts_per_tok, 2);
    EXPECT_NE(r.op, "gate_up_proj");
    EXPECT_NE(r.op, "down_proj");
    const auto key = std::make_tuple(r.tokens, r.batch, r.context);
    if (r.op == "step") {
      whole[key] = r.median_ms;
      continue;
    }
    if (r.op == kStepAfterPrefill) continue;  // whole steps too
    moe += r.op == "moe_mlp" ? 1 : 0;
    parts[key] += r.median_ms * (InfoOf(*OpByName(r.op)).scope == OpScope::kPerLayer ? 2 : 1);
  }
  EXPECT_EQ(moe, static_cast<int>(whole.size()));  // one a configuration
  // Each moe_mlp row carries the routing its MoE layers ran: one token runs its 2 experts,
  // each on its one row; n tokens run 2 to min(8, 2n) experts, at most 2n - 2 x (those
  // given two or more rows) of them on one row.
  for (const ProfileRow& r : *rows) {
    if (r.op != "moe_mlp" && r.op != "step") continue;
    const double routed = 2.0 * static_cast<double>(r.tokens);
    EXPECT_GE(r.experts_run, 2.0) << r.tokens;
    EXPECT_LE(r.experts_run, std::min(8.0, routed)) << r.tokens;
    EXPECT_LE(r.single_row_experts, r.experts_run);
    EXPECT_LE(r.single_row_experts + 2 * (r.experts_run - r.single_row_experts), routed + 1e-9);
    if (r.tokens == 1) {
      EXPECT_EQ(r.experts_run, 2.0);
      EXPECT_EQ(r.single_row_experts, 2.0);
    }
  }
  for (const auto& [key, step] : whole) EXPECT_LE(parts[key], step * (1 + 1e-9));
}

// In passes over the grid (the default) or each configuration's runs back to back: the
// same rows, each the median of `repeats` runs.
TEST_F(ProfilerTest, PassesOverTheGridOrRunsBackToBackTimeTheSameRows) {
  std::vector<std::set<std::tuple<std::string, int64_t, int64_t, int64_t>>> keys;
  for (const bool interleave : {true, false}) {
    ProfileOptions options = Quick(3);
    options.interleave = interleave;
    options.after_prefill_steps = 0;  // passes only: DecodesAfterAPrefillChunkAreTimedOneByOne
    int64_t calls = 0, last_total = 0;
    options.on_progress = [&](int64_t done, int64_t total) {
      ++calls;
      EXPECT_EQ(done, calls);
      last_total = total;
    };
    auto rows = ProfileEngine(Config(), options);
    ASSERT_TRUE(rows.ok()) << rows.status().message();
    auto& k = keys.emplace_back();
    for (const ProfileRow& r : *rows) {
      EXPECT_EQ(r.repeats, 3);
      EXPECT_LE(r.p10_ms, r.median_ms);
      EXPECT_LE(r.median_ms, r.p90_ms);
      k.emplace(r.op, r.tokens, r.batch, r.context);
    }
    EXPECT_EQ(calls, last_total);
    // Either way, progress counts the measured runs: 3 of each configuration's.
    std::set<std::tuple<int64_t, int64_t, int64_t>> configurations;
    for (const ProfileRow& r : *rows) {
      if (r.op == "step") configurations.emplace(r.tokens, r.batch, r.context);
    }
    EXPECT_EQ(last_total, 3 * static_cast<int64_t>(configurations.size()));
  }
  EXPECT_EQ(keys[0], keys[1]);
  EXPECT_GT(keys[0].size(), 20u);
}

// The host's drift is taken out of passes over the full grid, and said; not of runs back to
// back (a row's repeats then share their moment), nor of given points or the host check
// (`servelab validate` times those to see the host's speed, which taking it out would hide).
TEST_F(ProfilerTest, TheHostsDriftIsTakenOutOfPassesOverTheGridOnly) {
  const std::vector<ExperimentConfig> configs = {Config()};
  int64_t step_rows = 0;  // the last profile's
  auto profile = [&](const std::function<void(ProfileOptions&)>& set) {
    ProfileOptions options = Quick(5);  // kMinSpreadRepeats: the spread is said
    options.settle_ms = 0;
    options.after_prefill_steps = 3;
    options.drift_window = 5;
    set(options);
    ProfileDrift drift;
    drift.window = -1;
    auto rows = ProfileEngines(configs, options, &drift);
    EXPECT_TRUE(rows.ok()) << rows.status().message();
    step_rows = 0;
    if (rows.ok()) {
      for (const ProfileRow& r : rows->front()) {
        step_rows += r.op == "step" ? 1 : 0;
        EXPECT_GT(r.p10_ms, 0) << r.op;
        EXPECT_LE(r.p10_ms, r.median_ms) << r.op;
        EXPECT_LE(r.median_ms, r.p90_ms) << r.op;
      }
    }
    return drift;
  };
  const ProfileDrift passes = profile([](ProfileOptions&) {});
  EXPECT_EQ(passes.window, 5);
  ASSERT_EQ(passes.before.size(), 1u);
  EXPECT_EQ(passes.before[0].rows, step_rows);  // every whole step's, before
  EXPECT_GT(step_rows, 5);
  EXPECT_GT(passes.p10, 0);
  EXPECT_LE(passes.p10, passes.p50);
  EXPECT_LE(passes.p50, passes.p90);
  for (const auto& set : std::vector<std::function<void(ProfileOptions&)>>{
           [](ProfileOptions& o) { o.interleave = false; }, [](ProfileOptions& o) { o.drift_window = 0; },
           [](ProfileOptions& o) { o.host_check = true; },
           [](ProfileOptions& o) { o.points = {ProfilePoint{true, 2, 15}, ProfilePoint{false, 8, 0}}; }}) {
    const ProfileDrift none = profile(set);
    EXPECT_EQ(none.window, 0);
    EXPECT_TRUE(none.before.empty());
    EXPECT_EQ(none.p50, 1.0);
  }
}

// Several experiments profiled together: each gets the rows it gets alone, with its own
// shape; in passes, every pass runs over each experiment's grid in turn (a host changing
// speed during the profile then changes every experiment's rows alike); back to back,
// each experiment's configurations run after the last one's.
TEST_F(ProfilerTest, SeveralExperimentsTogetherEachPassOverEveryGrid) {
  ExperimentConfig wide = Config();
  ExperimentConfig narrow = Config();
  narrow.model.hidden_size = 32;
  narrow.model.intermediate_size = 64;
  narrow.engine.model_path = (dir_ / "narrow").string();
  const std::vector<ExperimentConfig> configs = {wide, narrow};
  auto keys = [](const std::vector<ProfileRow>& rows) {
    std::set<std::tuple<std::string, int64_t, int64_t, int64_t>> k;
    for (const ProfileRow& r : rows) k.emplace(r.op, r.tokens, r.batch, r.context);
    return k;
  };
  for (const bool interleave : {true, false}) {
    ProfileOptions options = Quick(3);
    options.settle_ms = 0;
    options.interleave = interleave;
    options.after_prefill_steps = 0;  // passes only: DecodesAfterAPrefillChunkAreTimedOneByOne
    std::vector<std::pair<size_t, std::tuple<bool, int32_t, int32_t>>> order;
    options.on_measure = [&](size_t experiment, const ProfilePoint& c) {
      order.emplace_back(experiment, std::make_tuple(c.decode, c.tokens, c.context));
    };
    int64_t last_total = 0;
    options.on_progress = [&](int64_t, int64_t total) { last_total = total; };
    auto together = ProfileEngines(configs, options);
    ASSERT_TRUE(together.ok()) << together.status().message();
    ASSERT_EQ(together->size(), 2u);
    for (const ProfileRow& r : (*together)[0]) EXPECT_EQ(r.shape.hidden_size, 64);
    for (const ProfileRow& r : (*together)[1]) EXPECT_EQ(r.shape.hidden_size, 32);
    options.on_measure = nullptr;
    options.on_progress = nullptr;
    auto alone = ProfileEngine(narrow, options);
    ASSERT_TRUE(alone.ok()) << alone.status().message();
    EXPECT_EQ(keys((*together)[1]), keys(*alone));
    EXPECT_EQ(keys((*together)[0]), keys((*together)[1]));  // the same scheduler limits

    // 10 configurations each (TimesEveryOpOverTheSchedulersGrid), 3 runs of each.
    ASSERT_EQ(order.size(), 60u);
    EXPECT_EQ(last_total, 60);
    if (interleave) {
      // Pass p: experiment 0's grid, then experiment 1's, in the same grid order.
      for (size_t i = 0; i < order.size(); ++i) {
        EXPECT_EQ(order[i].first, (i / 10) % 2) << i;
        EXPECT_EQ(order[i].second, order[i % 10].second) << i;
      }
    } else {
      // Each configuration's 3 runs back to back, experiment 0's before experiment 1's.
      for (size_t i = 0; i < order.size(); ++i) {
        EXPECT_EQ(order[i].first, i / 30) << i;
        EXPECT_EQ(order[i].second, order[i - i % 3].second) << i;
      }
    }
  }
  // A bad experiment among them is said before anything is measured.
  ProfileOptions options;
  int64_t measured = 0;
  options.on_progress = [&](int64_t, int64_t) { ++measured; };
  const std::vector<ExperimentConfig> with_sim = {wide, Config("sim")};
  auto bad = ProfileEngines(with_sim, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().IsBadInput());
  EXPECT_THAT(bad.status().message(), HasSubstr("profile needs an engine experiment"));
  EXPECT_EQ(measured, 0);
  auto none = ProfileEngines({}, options);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("profile: 0 experiments: from 1 to 16 at once"));
}

// Given points, or the host check's, those configurations are timed, in their order, each
// as the grid's are.
TEST_F(ProfilerTest, TimesTheGivenPointsOrTheHostChecks) {
  ProfileOptions options = Quick(2);
  options.points = {{true, 3, 20}, {false, 5, 7}, {true, 1, 0}};
  auto rows = ProfileEngine(Config(), options);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  std::vector<std::tuple<int64_t, int64_t, int64_t>> steps;
  for (const ProfileRow& r : *rows) {
    if (r.op == "step") steps.emplace_back(r.tokens, r.batch, r.context);
  }
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> given = {{3, 3, 20}, {5, 1, 7}, {1, 1, 0}};
  EXPECT_EQ(steps, given);

  // The host check's: a chunk of max_num_batched_tokens (8, under 128) from 0, a decode of
  // max_num_seqs (4) at context 15 (255 and 63 are past max_context 40), one of one at 15.
  options.points.clear();
  options.host_check = true;
  rows = ProfileEngine(Config(), options);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  steps.clear();
  for (const ProfileRow& r : *rows) {
    if (r.op == "step") steps.emplace_back(r.tokens, r.batch, r.context);
  }
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> check = {{8, 1, 0}, {4, 4, 15}, {1, 1, 15}};
  EXPECT_EQ(steps, check);

  // Outside the experiment's limits, or its KV pool: said, naming the step.
  for (const ProfilePoint& bad : {ProfilePoint{true, 5, 15}, ProfilePoint{false, 9, 0},
                                  ProfilePoint{false, 8, 33}, ProfilePoint{true, 0, 15}}) {
    options.points = {bad};
    auto r = ProfileEngine(Config(), options);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsBadInput());
    EXPECT_THAT(r.status().message(), HasSubstr("is outside the experiment's limits (8 tokens a "
                                                "chunk, 4 sequences, context 40)"));
  }
  options.max_context = 0;  // the model's 512 positions; 0.5 MiB of KV holds 1,024 tokens
  options.points = {{true, 4, 500}};
  auto pool = ProfileEngine(Config("engine", "0.00049"), options);
  ASSERT_FALSE(pool.ok());
  EXPECT_THAT(pool.status().message(),
              HasSubstr("a decode of 4 sequences after 500 cached does not fit the KV pool"));
  // The host check's own steps are halved to fit instead: a pool of 0.2 MiB holds about
  // 400 tokens (26 blocks of 16); a decode of 4 at context 255 needs 64 blocks, of 2 32,
  // of 1 16.
  options.points.clear();
  options.host_check = true;
  auto shrunk = ProfileEngine(Config("engine", "0.0002"), options);
  ASSERT_TRUE(shrunk.ok()) << shrunk.status().message();
  steps.clear();
  for (const ProfileRow& r : *shrunk) {
    if (r.op == "step") steps.emplace_back(r.tokens, r.batch, r.context);
  }
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0], std::make_tuple(int64_t{8}, int64_t{1}, int64_t{0}));
  EXPECT_EQ(steps[1], std::make_tuple(int64_t{1}, int64_t{1}, int64_t{255}));
  EXPECT_EQ(steps[2], std::make_tuple(int64_t{1}, int64_t{1}, int64_t{63}));

  // TimeSteps: the whole steps with their configurations, which tell a decode of one
  // sequence from a chunk of one token (their rows cannot: tokens 1, batch 1).
  options.host_check = false;
  options.max_context = 40;
  options.points = {{false, 1, 0}, {true, 1, 15}, {true, 2, 15}};
  auto timed = TimeSteps(Config(), options);
  ASSERT_TRUE(timed.ok()) << timed.status().message();
  ASSERT_EQ(timed->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*timed)[i].point.decode, options.points[i].decode) << i;
    EXPECT_EQ((*timed)[i].point.tokens, options.points[i].tokens) << i;
    EXPECT_EQ((*timed)[i].point.context, options.points[i].context) << i;
    EXPECT_GT((*timed)[i].median_s, 0.0) << i;
  }
}

// A model already loaded is what TimeSteps and the engine's backends run: its weights, not
// a copy read again (validate's host check times the weights its engine runs). With the
// model folder gone, loading fails; the loaded model still times and serves, and
// WithKvBlocks gives its runners a pool of exactly that many blocks.
TEST_F(ProfilerTest, ALoadedModelIsTimedAndServedWithoutReadingItAgain) {
  const ExperimentConfig config = Config();
  auto model = EngineModel::Load(config);
  ASSERT_TRUE(model.ok()) << model.status().message();
  fs::remove_all(config.engine.model_path);
  ExperimentConfig unwritable = config;  // so that nothing writes the model back either
  unwritable.engine.create_model = false;
  ProfileOptions options = Quick(1);
  options.settle_ms = 0;
  options.points = {{true, 2, 15}};
  auto again = TimeSteps(unwritable, options);
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.status().message(), HasSubstr("model"));
  auto timed = TimeSteps(unwritable, options, *model);
  ASSERT_TRUE(timed.ok()) << timed.status().message();
  ASSERT_EQ(timed->size(), 1u);
  EXPECT_GT(timed->front().median_s, 0.0);

  auto reread = MakeEngineBackendFactory(unwritable);
  ASSERT_TRUE(reread.ok()) << reread.status().message();
  EXPECT_FALSE((*reread)(0).ok());
  auto factory = MakeEngineBackendFactory(unwritable, *model);
  ASSERT_TRUE(factory.ok()) << factory.status().message();
  auto backend = (*factory)(0);
  ASSERT_TRUE(backend.ok()) << backend.status().message();

  auto runner = (*model)->MakeRunner();
  ASSERT_TRUE(runner.ok()) << runner.status().message();
  const int32_t blocks = (*runner)->Capacity().num_gpu_blocks;
  ASSERT_GT(blocks, 7);
  auto pinned = (*model)->WithKvBlocks(blocks - 7)->MakeRunner();
  ASSERT_TRUE(pinned.ok()) << pinned.status().message();
  EXPECT_EQ((*pinned)->Capacity().num_gpu_blocks, blocks - 7);
  EXPECT_EQ((*(*model)->MakeRunner())->Capacity().num_gpu_blocks, blocks);  // the original keeps its pool
}

// The host check's steps: a chunk, then decodes at the grid's contexts, clamped to the
// served one.
TEST(HostCheckPointsTest, AComputeBoundStepThenTwoDecodes) {
  auto key = [](const std::vector<ProfilePoint>& points) {
    std::vector<std::tuple<bool, int32_t, int32_t>> k;
    for (const ProfilePoint& p : points) k.emplace_back(p.decode, p.tokens, p.context);
    return k;
  };
  using K = std::vector<std::tuple<bool, int32_t, int32_t>>;
  EXPECT_EQ(key(HostCheckPoints(512, 16, 2048)), (K{{false, 128, 0}, {true, 16, 255}, {true, 1, 63}}));
  EXPECT_EQ(key(HostCheckPoints(512, 16, 200)), (K{{false, 128, 0}, {true, 16, 63}, {true, 1, 63}}));
  EXPECT_EQ(key(HostCheckPoints(64, 4, 64)), (K{{false, 64, 0}, {true, 4, 63}, {true, 1, 63}}));
  EXPECT_EQ(key(HostCheckPoints(64, 4, 63)), (K{{false, 63, 0}, {true, 4, 15}, {true, 1, 15}}));
  EXPECT_EQ(key(HostCheckPoints(8, 1, 10)), (K{{false, 8, 0}, {true, 1, 9}, {true, 1, 9}}));
}

TEST_F(ProfilerTest, BadInputIsSaid) {
  ProfileOptions options;
  auto sim = ProfileEngine(Config("sim"), options);
  ASSERT_FALSE(sim.ok());
  EXPECT_THAT(sim.status().message(), HasSubstr("profile needs an engine experiment"));
  // Each option out of its range, named by its flag; sizes past the scheduler's limits
  // (max_num_seqs 4, max_num_batched_tokens 8).
  struct Case {
    std::function<void(ProfileOptions&)> set;
    std::string said;
  };
  const std::vector<Case> cases = {
      {[](ProfileOptions& o) { o.repeats = 0; }, "--repeats 0: must be in [1, 100000] runs"},
      {[](ProfileOptions& o) { o.repeats = 100001; }, "--repeats 100001: must be in [1, 100000]"},
      {[](ProfileOptions& o) { o.warmup = -1; }, "--warmup -1: must be in [0, 1000000]"},
      {[](ProfileOptions& o) { o.warmup_ms = std::nan(""); }, "--warmup-ms nan: must be in [0, 60000]"},
      {[](ProfileOptions& o) { o.settle_ms = -1; }, "--settle-ms -1: must be in [0, 60000]"},
      {[](ProfileOptions& o) { o.settle_ms = 60001; }, "--settle-ms 60001: must be in [0, 60000]"},
      {[](ProfileOptions& o) { o.settle_ms = std::nan(""); }, "--settle-ms nan: must be in [0, 60000]"},
      {[](ProfileOptions& o) { o.drift_window = 2; }, "--drift-window 2: 0 (none) or at least 3"},
      {[](ProfileOptions& o) { o.drift_window = -1; }, "--drift-window -1: must be in [0, 1001]"},
      {[](ProfileOptions& o) { o.drift_window = 1002; }, "--drift-window 1002: must be in [0, 1001]"},
      {[](ProfileOptions& o) { o.max_tokens = -1; }, "--max-tokens -1: must be in [0, "},
      {[](ProfileOptions& o) { o.max_context = -5; }, "--max-context -5: must be in [0, "},
      {[](ProfileOptions& o) { o.max_batch = 5; }, "--max-batch 5: above "},
      {[](ProfileOptions& o) { o.max_batch = 5; }, "exp.yaml:8: scheduler.max_num_seqs = 4"},
      {[](ProfileOptions& o) { o.max_tokens = 2000000000; }, "--max-tokens 2000000000: above "},
      {[](ProfileOptions& o) { o.max_tokens = 9; }, "exp.yaml:8: scheduler.max_num_batched_tokens = 8"},
  };
  for (const Case& c : cases) {
    ProfileOptions bad;
    c.set(bad);
    auto r = ProfileEngine(Config(), bad);
    ASSERT_FALSE(r.ok()) << c.said;
    EXPECT_TRUE(r.status().IsBadInput()) << c.said;
    EXPECT_THAT(r.status().message(), HasSubstr(c.said));
  }
  // At the limits themselves: accepted.
  options.max_batch = 4;
  options.max_tokens = 8;
  options.max_context = 20;
  options.repeats = 1;
  options.warmup = 0;
  options.warmup_ms = 0;
  EXPECT_TRUE(ProfileEngine(Config(), options).ok());
}

// Whole runs of the last one's time within the budget: a 1.7 ms decode settles for 11
// runs in 20 ms, a 300 ms chunk for none, nor does anything with no budget or no time.
// Decodes' sequences start past every block a prefill chunk of the grid writes (a chunk of
// 64 after 128 cached: 12 blocks of 16), when the pool holds them there; chunks start at 0.
TEST(FirstBlockTest, DecodesPastThePrefillChunksBlocks) {
  const std::vector<ProfilePoint> grid = {{false, 64, 128}, {false, 16, 0}, {true, 4, 63}, {true, 2, 15}};
  EXPECT_EQ(FirstBlock(grid, grid[0], 16, 1000), 0);
  EXPECT_EQ(FirstBlock(grid, grid[2], 16, 1000), 12);
  EXPECT_EQ(FirstBlock(grid, grid[2], 16, 12 + 4 * 4), 12);  // 4 sequences of 4 blocks fit
  EXPECT_EQ(FirstBlock(grid, grid[2], 16, 12 + 4 * 4 - 1), 0);  // one block short: from 0
  EXPECT_EQ(FirstBlock(grid, grid[3], 16, 14), 12);
  const std::vector<ProfilePoint> decodes = {{true, 4, 63}};
  EXPECT_EQ(FirstBlock(decodes, decodes[0], 16, 1000), 0);  // no chunk: nothing to avoid
}

TEST(SettleRunsTest, WholeRunsWithinTheBudget) {
  EXPECT_EQ(SettleRuns(20, 0.0017), 11);
  EXPECT_EQ(SettleRuns(20, 0.0045), 4);
  EXPECT_EQ(SettleRuns(20, 0.019), 1);
  EXPECT_EQ(SettleRuns(20, 0.0201), 0);  // longer than the budget
  EXPECT_EQ(SettleRuns(20, 0.3), 0);
  EXPECT_EQ(SettleRuns(0, 0.0017), 0);
  EXPECT_EQ(SettleRuns(20, 0), 0);       // never run yet
  EXPECT_EQ(SettleRuns(60000, 1e-12), 1000000);  // capped
}

}  // namespace
}  // namespace servelab
