// The runners an engine model keeps between uses (engine/idle_runners.h).
#include "engine/idle_runners.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace servelab {
namespace {

// A runner that says which one it is, counts its steps and swaps, keeps the op timer set
// on it, and answers every other call with what no default does.
struct Ledger {
  int made = 0, destroyed = 0;
  std::vector<int> destroyed_before_make;  // per make: runners destroyed before it
};

class FakeRunner final : public ModelRunner {
 public:
  FakeRunner(Ledger& ledger, int id, int32_t blocks) : ledger_(ledger), id_(id) {
    capacity_.num_gpu_blocks = blocks;
    config_.spec.vocab_size = 1000 + id;
  }
  ~FakeRunner() override { ++ledger_.destroyed; }
  std::string_view Name() const override { return "fake"; }
  const ModelConfig& Config() const override { return config_; }
  KvCapacity Capacity() const override { return capacity_; }
  void SwapOut(std::span<const BlockCopy> c) override { swapped_out += static_cast<int>(c.size()); }
  void SwapIn(std::span<const BlockCopy> c) override { swapped_in += static_cast<int>(c.size()); }
  Status Execute(const StepPlan&, const TokenStore&, std::vector<float>& logits) override {
    ++steps;
    logits.assign(3, 1.5f);
    return fail ? Internal("step failed") : Status::Ok();
  }
  bool SamplesOnDevice(const SamplingParams&) const override { return true; }
  Status ExecuteAndSample(const StepPlan&, const TokenStore&, const SamplingParams&,
                          std::span<const double> uniforms, std::vector<int32_t>& ids) override {
    ++steps;
    ids.assign(uniforms.size(), 42);
    return fail ? Internal("step failed") : Status::Ok();
  }
  void SetOpTimer(OpTimer* t) override { timer = t; }
  std::optional<ExpertsRun> LastRouting() const override { return ExpertsRun{3, 1}; }
  std::optional<DecodeGraphRun> LastDecodeGraph() const override { return DecodeGraphRun{8, 512}; }
  bool ProfilesOps() const override { return true; }
  bool FirstShapesCostMore() const override { return true; }
  bool OpTimerAltersSteps() const override { return true; }

  int Id() const { return id_; }
  int steps = 0, swapped_out = 0, swapped_in = 0;
  bool fail = false;
  OpTimer* timer = nullptr;

 private:
  Ledger& ledger_;
  int id_;
  ModelConfig config_;
  KvCapacity capacity_;
};

class NullTimer final : public OpTimer {
 public:
  void Record(Op, double) override {}
};

// `blocks`: the pool a runner made for 0 gets (as settings size it).
IdleRunners::Make Maker(Ledger& ledger, int32_t blocks) {
  return [&ledger, blocks]() -> StatusOr<std::unique_ptr<ModelRunner>> {
    ledger.destroyed_before_make.push_back(ledger.destroyed);
    ++ledger.made;
    return std::unique_ptr<ModelRunner>(new FakeRunner(ledger, ledger.made, blocks));
  };
}

FakeRunner& Fake(const std::unique_ptr<ModelRunner>& lent) {
  return dynamic_cast<FakeRunner&>(dynamic_cast<LentRunner&>(*lent).Runner());
}

TEST(IdleRunnersTest, ARunnerGivenBackIsLentAgainWithItsStateAndWithoutItsTimer) {
  Ledger ledger;
  auto idle = IdleRunners::Create();
  NullTimer timer;
  {
    auto first = idle->Lend(0, Maker(ledger, 40));
    ASSERT_TRUE(first.ok());
    std::vector<float> logits;
    ASSERT_TRUE((*first)->Execute(StepPlan{}, TokenStore{}, logits).ok());  // passed through
    (*first)->SetOpTimer(&timer);
    EXPECT_EQ(Fake(*first).timer, &timer);
    EXPECT_EQ(idle->NumIdle(), 0u);
  }
  EXPECT_EQ(idle->NumIdle(), 1u);
  EXPECT_EQ(ledger.destroyed, 0);
  auto again = idle->Lend(0, Maker(ledger, 40));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(ledger.made, 1);
  EXPECT_EQ(Fake(*again).Id(), 1);
  EXPECT_EQ(Fake(*again).steps, 1);  // the same runner, its step remembered
  EXPECT_EQ(Fake(*again).timer, nullptr);
  EXPECT_EQ((*again)->Capacity().num_gpu_blocks, 40);
}

// A virtual LentRunner did not pass through would answer with ModelRunner's default.
TEST(IdleRunnersTest, ALentRunnerPassesEveryCallThrough) {
  Ledger ledger;
  auto idle = IdleRunners::Create();
  auto lent = idle->Lend(0, Maker(ledger, 40));
  ASSERT_TRUE(lent.ok());
  ModelRunner& r = **lent;
  FakeRunner& fake = Fake(*lent);
  EXPECT_EQ(r.Name(), "fake");
  EXPECT_EQ(&r.Config(), &fake.Config());
  EXPECT_EQ(r.Config().spec.vocab_size, 1001);
  EXPECT_EQ(r.Capacity().num_gpu_blocks, 40);
  const std::vector<BlockCopy> copies(2);
  r.SwapOut(copies);
  r.SwapIn(std::span<const BlockCopy>(copies).first(1));
  EXPECT_EQ(fake.swapped_out, 2);
  EXPECT_EQ(fake.swapped_in, 1);
  std::vector<float> logits;
  ASSERT_TRUE(r.Execute(StepPlan{}, TokenStore{}, logits).ok());
  EXPECT_EQ(logits, std::vector<float>(3, 1.5f));
  EXPECT_TRUE(r.SamplesOnDevice(SamplingParams{}));
  std::vector<int32_t> ids;
  const std::vector<double> uniforms{0.1, 0.2};
  ASSERT_TRUE(r.ExecuteAndSample(StepPlan{}, TokenStore{}, SamplingParams{}, uniforms, ids).ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{42, 42}));
  EXPECT_EQ(fake.steps, 2);
  ASSERT_TRUE(r.LastRouting().has_value());
  EXPECT_EQ(r.LastRouting()->run, 3);
  EXPECT_EQ(r.LastDecodeGraph(), (DecodeGraphRun{8, 512}));
  EXPECT_TRUE(r.ProfilesOps());
  EXPECT_TRUE(r.FirstShapesCostMore());
  EXPECT_TRUE(r.OpTimerAltersSteps());
}

// A CUDA error can stick to a runner: one whose step failed is not lent again.
TEST(IdleRunnersTest, ARunnerWhoseStepFailedIsDestroyedNotKept) {
  Ledger ledger;
  auto idle = IdleRunners::Create();
  for (const bool sample : {false, true}) {
    {
      auto lent = idle->Lend(0, Maker(ledger, 40));
      ASSERT_TRUE(lent.ok());
      Fake(*lent).fail = true;
      std::vector<float> logits;
      std::vector<int32_t> ids;
      const Status step = sample ? (*lent)->ExecuteAndSample(StepPlan{}, TokenStore{}, SamplingParams{}, {}, ids)
                                 : (*lent)->Execute(StepPlan{}, TokenStore{}, logits);
      EXPECT_FALSE(step.ok());
    }
    EXPECT_EQ(idle->NumIdle(), 0u) << sample;
  }
  EXPECT_EQ(ledger.made, 2);
  EXPECT_EQ(ledger.destroyed, 2);
}

TEST(IdleRunnersTest, EachHolderHasItsOwnRunner) {
  Ledger ledger;
  auto idle = IdleRunners::Create();
  auto a = idle->Lend(0, Maker(ledger, 40));
  auto b = idle->Lend(0, Maker(ledger, 40));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(ledger.made, 2);
  EXPECT_NE(Fake(*a).Id(), Fake(*b).Id());
  a->reset();
  b->reset();
  EXPECT_EQ(idle->NumIdle(), 2u);
  EXPECT_EQ(ledger.destroyed, 0);
}

// A pool pinned to the blocks a runner made for 0 has is that runner's; a pool of any
// other size is a new runner, made only once every idle one is gone (a CUDA runner sizes
// its pool by the memory free then).
TEST(IdleRunnersTest, APoolOfOtherBlocksIsANewRunnerMadeAfterTheIdleOnesAreGone) {
  Ledger ledger;
  auto idle = IdleRunners::Create();
  { auto r = idle->Lend(0, Maker(ledger, 40)); ASSERT_TRUE(r.ok()); }
  {
    auto pinned = idle->Lend(40, Maker(ledger, 40));
    ASSERT_TRUE(pinned.ok());
    EXPECT_EQ(Fake(*pinned).Id(), 1);
  }
  { auto r = idle->Lend(0, Maker(ledger, 40)); ASSERT_TRUE(r.ok()); EXPECT_EQ(Fake(*r).Id(), 1); }
  {
    auto other = idle->Lend(7, Maker(ledger, 7));
    ASSERT_TRUE(other.ok());
    EXPECT_EQ(Fake(*other).Id(), 2);
  }
  ASSERT_EQ(ledger.destroyed_before_make, (std::vector<int>{0, 1}));
  EXPECT_EQ(idle->NumIdle(), 1u);
  // Made for 7 and holding 7: lent again for either; not for 0 (a runner made for 0
  // sizes its pool by the settings, which need not give 7).
  { auto r = idle->Lend(7, Maker(ledger, 7)); ASSERT_TRUE(r.ok()); EXPECT_EQ(Fake(*r).Id(), 2); }
  { auto r = idle->Lend(0, Maker(ledger, 40)); ASSERT_TRUE(r.ok()); EXPECT_EQ(Fake(*r).Id(), 3); }
  EXPECT_EQ(ledger.destroyed, 2);
}

// A runner still lent when the last other holder of the idle runners is gone goes back
// to them and dies with them, not before.
TEST(IdleRunnersTest, ARunnerOutlivingItsModelIsDestroyedWhenGivenBack) {
  Ledger ledger;
  auto idle = IdleRunners::Create();
  auto r = idle->Lend(0, Maker(ledger, 40));
  ASSERT_TRUE(r.ok());
  idle.reset();
  EXPECT_EQ(ledger.destroyed, 0);
  EXPECT_EQ(Fake(*r).Id(), 1);
  r->reset();
  EXPECT_EQ(ledger.destroyed, 1);
}

TEST(IdleRunnersTest, AFailedMakeIsTheError) {
  auto idle = IdleRunners::Create();
  auto r = idle->Lend(0, []() -> StatusOr<std::unique_ptr<ModelRunner>> {
    return Internal("no device");
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "no device");
  EXPECT_EQ(idle->NumIdle(), 0u);
}

}  // namespace
}  // namespace servelab
