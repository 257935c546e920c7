#pragma once
// A ModelRunner executes the forward pass of one StepPlan over its paged KV cache: the
// compute the EngineBackend times. The CPU reference (CpuModelRunner) and the CUDA runner
// implement it with the same layouts (kernels/README.md), so the backend, the scheduler
// and the tests are shared.
//
// Contract of one step (the EngineBackend calls them in this order):
//   1. SwapOut(plan.swap_out)   device block -> host block, every layer's K and V
//   2. SwapIn(plan.swap_in)     host block -> device block (may reuse blocks freed by 1.)
//   3. Execute(plan, tokens, logits)
// Execute, for each seq that is not padding, in plan order:
//   - reads its num_new_tokens input ids at positions num_computed_tokens + i from
//     `tokens` (prompt ids, then generated ids), i in [0, num_new_tokens);
//   - writes their K/V at slot block_table[pos / block_size] * block_size
//     + pos % block_size of every layer's cache;
//   - attends over positions [0, num_computed_tokens + num_new_tokens);
//   - if emits_token, appends one logits row (its last new token's) to `logits`.
// Padding seqs (static batching) compute nothing and emit nothing.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend.h"
#include "core/op.h"
#include "core/status.h"
#include "core/step_plan.h"
#include "engine/model_config.h"
#include "engine/sampler.h"
#include "engine/token_store.h"

namespace servelab {

// Receives, while profiling, the time each op of a step took (core/op.h): per-layer ops
// once per layer, per-step ops once. Times are the runner's own (host wall time on the
// CPU runner; CUDA events on the CUDA runner).
class OpTimer {
 public:
  virtual ~OpTimer() = default;
  virtual void Record(Op op, double seconds) = 0;
  // A MoE layer's routing as it happened: the experts it ran, and of them those given
  // one token x expert row. Once per MoE layer, by runners that count it.
  virtual void RecordExperts(int32_t run, int32_t single_row) {}
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual std::string_view Name() const = 0;  // "cpu", "cuda"
  virtual const ModelConfig& Config() const = 0;
  // Device blocks (the KV pool), block size, host swap blocks, bytes per block (K and V
  // of every layer). Fixed for the runner's lifetime.
  virtual KvCapacity Capacity() const = 0;

  // Copies whole blocks (every layer's K and V) from the device pool to the host pool
  // (SwapOut: src device, dst host) or back (SwapIn: src host, dst device).
  // REQUIRES: ids within the pools (CHECKed); a dst appears once.
  virtual void SwapOut(std::span<const BlockCopy> copies) = 0;
  virtual void SwapIn(std::span<const BlockCopy> copies) = 0;

  // One step. `logits` is resized to [plan's emitting seqs, vocab_size], f32, rows in plan
  // order. REQUIRES: every non-padding seq's request has at least num_computed_tokens +
  // num_new_tokens ids in `tokens`, ids in [0, vocab), a block table covering its context.
  // Errors: a runtime failure (CUDA) or a context the model cannot attend to (beyond a
  // sliding window, which is not implemented).
  virtual Status Execute(const StepPlan& plan, const TokenStore& tokens,
                         std::vector<float>& logits) = 0;

  // Sampling on the runner's side: a GPU runner samples where the logits are instead of
  // copying [emitting seqs, vocab] floats to the host every step (131 MB at batch 256 for
  // a 128k vocabulary). True when ExecuteAndSample supports `params`; the EngineBackend
  // then calls it instead of Execute + its host Sampler.
  virtual bool SamplesOnDevice(const SamplingParams& /*params*/) const { return false; }
  // As Execute, then one token id per emitting seq, in plan order, into `token_ids`.
  // `uniforms[e]` is emitting seq e's draw (SamplingUniform of its request and token
  // index), used when params.temperature > 0. REQUIRES: SamplesOnDevice(params).
  virtual Status ExecuteAndSample(const StepPlan& /*plan*/, const TokenStore& /*tokens*/,
                                  const SamplingParams& /*params*/,
                                  std::span<const double> /*uniforms*/,
                                  std::vector<int32_t>& /*token_ids*/) {
    return Internal(std::string(Name()) + " runner: ExecuteAndSample is not supported");
  }

  // While `timer` is set (null: off), each step reports its ops' times to it. Whether a
  // runner times ops at all: ProfilesOps().
  virtual void SetOpTimer(OpTimer* /*timer*/) {}
  // A mixture of experts: the routing its MoE layers ran in the last Execute (the mean per
  // layer), by runners that count it; none otherwise.
  virtual std::optional<ExpertsRun> LastRouting() const { return std::nullopt; }
  // The graph (core/backend.h) the last Execute replayed; none when it ran op by op (every step of a runner
  // without graphs). The profiler records it on each whole step's row, so a fit prices
  // the step as it ran (the graph's padding, its bucket) instead of assuming.
  virtual std::optional<DecodeGraphRun> LastDecodeGraph() const { return std::nullopt; }
  virtual bool ProfilesOps() const { return false; }
  // The first step of a new shape pays once for what later ones reuse (the CUDA runner:
  // CUDA's lazy module loading and cuBLAS's kernel choice, each new token count's GEMMs):
  // the engine's warm-up then runs a ladder of shapes before serving.
  virtual bool FirstShapesCostMore() const { return false; }
  // Whether a step runs differently while timed (the CUDA runner's decode graphs are then
  // off): the profiler times whole steps in runs of their own.
  virtual bool OpTimerAltersSteps() const { return false; }
};

}  // namespace servelab
