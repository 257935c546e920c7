#pragma once
// The real engine behind the scheduler: a Backend that runs each StepPlan through a
// ModelRunner, samples one token per emitting seq and reports the MEASURED wall time.
//
//   Execute(plan):  [steady_clock starts]
//     runner.SwapOut(plan.swap_out); runner.SwapIn(plan.swap_in)
//     synthesize prompts of requests seen for the first time (TokenStore)
//     runner.Execute(plan, tokens) -> logits [num_emitting, vocab]
//     per emitting seq, in plan order: Sampler(seed, request id, token index =
//       request.num_generated) -> token; append it to the request's ids;
//     (or, when the runner samples on its side — SamplesOnDevice — one
//      runner.ExecuteAndSample with each seq's SamplingUniform draw -> token ids)
//       stopped = token is an eos_token_id and !ignore_eos
//   [steady_clock stops] -> StepResult.elapsed (ns, >= 1)
// A runner error is returned as it is: the driver ends the run at that step.
//
// Token ids live in the TokenStore until the driver calls OnRequestFinished(id) with
// each request Scheduler::Commit returns as finished.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/status.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "engine/token_store.h"

namespace servelab {

struct EngineBackendOptions {
  // The experiment seed: the sampler's draws and the synthesized prompts derive from it.
  uint64_t seed = 0;
  // temperature (0 = greedy), top_k, top_p; its `seed` field is ignored (`seed` wins).
  SamplingParams sampling;
  // true: an EOS token does not stop a request; it runs to target_output_len.
  bool ignore_eos = false;
};

class EngineBackend final : public Backend {
 public:
  // `max_model_len`: the context served (<= the runner model's ServedContextLen()); 0
  // means that whole window. REQUIRES: runner != nullptr.
  EngineBackend(std::unique_ptr<ModelRunner> runner, const EngineBackendOptions& options,
                int32_t max_model_len = 0);

  std::string_view Name() const override { return name_; }  // "engine-cpu", ...
  KvCapacity Capacity() const override { return runner_->Capacity(); }
  int32_t MaxModelLen() const override { return max_model_len_; }
  // The runner's error (a CUDA failure, a context it cannot attend to) ends the step.
  StatusOr<StepResult> Execute(const StepPlan& plan) override;
  void OnRequestFinished(int64_t request_id) override { tokens_.Forget(request_id); }
  std::optional<ExpertsRun> Routing(const StepPlan& /*plan*/) const override {
    return runner_->LastRouting();
  }
  std::optional<DecodeGraphRun> DecodeGraph(const StepPlan& /*plan*/) const override {
    return runner_->LastDecodeGraph();
  }
  bool ReportsDecodeGraphs() const override { return true; }

  // Before serving, as vLLM's profile run does: the widest steps the scheduler can form,
  // each executed once and untimed, so the first steps served do not pay for first
  // touches (the runner's activations grown to the step's rows, the LM head's and the
  // sampler's to its emitting sequences, code and data the host has not cached yet).
  // Two steps of prefill chunks sharing R = min(max_tokens, the KV pool's tokens) rows:
  // the fewest sequences the context served allows (one, unless R is longer than that
  // context), then min(max_seqs, R) sequences, each emitting; each chunk within the
  // context served and the pool. Without it the CPU engine's first step of every
  // validation run (2026-12-03: a chunk of 218 tokens) took up to 3.1 times what the
  // calibrated model predicts, up to 290 ms more (warmed: within 4.2%). Nothing of it stays: its requests (ids
  // below 0) are forgotten, and the KV it wrote is in blocks no later sequence reads
  // before writing them. REQUIRES: no request served yet. Errors: the runner's.
  Status WarmUp(int32_t max_tokens, int32_t max_seqs);

  // Gives request `request_id` these prompt ids instead of synthesized ones. Call it before
  // the request's first step; ids.size() must then equal its prompt_len (CHECKed).
  // InvalidArgument for an empty prompt, an id outside [0, vocab) or a second prompt.
  Status SetPrompt(int64_t request_id, std::vector<int32_t> ids);

  const TokenStore& Tokens() const { return tokens_; }
  ModelRunner& Runner() { return *runner_; }

 private:
  void EnsurePrompts(const StepPlan& plan);

  std::unique_ptr<ModelRunner> runner_;
  EngineBackendOptions options_;
  std::string name_;
  TokenStore tokens_;
  Sampler sampler_;
  std::vector<float> logits_;  // [num_emitting, vocab], reused
  // Runner-side sampling (ModelRunner::SamplesOnDevice): draws in, token ids out.
  std::vector<double> uniforms_;
  std::vector<int32_t> device_ids_;
  int32_t max_model_len_;
};

}  // namespace servelab
