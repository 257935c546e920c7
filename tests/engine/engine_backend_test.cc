// EngineBackend driven by the real core Scheduler, as the engine driver drives it:
// Schedule -> Execute -> Commit -> OnRequestFinished. Requests generate exactly their
// target with ignore_eos, stop at EOS without it, and preemption (recompute or swap)
// changes no sampled token.
#include "engine/engine_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "core/kv_cache_manager.h"
#include "core/scheduler.h"
#include "tests/engine/engine_drive.h"
#include "tests/engine/test_files.h"
#include "tests/engine/tiny_model.h"

namespace servelab {
namespace {

using ::testing::HasSubstr;
using testing::Outcome;
using testing::RunOptions;
using testing::TempDir;

// The CPU runner of the tiny model with `options`' pools, driven by the scheduler.
Outcome Drive(std::shared_ptr<const ModelWeights> weights, const RunOptions& options) {
  return testing::DriveEngine(
      testing::MakeRunner(weights, options.num_blocks, 4, options.num_cpu_blocks), options);
}

class EngineBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelConfig config = testing::TinyConfig(2);
    config.eos_token_ids = {3, 7, 11, 19, 23, 42, 50, 61, 77, 90};  // ~10% of the vocabulary
    weights_ = testing::WriteAndLoad(config, dir_.path());
  }
  TempDir dir_;
  std::shared_ptr<const ModelWeights> weights_;
};

TEST_F(EngineBackendTest, IgnoreEosGeneratesExactlyTheTargetWithMeasuredTime) {
  RunOptions options;
  options.backend.ignore_eos = true;
  options.backend.sampling.temperature = 1.0f;
  const Outcome out = Drive(weights_, options);
  EXPECT_TRUE(out.elapsed_positive);
  ASSERT_EQ(out.tokens.size(), 8u);
  int32_t eos_seen = 0;
  for (const auto& [id, tokens] : out.tokens) {
    EXPECT_EQ(static_cast<int32_t>(tokens.size()), out.target.at(id)) << id;
    for (int32_t t : tokens) {
      EXPECT_TRUE(t >= 0 && t < 97);
      eos_seen += std::count(weights_->config.eos_token_ids.begin(),
                             weights_->config.eos_token_ids.end(), t) > 0;
    }
  }
  EXPECT_GT(eos_seen, 0);          // EOS was sampled and did not stop anyone
  EXPECT_EQ(out.tokens_left, 0u);  // every finished request's ids were forgotten
}

TEST_F(EngineBackendTest, EosStopsARequestAtItsFirstEos) {
  RunOptions options;
  options.backend.sampling.temperature = 1.0f;
  const Outcome out = Drive(weights_, options);
  const auto& eos = weights_->config.eos_token_ids;
  int32_t stopped_early = 0;
  for (const auto& [id, tokens] : out.tokens) {
    const auto first_eos = std::find_first_of(tokens.begin(), tokens.end(), eos.begin(), eos.end());
    if (first_eos == tokens.end()) {
      EXPECT_EQ(static_cast<int32_t>(tokens.size()), out.target.at(id));
    } else {
      EXPECT_EQ(first_eos + 1, tokens.end()) << id;  // nothing after the first EOS
      stopped_early += static_cast<int32_t>(tokens.size()) < out.target.at(id);
    }
  }
  EXPECT_GT(stopped_early, 0);
}

TEST_F(EngineBackendTest, RecomputePreemptionChangesNoGreedyToken) {
  RunOptions roomy;
  roomy.backend.ignore_eos = true;
  const Outcome reference = Drive(weights_, roomy);
  EXPECT_EQ(reference.preemptions, 0);
  RunOptions tight = roomy;
  tight.num_blocks = 24;  // 96 token slots for up to 6 running requests of up to 60 tokens
  const Outcome preempted = Drive(weights_, tight);
  EXPECT_GT(preempted.preemptions, 0);
  EXPECT_GT(preempted.reprefills, 0);
  EXPECT_EQ(preempted.tokens, reference.tokens);
}

TEST_F(EngineBackendTest, SwapPreemptionChangesNoSampledToken) {
  RunOptions roomy;
  roomy.backend.ignore_eos = true;
  roomy.backend.sampling = SamplingParams{0.8f, 20, 0.95f, 0};
  roomy.backend.seed = 1234;
  const Outcome reference = Drive(weights_, roomy);
  RunOptions tight = roomy;
  tight.num_blocks = 24;
  tight.num_cpu_blocks = 64;
  tight.preemption = PreemptionMode::kSwap;
  const Outcome swapped = Drive(weights_, tight);
  EXPECT_GT(swapped.swap_steps, 0);
  EXPECT_EQ(swapped.tokens, reference.tokens);
}

// Prefix caching on the real engine: requests that share a prefix get the same token
// ids, later ones attend to the blocks the first one computed, and greedy outputs are
// those of the run without a cache, token for token -- with room, and with preemptions
// (recompute, and swap, which copies the shared blocks).
TEST_F(EngineBackendTest, PrefixCachingChangesNoGreedyToken) {
  RunOptions roomy;
  roomy.backend.ignore_eos = true;
  roomy.shared_prefixes = true;
  const Outcome reference = Drive(weights_, roomy);
  EXPECT_EQ(reference.cached_tokens, 0);
  for (const PrefixCacheType type : {PrefixCacheType::kHash, PrefixCacheType::kRadix}) {
    for (const int mode : {0, 1, 2}) {  // roomy, recompute preemption, swap preemption
      SCOPED_TRACE(std::to_string(static_cast<int>(type)) + "/" + std::to_string(mode));
      RunOptions options = roomy;
      options.prefix_cache = type;
      if (mode > 0) options.num_blocks = 24;
      if (mode == 2) {
        options.num_cpu_blocks = 64;
        options.preemption = PreemptionMode::kSwap;
      }
      const Outcome cached = Drive(weights_, options);
      EXPECT_GT(cached.cached_tokens, 0);
      if (mode == 1) {
        EXPECT_GT(cached.preemptions, 0);
      }
      if (mode == 2) {
        EXPECT_GT(cached.swap_steps, 0);
      }
      EXPECT_EQ(cached.tokens, reference.tokens);
    }
  }
}

// The synthesized prompts of requests with equal prefix hashes agree on the identified
// tokens and nowhere else.
TEST(SyntheticPromptTest, SharedPrefixesShareTokenIds) {
  Request a, b;
  a.id = 1;
  b.id = 2;
  a.prompt_len = b.prompt_len = 40;
  for (Request* r : {&a, &b}) {
    r->prefix_block_tokens = 8;
    r->prefix_block_hashes = {5, 6, 7};
    ChainPrefixHashes(r->prefix_block_hashes);
  }
  a.prefix_identified_tokens = 24;
  b.prefix_identified_tokens = 16;
  const auto ta = SyntheticPrompt(9, a, 1000), tb = SyntheticPrompt(9, b, 1000);
  for (int p = 0; p < 16; ++p) EXPECT_EQ(ta[p], tb[p]) << p;
  int differ = 0;
  for (int p = 16; p < 40; ++p) differ += ta[p] != tb[p];
  EXPECT_GE(differ, 20);
  EXPECT_EQ(SyntheticPrompt(9, Request{}, 1000).size(), 0u);
}

TEST_F(EngineBackendTest, ExplicitPromptsAreUsedAndChecked) {
  EngineBackend backend(testing::MakeRunner(weights_), EngineBackendOptions{});
  EXPECT_EQ(backend.Name(), "engine-cpu");
  EXPECT_TRUE(backend.SetPrompt(5, {4, 8, 15, 16}).ok());
  EXPECT_THAT(backend.SetPrompt(5, {1}).message(), HasSubstr("already has a prompt"));
  EXPECT_THAT(backend.SetPrompt(6, {}).message(), HasSubstr("empty prompt"));
  EXPECT_THAT(backend.SetPrompt(6, {1, 97}).message(),
              HasSubstr("prompt token 1 is 97, outside the vocabulary [0, 97)"));
  Request r = testing::MakeRequest(5, 4, {0});
  StepPlan plan;
  plan.seqs = {testing::Seq(r, 0, 4, true)};
  plan.num_emitting = 1;
  auto executed = backend.Execute(plan);
  ASSERT_TRUE(executed.ok()) << executed.status().message();
  const StepResult& result = *executed;
  ASSERT_EQ(result.sampled_tokens.size(), 1u);
  const std::span<const int32_t> ids = backend.Tokens().Tokens(5);
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.end()),
            (std::vector<int32_t>{4, 8, 15, 16, result.sampled_tokens[0]}));
  backend.OnRequestFinished(5);
  EXPECT_FALSE(backend.Tokens().Contains(5));
}

TEST_F(EngineBackendTest, SynthesizedPromptsDependOnSeedAndIdOnly) {
  EngineBackendOptions options;
  options.seed = 77;
  EngineBackend a(testing::MakeRunner(weights_), options);
  EngineBackend b(testing::MakeRunner(weights_), options);
  Request r = testing::MakeRequest(9, 12, {5, 6, 7});
  StepPlan plan;
  plan.seqs = {testing::Seq(r, 0, 12, true)};
  plan.num_emitting = 1;
  auto ra = a.Execute(plan), rb = b.Execute(plan);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra->sampled_tokens, rb->sampled_tokens);
  const std::span<const int32_t> ids = a.Tokens().Tokens(9);
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + 12), SyntheticPrompt(77, 9, 12, 97));
}

// A model with a sliding window serves contexts up to the window only: the backend says
// so (the scheduler then rejects longer requests), and a runner asked for more fails the
// step with its message instead of computing something wrong.
TEST(EngineBackendErrorTest, ARunnerFailureFailsTheStep) {
  TempDir dir;
  ModelConfig config = testing::TinyConfig(2, ModelFamily::kMistral);
  config.sliding_window = 4;  // contexts past it are not implemented
  EngineBackend backend(testing::MakeRunner(testing::WriteAndLoad(config, dir.path())),
                        EngineBackendOptions{});
  EXPECT_EQ(backend.MaxModelLen(), 4);
  Request r = testing::MakeRequest(1, 6, {0, 1});
  StepPlan plan;
  plan.seqs = {testing::Seq(r, 0, 6, true)};
  plan.num_emitting = 1;
  const StatusOr<StepResult> result = backend.Execute(plan);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("cpu runner: a context of 6 tokens exceeds "
                                                   "the model's sliding_window 4"));
}

}  // namespace
}  // namespace servelab
