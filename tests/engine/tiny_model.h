#pragma once
// Engine test support: tiny random models written with WriteRandomModel and loaded, hand-
// built step plans, a FIFO policy (engine tests link no policies), and a logits comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <vector>

#include "engine/cpu_model_runner.h"
#include "engine/model_weights.h"
#include "engine/random_model.h"

namespace servelab::testing {

// 2 layers, hidden 64, 4 heads of 16, `kv_heads` KV heads, intermediate 128, vocab 97.
inline ModelConfig TinyConfig(int32_t kv_heads = 2, ModelFamily family = ModelFamily::kLlama) {
  ModelConfig c;
  c.family = family;
  c.spec.name = "tiny";
  c.spec.hidden_size = 64;
  c.spec.num_hidden_layers = 2;
  c.spec.num_attention_heads = 4;
  c.spec.num_key_value_heads = kv_heads;
  c.spec.head_dim = 16;
  c.spec.intermediate_size = 128;
  c.spec.vocab_size = 97;
  c.spec.max_position_embeddings = 1024;
  c.spec.rms_norm_eps = 1e-6;
  c.spec.attention_bias = family == ModelFamily::kQwen2;
  c.eos_token_ids = {1};
  return c;
}

// init_std 0.2 (not HF's 0.02) so attention scores spread: a wrong position or a wrong
// KV row changes the logits visibly.
inline std::shared_ptr<const ModelWeights> WriteAndLoad(const ModelConfig& config,
                                                        const std::filesystem::path& dir,
                                                        uint64_t seed = 11, int32_t shards = 1,
                                                        double init_std = 0.2) {
  RandomModelOptions options{config, seed, shards, init_std};
  StatusOr<WrittenModel> written = WriteRandomModel(options, dir);
  EXPECT_TRUE(written.ok()) << written.status().message();
  StatusOr<ModelWeights> weights = LoadModelWeights(dir);
  EXPECT_TRUE(weights.ok()) << weights.status().message();
  if (!weights.ok()) return nullptr;
  return std::make_shared<const ModelWeights>(std::move(*weights));
}

inline std::unique_ptr<CpuModelRunner> MakeRunner(std::shared_ptr<const ModelWeights> weights,
                                                  int32_t num_blocks = 64, int32_t block_size = 4,
                                                  int32_t num_cpu_blocks = 0) {
  CpuRunnerOptions options;
  options.block_size = block_size;
  options.num_blocks = num_blocks;
  options.num_cpu_blocks = num_cpu_blocks;
  StatusOr<std::unique_ptr<CpuModelRunner>> runner = CpuModelRunner::Create(weights, options);
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  return runner.ok() ? std::move(*runner) : nullptr;
}

// A request whose KV lives in `blocks` (in order).
inline Request MakeRequest(int64_t id, int32_t prompt_len, std::vector<int32_t> blocks) {
  Request r;
  r.id = id;
  r.prompt_len = prompt_len;
  r.target_output_len = 1;
  r.block_table = std::move(blocks);
  return r;
}

inline ScheduledRequest Seq(Request& r, int32_t computed, int32_t num_new, bool emits) {
  return ScheduledRequest{&r, num_new, computed, emits, false};
}

// Runs one step made of `seqs`; returns its logits [num_emitting, vocab].
inline std::vector<float> RunStep(ModelRunner& runner, const TokenStore& tokens,
                                  std::vector<ScheduledRequest> seqs) {
  StepPlan plan;
  plan.seqs = std::move(seqs);
  for (const ScheduledRequest& s : plan.seqs) plan.num_emitting += s.emits_token ? 1 : 0;
  std::vector<float> logits;
  const Status status = runner.Execute(plan, tokens, logits);
  EXPECT_TRUE(status.ok()) << status.message();
  return logits;
}

// Row `row` of a [rows, vocab] logits array.
inline std::vector<float> Row(const std::vector<float>& logits, int32_t vocab, int32_t row) {
  return {logits.begin() + int64_t{row} * vocab, logits.begin() + int64_t{row + 1} * vocab};
}

// max |a - b| <= rel * max |b|: "relative" to the row's scale (single logits can sit at 0).
template <class A, class B>
::testing::AssertionResult LogitsNear(const std::vector<A>& a, const std::vector<B>& b,
                                      double rel = 1e-4) {
  if (a.size() != b.size() || a.empty()) {
    return ::testing::AssertionFailure() << "sizes " << a.size() << " vs " << b.size();
  }
  double max_diff = 0, scale = 0;
  size_t worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (d > max_diff) max_diff = d, worst = i;
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  if (max_diff <= rel * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max |diff| " << max_diff << " at " << worst << " ("
                                       << a[worst] << " vs " << b[worst] << "), scale " << scale;
}

// max |a - b| over max |b|: LogitsNear's measure, as a number.
template <typename A, typename B>
double LogitsRelError(const std::vector<A>& a, const std::vector<B>& b) {
  double max_diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale > 0 ? max_diff / scale : max_diff;
}

inline int32_t Argmax(const std::vector<float>& row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace servelab::testing
