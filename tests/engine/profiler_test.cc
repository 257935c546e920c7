// The engine profiler: the grid the scheduler produces, every op the CPU runner times,
// per-layer ops per layer, and the parts of a step never more than the step.
#include "engine/profiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "core/op.h"
#include "driver/config_yaml.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("servelab_profiler_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  ExperimentConfig Config(const std::string& backend = "engine") {
    auto c = ParseExperiment(
        "name: p\nbackend: " + backend + "\n"
        "engine: {model_path: model, create_model: true, kv_cache_gib: 0.01}\n"
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
  ProfileOptions options;
  options.warmup = 0;
  options.repeats = 1;  // each row is then one run's time, so a step's parts add up
  options.max_context = 40;
  auto rows = ProfileEngine(Config(), options);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  // Prefill chunks 1, 2, 3, 4, 6, 8 (the scheduler's 8-token budget) at context 0 (128
  // is past max_context); decodes of 1, 2, 3, 4 sequences (max_num_seqs) at context 15.
  std::set<std::tuple<int64_t, int64_t, int64_t>> steps;
  std::map<std::tuple<int64_t, int64_t, int64_t>, double> parts, whole;
  for (const ProfileRow& r : *rows) {
    EXPECT_EQ(r.device, "cpu");
    EXPECT_EQ(r.shape.hidden_size, 64);
    EXPECT_EQ(r.shape.num_hidden_layers, 2);
    EXPECT_EQ(r.repeats, 1);
    EXPECT_EQ(r.tp, 1);
    EXPECT_GE(r.median_ms, 0.0);
    const auto key = std::make_tuple(r.tokens, r.batch, r.context);
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
  EXPECT_EQ(rows->size(), expected.size() * 15);
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
  ProfileOptions options;
  options.warmup = 0;
  options.repeats = 1;
  options.max_context = 40;
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
    ProfileOptions options;
    options.warmup = 0;
    options.warmup_ms = 0;
    options.repeats = 3;
    options.max_context = 40;
    options.interleave = interleave;
    int32_t calls = 0, last_total = 0;
    options.on_progress = [&](int32_t done, int32_t total) {
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
    // Interleaved, progress counts the passes (3); back to back, the configurations.
    if (interleave) EXPECT_EQ(last_total, 3);
    if (!interleave) EXPECT_GT(last_total, 3);
  }
  EXPECT_EQ(keys[0], keys[1]);
  EXPECT_GT(keys[0].size(), 20u);
}

TEST_F(ProfilerTest, BadInputIsSaid) {
  ProfileOptions options;
  auto sim = ProfileEngine(Config("sim"), options);
  ASSERT_FALSE(sim.ok());
  EXPECT_THAT(sim.status().message(), HasSubstr("profile needs an engine experiment"));
  options.repeats = 0;
  auto none = ProfileEngine(Config(), options);
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(none.status().IsBadInput());
  EXPECT_THAT(none.status().message(), HasSubstr("repeats >= 1"));
}

}  // namespace
}  // namespace servelab
