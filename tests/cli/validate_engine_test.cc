// `servelab validate` on the real CPU engine, through the library: a mixture of experts'
// routing as the engine's MoE layers ran it, step by step, against the simulator's
// routing model. A step decoding one sequence runs exactly its 2 experts of 8, each on
// its one row, and the model expects exactly that; any step of n tokens runs between 2 and
// min(8, 2n).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "driver/config_yaml.h"
#include "engine/engine_setup.h"
#include "sim/validation.h"
#include "sim/validation_report.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(ValidateEngineTest, AMixtureOfExpertsRoutingIsCountedStepByStep) {
  const fs::path dir = fs::temp_directory_path() / ("servelab_validate_engine_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto config = ParseExperiment(
      "name: moe\nseed: 2\nbackend: engine\n"
      "engine: {model_path: moe, create_model: true, kv_cache_gib: 0.01, ignore_eos: true}\n"
      "model: {base: mixtral-8x7b, name: m, hidden_size: 64, num_hidden_layers: 2,\n"
      "        num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 96,\n"
      "        vocab_size: 97, max_position_embeddings: 512}\n"
      "hardware: {gpu: a10}\n"
      "scheduler: {max_num_seqs: 4, max_num_batched_tokens: 16}\n"
      "workload: {num_requests: 12, arrival: {process: poisson, rate: 400},\n"
      "  input_tokens: {dist: uniform, min: 5, max: 40},\n"
      "  output_tokens: {dist: uniform, min: 2, max: 12}}\n",
      (dir / "exp.yaml").string(), dir.string());
  ASSERT_TRUE(config.ok()) << config.status().message();
  auto engine = MakeEngineBackendFactory(*config);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  auto v = ValidateLoad(*config, *engine, (dir / "v").string(), false);
  ASSERT_TRUE(v.ok()) << v.status().message();
  v->label = "r";
  ASSERT_GT(v->steps.size(), 20u);
  int64_t single = 0, batched = 0;
  for (const StepComparison& s : v->steps) {
    ASSERT_TRUE(s.experts_measured.has_value() && s.experts_predicted.has_value());
    const double routed = 2.0 * s.tokens;
    EXPECT_GE(s.experts_measured->run, 2.0) << s.tokens;
    EXPECT_LE(s.experts_measured->run, std::min(8.0, routed)) << s.tokens;
    EXPECT_LE(s.experts_measured->single_row, s.experts_measured->run);
    EXPECT_GE(s.experts_predicted->run, 2.0 - 1e-9) << s.tokens;
    EXPECT_LE(s.experts_predicted->run, 8.0) << s.tokens;
    if (s.decode_only && s.seqs == 1) {
      ++single;
      EXPECT_EQ(s.experts_measured->run, 2.0);
      EXPECT_EQ(s.experts_measured->single_row, 2.0);
      EXPECT_DOUBLE_EQ(s.experts_predicted->run, 2.0);
    }
    batched += s.decode_only && s.seqs > 1 ? 1 : 0;
  }
  EXPECT_GT(single, 0);
  EXPECT_GT(batched, 0);
  const std::string md = ValidationMarkdown("moe", {*v});
  EXPECT_THAT(md, HasSubstr("| r | decode_1 | " + std::to_string(single) +
                                " | 2.00 | 2.00 | +0.0 | 2.00 | 2.00 | +0.0 |\n"));
  EXPECT_THAT(ValidationCsv({*v}), HasSubstr("\nr,routing_experts,mixed,"));
  // The replay on the engine's own step times: its schedule, step for step.
  ASSERT_TRUE(v->replay.has_value());
  EXPECT_TRUE(v->replay->Identical()) << v->replay->Account();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servelab
