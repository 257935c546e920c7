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
#include "engine/idle_runners.h"
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

// Forwards to a CPU runner, keeping what each Execute was given.
class RecordingRunner final : public ModelRunner {
 public:
  struct Step {
    std::vector<int64_t> ids;
    std::vector<int32_t> chunks, contexts;
    std::vector<std::vector<int32_t>> blocks;
    int32_t emitting = 0;
    bool prompts_known = true;  // the token store held every seq's ids
  };
  explicit RecordingRunner(std::unique_ptr<ModelRunner> inner, bool first_shapes_cost_more = false)
      : inner_(std::move(inner)), first_shapes_cost_more_(first_shapes_cost_more) {}
  std::string_view Name() const override { return inner_->Name(); }
  bool FirstShapesCostMore() const override { return first_shapes_cost_more_; }
  const ModelConfig& Config() const override { return inner_->Config(); }
  KvCapacity Capacity() const override { return inner_->Capacity(); }
  void SwapOut(std::span<const BlockCopy> copies) override { inner_->SwapOut(copies); }
  void SwapIn(std::span<const BlockCopy> copies) override { inner_->SwapIn(copies); }
  Status Execute(const StepPlan& plan, const TokenStore& tokens, std::vector<float>& logits) override {
    Step& step = steps->emplace_back();
    for (const ScheduledRequest& s : plan.seqs) {
      step.ids.push_back(s.request->id);
      step.chunks.push_back(s.num_new_tokens);
      step.contexts.push_back(s.num_computed_tokens);
      step.blocks.push_back(s.request->block_table);
      step.prompts_known = step.prompts_known && tokens.Contains(s.request->id);
    }
    step.emitting = plan.num_emitting;
    return inner_->Execute(plan, tokens, logits);
  }
  std::shared_ptr<std::vector<Step>> steps = std::make_shared<std::vector<Step>>();

 private:
  std::unique_ptr<ModelRunner> inner_;
  bool first_shapes_cost_more_ = false;
};

std::vector<int32_t> Blocks(int32_t first, int32_t count) {
  std::vector<int32_t> blocks(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) blocks[static_cast<size_t>(i)] = first + i;
  return blocks;
}

// The steps EngineBackend::WarmUp(24, 6) executes on `runner`; nothing is left in the
// token store after.
std::vector<RecordingRunner::Step> WarmUpSteps(std::unique_ptr<ModelRunner> runner,
                                               bool first_shapes_cost_more = false) {
  auto recording = std::make_unique<RecordingRunner>(std::move(runner), first_shapes_cost_more);
  const auto steps = recording->steps;
  EngineBackend backend(std::move(recording), EngineBackendOptions{});
  const Status warmed = backend.WarmUp(24, 6);
  EXPECT_TRUE(warmed.ok()) << warmed.message();
  EXPECT_EQ(backend.Tokens().NumRequests(), 0u);
  return *steps;
}

// The warm-up: one sequence's chunk of the token budget, then max_num_seqs sequences
// sharing it, every one emitting; ids below 0.
TEST_F(EngineBackendTest, WarmUpRunsTheWidestStepsAndForgetsThem) {
  const auto steps = WarmUpSteps(testing::MakeRunner(weights_, 200, 4));
  ASSERT_EQ(steps.size(), 2u);
  const RecordingRunner::Step& one = steps[0];
  EXPECT_EQ(one.ids, (std::vector<int64_t>{-1}));
  EXPECT_EQ(one.chunks, (std::vector<int32_t>{24}));
  EXPECT_EQ(one.contexts, (std::vector<int32_t>{0}));
  EXPECT_EQ(one.blocks, (std::vector<std::vector<int32_t>>{Blocks(0, 6)}));
  EXPECT_EQ(one.emitting, 1);
  EXPECT_TRUE(one.prompts_known);
  const RecordingRunner::Step& many = steps[1];
  EXPECT_EQ(many.ids, (std::vector<int64_t>{-6, -5, -4, -3, -2, -1}));
  EXPECT_EQ(many.chunks, std::vector<int32_t>(6, 4));
  for (int32_t i = 0; i < 6; ++i) EXPECT_EQ(many.blocks[static_cast<size_t>(i)], Blocks(i, 1));
  EXPECT_EQ(many.emitting, 6);
  EXPECT_TRUE(many.prompts_known);
}

// A runner whose first steps of a shape cost more (the CUDA runner's) is also given a
// ladder after the widest steps, each about 1/8 above the last: one sequence's chunks of
// 2 to 16 tokens, then 18, 20, 22, 24 (the budget); then 2 to 6 sequences (max_num_seqs)
// of 2 tokens each.
TEST_F(EngineBackendTest, WarmUpClimbsALadderOfShapesWhereFirstShapesCostMore) {
  const auto steps = WarmUpSteps(testing::MakeRunner(weights_, 200, 4), /*first_shapes_cost_more=*/true);
  std::vector<std::vector<int32_t>> chunks;
  for (const RecordingRunner::Step& s : steps) chunks.push_back(s.chunks);
  std::vector<std::vector<int32_t>> want = {{24}, std::vector<int32_t>(6, 4)};
  for (int32_t c : {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 22, 24}) want.push_back({c});
  for (int32_t seqs = 2; seqs <= 6; ++seqs) want.push_back(std::vector<int32_t>(static_cast<size_t>(seqs), 2));
  EXPECT_EQ(chunks, want);
  for (const RecordingRunner::Step& s : steps) {
    for (int64_t id : s.ids) EXPECT_LT(id, 0);
    EXPECT_EQ(s.emitting, static_cast<int32_t>(s.ids.size()));
  }
}

// A pool of 5 blocks of 4 holds a chunk of 20, and 5 sequences of 4; a model whose
// sliding window serves contexts of 4 takes the budget of 24 as 6 sequences of 4, once
// (a longer chunk would fail the runner).
TEST_F(EngineBackendTest, WarmUpKeepsToThePoolAndTheContextServed) {
  const auto pooled = WarmUpSteps(testing::MakeRunner(weights_, 5, 4));
  ASSERT_EQ(pooled.size(), 2u);
  EXPECT_EQ(pooled[0].chunks, (std::vector<int32_t>{20}));
  EXPECT_EQ(pooled[0].blocks, (std::vector<std::vector<int32_t>>{Blocks(0, 5)}));
  EXPECT_EQ(pooled[1].chunks, std::vector<int32_t>(5, 4));
  EXPECT_EQ(pooled[1].blocks.back(), Blocks(4, 1));
  EXPECT_EQ(pooled[1].emitting, 5);
  TempDir dir;
  ModelConfig config = testing::TinyConfig(2, ModelFamily::kMistral);
  config.sliding_window = 4;
  const auto windowed = WarmUpSteps(testing::MakeRunner(testing::WriteAndLoad(config, dir.path())));
  ASSERT_EQ(windowed.size(), 1u);
  EXPECT_EQ(windowed[0].chunks, std::vector<int32_t>(6, 4));
  EXPECT_EQ(windowed[0].emitting, 6);
}

// Requests sampled at temperature with `seed`, sharing prefixes, with a hash prefix cache.
RunOptions SampledWithPrefixes(uint64_t seed) {
  RunOptions options;
  options.backend.ignore_eos = true;
  options.backend.sampling = SamplingParams{0.8f, 20, 0.95f, 0};
  options.backend.seed = seed;
  options.shared_prefixes = true;
  options.prefix_cache = PrefixCacheType::kHash;
  return options;
}

// What the warm-up wrote changes nothing served after it: sampled tokens are those of a
// cold engine's, with sampling at temperature, with a prefix cache (its blocks are the
// warm-up's), and with swap preemption.
TEST_F(EngineBackendTest, WarmUpChangesNoSampledToken) {
  RunOptions cold = SampledWithPrefixes(99);
  const Outcome reference = Drive(weights_, cold);
  EXPECT_GT(reference.cached_tokens, 0);  // warmed, the cache's blocks are ones the warm-up wrote
  RunOptions warm = cold;
  warm.warm_up = true;
  EXPECT_EQ(Drive(weights_, warm).tokens, reference.tokens);
  cold.num_blocks = warm.num_blocks = 24;
  cold.num_cpu_blocks = warm.num_cpu_blocks = 64;
  cold.preemption = warm.preemption = PreemptionMode::kSwap;
  const Outcome swapped = Drive(weights_, warm);
  EXPECT_GT(swapped.swap_steps, 0);
  EXPECT_EQ(swapped.tokens, Drive(weights_, cold).tokens);
  EXPECT_EQ(swapped.tokens_left, 0u);
}

// A runner kept from run to run (engine/idle_runners.h, as validate's loads share one):
// the second run on it, its KV and swap pools holding the first run's blocks, samples
// what a fresh runner does, with a prefix cache and with swap preemption.
TEST_F(EngineBackendTest, AKeptRunnerChangesNoSampledToken) {
  RunOptions options = SampledWithPrefixes(7);
  options.num_blocks = 24;
  options.num_cpu_blocks = 64;
  options.preemption = PreemptionMode::kSwap;
  const Outcome fresh = Drive(weights_, options);
  EXPECT_GT(fresh.swap_steps, 0);
  EXPECT_GT(fresh.cached_tokens, 0);
  auto idle = IdleRunners::Create();
  int made = 0;
  const IdleRunners::Make make = [&]() -> StatusOr<std::unique_ptr<ModelRunner>> {
    ++made;
    return std::unique_ptr<ModelRunner>(testing::MakeRunner(weights_, 24, 4, 64));
  };
  RunOptions other = options;  // a first run of other tokens
  other.backend.seed = 8;
  auto lent = idle->Lend(0, make);
  ASSERT_TRUE(lent.ok());
  const Outcome first = testing::DriveEngine(std::move(lent).value(), other);
  EXPECT_NE(first.tokens, fresh.tokens);
  auto again = idle->Lend(0, make);
  ASSERT_TRUE(again.ok());
  const Outcome kept = testing::DriveEngine(std::move(again).value(), options);
  EXPECT_EQ(made, 1);
  EXPECT_GT(kept.swap_steps, 0);
  EXPECT_EQ(kept.tokens, fresh.tokens);
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
