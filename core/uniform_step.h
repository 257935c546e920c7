#pragma once
// A step of sequences alike, made without a scheduler: the profiler's configurations, the
// engine's warm-up before it serves, the simulator's prediction of the host check's
// reference steps. Each of `seqs` requests computes `chunk` new tokens after `context`
// cached ones and emits a token.
//
//   decode (chunk 1): the request's prompt is behind it (prompt_len = context), so
//                     ScheduledRequest::IsDecode holds and a cost model prices it as a
//                     decode; at context 0 there is nothing behind it: a one-token prompt
//                     (the plan still counts it among num_decode_tokens);
//   chunk:            the step ends its prompt (prompt_len = context + chunk).
//
// Request i has id first_id + i. With block_size > 0, each request's block table holds
// the blocks its context + chunk tokens need, numbered on from first_block: request after
// request, or with interleave_blocks block after block (request i's block j is first_block
// + j x seqs + i: how sequences that grew together got theirs in a serving run; the blocks
// are the caller's to have free either way). The plan points at the requests:
// a UniformStep neither copies nor moves.
#include <cstdint>
#include <span>
#include <vector>

#include "core/request.h"
#include "core/step_plan.h"

namespace servelab {

struct UniformStepShape {
  int32_t seqs = 1;
  int32_t chunk = 1;    // new tokens per sequence; a decode's is 1
  int32_t context = 0;  // tokens each sequence has cached before the step
  bool decode = false;
};

// The profiler's and the host check's way to name a step: `tokens` sequences decoding,
// or one sequence's chunk of `tokens`, after `context` cached tokens each.
UniformStepShape DecodesOrChunk(bool decode, int32_t tokens, int32_t context);

// Blocks of `block_size` tokens one sequence of `shape` holds after the step. REQUIRES:
// block_size >= 1.
int64_t BlocksPerSequence(const UniformStepShape& shape, int32_t block_size);

class UniformStep {
 public:
  // REQUIRES: seqs >= 1, chunk >= 1 (1 for a decode), context >= 0, context + chunk and
  // seqs x chunk inside int32_t, block_size >= 0, first_block >= 0, and the blocks'
  // numbers inside int32_t.
  explicit UniformStep(const UniformStepShape& shape, int64_t first_id = 0, int32_t block_size = 0,
                       int32_t first_block = 0, bool interleave_blocks = false);
  UniformStep(const UniformStep&) = delete;
  UniformStep& operator=(const UniformStep&) = delete;

  const StepPlan& Plan() const { return plan_; }
  std::span<const Request> Requests() const { return requests_; }
  // The block after the last one the step's block tables hold (first_block without them).
  int32_t EndBlock() const { return end_block_; }

 private:
  std::vector<Request> requests_;
  StepPlan plan_;
  int32_t end_block_ = 0;
};

}  // namespace servelab
