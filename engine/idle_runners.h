#pragma once
// The runners an engine model keeps between uses, as a server keeps its engine: one
// validation's loads, their further runs and their host checks all serve on the runner
// the first run made, instead of each making its own (a new CUDA runner uploads the
// weights again, sizes a new KV pool and captures its decode graphs again; on the H200,
// 2026-12-04, the two loads that ran on a process's second and third runners had their
// decode steps 3-6% slower than the first load's at the same batch, the cause open:
// experiments/results/h200/README.md).
//
// Lend hands out an idle runner whose KV pool fits the request, else makes one; the
// runner it hands out goes back to the idle ones when it is destroyed, its op timer
// cleared, unless a step on it failed (a CUDA error can stick to the runner): it is then
// destroyed. A runner is lent to one user at a time: two replicas get two runners.
// Thread-safe.
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/model_runner.h"

namespace servelab {

class IdleRunners : public std::enable_shared_from_this<IdleRunners> {
 public:
  using Make = std::function<StatusOr<std::unique_ptr<ModelRunner>>()>;

  // Held by a shared_ptr only: every runner lent holds one too.
  static std::shared_ptr<IdleRunners> Create() { return std::shared_ptr<IdleRunners>(new IdleRunners); }

  // A runner for a KV pool of `num_blocks` blocks (0: as the settings size it, which
  // only a runner made for 0 matches): an idle one made for that request or holding
  // exactly that many blocks; else, once every idle runner is destroyed (a CUDA runner
  // sizes its pool by the device memory free then), `make()`'s. Errors: make's.
  StatusOr<std::unique_ptr<ModelRunner>> Lend(int64_t num_blocks, const Make& make);

  size_t NumIdle() const;

 private:
  IdleRunners() = default;
  friend class LentRunner;
  struct Kept {
    std::unique_ptr<ModelRunner> runner;
    int64_t requested = 0;  // the num_blocks it was made for
  };
  void Return(Kept kept);

  mutable std::mutex mutex_;
  std::vector<Kept> idle_;
};

// What Lend hands out: the kept runner, every call passed through (a virtual added to
// ModelRunner must be passed through here too), and given back to the idle ones on
// destruction.
class LentRunner final : public ModelRunner {
 public:
  LentRunner(std::shared_ptr<IdleRunners> owner, std::unique_ptr<ModelRunner> runner,
             int64_t requested)
      : owner_(std::move(owner)), runner_(std::move(runner)), requested_(requested) {}
  LentRunner(const LentRunner&) = delete;
  LentRunner& operator=(const LentRunner&) = delete;
  ~LentRunner() override;  // gives the runner back, its op timer cleared

  ModelRunner& Runner() const { return *runner_; }  // the runner lent

  std::string_view Name() const override { return runner_->Name(); }
  const ModelConfig& Config() const override { return runner_->Config(); }
  KvCapacity Capacity() const override { return runner_->Capacity(); }
  void SwapOut(std::span<const BlockCopy> copies) override { runner_->SwapOut(copies); }
  void SwapIn(std::span<const BlockCopy> copies) override { runner_->SwapIn(copies); }
  Status Execute(const StepPlan& plan, const TokenStore& tokens,
                 std::vector<float>& logits) override {
    return Noted(runner_->Execute(plan, tokens, logits));
  }
  bool SamplesOnDevice(const SamplingParams& params) const override {
    return runner_->SamplesOnDevice(params);
  }
  Status ExecuteAndSample(const StepPlan& plan, const TokenStore& tokens,
                          const SamplingParams& params, std::span<const double> uniforms,
                          std::vector<int32_t>& token_ids) override {
    return Noted(runner_->ExecuteAndSample(plan, tokens, params, uniforms, token_ids));
  }
  void SetOpTimer(OpTimer* timer) override { runner_->SetOpTimer(timer); }
  std::optional<ExpertsRun> LastRouting() const override { return runner_->LastRouting(); }
  std::optional<DecodeGraphRun> LastDecodeGraph() const override {
    return runner_->LastDecodeGraph();
  }
  bool ProfilesOps() const override { return runner_->ProfilesOps(); }
  bool FirstShapesCostMore() const override { return runner_->FirstShapesCostMore(); }
  bool OpTimerAltersSteps() const override { return runner_->OpTimerAltersSteps(); }

 private:
  Status Noted(Status status) {
    failed_ = failed_ || !status.ok();
    return status;
  }

  std::shared_ptr<IdleRunners> owner_;
  std::unique_ptr<ModelRunner> runner_;
  int64_t requested_;
  bool failed_ = false;  // a step failed: the runner is not lent again
};

}  // namespace servelab
