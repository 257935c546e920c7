#pragma once
// One iteration's batch (StepPlan) and what executing it produced (StepResult).
// The scheduler fills a StepPlan; a Backend executes it; the scheduler commits the result.
#include <cstdint>
#include <vector>

#include "core/request.h"
#include "core/time.h"

namespace servelab {

// One request's share of an iteration.
struct ScheduledRequest {
  Request* request = nullptr;
  int32_t num_new_tokens = 0;       // tokens computed this step: a prefill chunk, or 1
  int32_t num_computed_tokens = 0;  // tokens already in its KV cache before this step
  // True when this step brings num_computed_tokens up to NumTokens(): the backend
  // samples one token for it (so it needs logits / the LM head).
  bool emits_token = false;
  // Static batching only: a member that already finished but is still carried in the
  // batch; it costs a decode token at its context length and produces nothing.
  bool is_padding = false;
  // Prefix caching: tokens this step's admission of the request found in the cache
  // (shared, not computed; num_computed_tokens already counts them). 0 otherwise.
  int32_t num_cached_tokens = 0;

  int32_t ContextLen() const { return num_computed_tokens + num_new_tokens; }
  // A decode is one new token after the prompt has been processed.
  bool IsDecode() const {
    return is_padding ||
           (num_new_tokens == 1 && num_computed_tokens >= request->prompt_len);
  }
};

// A block copy between device (GPU) and host (CPU swap space) block pools.
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
};

inline constexpr int32_t kMaxStepsSincePrefill = 1 << 30;

struct StepPlan {
  TimeNs start = 0;
  std::vector<ScheduledRequest> seqs;  // running order: decodes and chunks mixed
  std::vector<BlockCopy> swap_out;     // device block -> host block, before the step
  std::vector<BlockCopy> swap_in;      // host block -> device block, before the step
  int32_t num_prefill_tokens = 0;      // sum of num_new_tokens over non-decode seqs
  int32_t num_decode_tokens = 0;       // number of decode seqs (padding included)
  int32_t num_emitting = 0;            // seqs with emits_token (LM head rows)
  int32_t num_padding = 0;             // static-batching padding seqs
  int32_t num_cached_tokens = 0;       // sum of num_cached_tokens over seqs (admissions)
  // This step's place in the streak of decode-only steps since the last step that
  // computed prompt tokens (the scheduler's count, in the order it plans steps): 1 for the
  // first decode-only step after it, 2 for the next, ...; 0 for a step with prompt tokens
  // or a swap-only step. A device runs the first decodes after a
  // compute-bound step slower than settled ones (the calibrated cost model's
  // after_prefill); saturates at kMaxStepsSincePrefill.
  int32_t steps_since_prefill = 0;

  bool empty() const { return seqs.empty() && swap_out.empty() && swap_in.empty(); }
  int32_t NumTokens() const { return num_prefill_tokens + num_decode_tokens; }
  void Clear() {
    seqs.clear();
    swap_out.clear();
    swap_in.clear();
    num_prefill_tokens = num_decode_tokens = num_emitting = num_padding = num_cached_tokens = 0;
    steps_since_prefill = 0;
  }
};

struct StepResult {
  TimeNs elapsed = 0;  // predicted (simulator) or measured (engine)
  // Pipeline parallelism: each stage's time for this batch, in stage order, summing to
  // elapsed (transfers to the next stage included). Empty: one stage.
  std::vector<TimeNs> stages;
  // Engine only, one entry per seq with emits_token, in plan order: the sampled token
  // and whether it was a stop token (EOS). The simulator leaves both empty.
  std::vector<int32_t> sampled_tokens;
  std::vector<uint8_t> stopped;
};

}  // namespace servelab
