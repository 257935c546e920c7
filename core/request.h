#pragma once
// A request and its state machine:
//
//   waiting ──admit──▶ running ──last token──▶ finished
//                       │  ▲
//               preempt ▼  │ re-admit (recompute or swap in)
//                     preempted
//   waiting ──never fits──▶ rejected
//
// There is no prefill phase and no decode phase: a request has `num_computed_tokens`
// (tokens whose KV is in the cache) catching up to NumTokens() = prompt + generated.
// When it catches up, the step that did it samples one token.
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/time.h"

namespace servelab {

enum class RequestState : uint8_t { kWaiting, kRunning, kPreempted, kFinished, kRejected };
std::string_view RequestStateName(RequestState state);

enum class RejectReason : uint8_t {
  kNone,
  kExceedsContextWindow,   // prompt + output > the model's max_model_len (vLLM rejects too)
  kExceedsKvCapacity,      // needs more KV blocks than the replica has, even alone
  kExceedsTokenBudget,     // chunked prefill off and prompt > max_num_batched_tokens
};
std::string_view RejectReasonName(RejectReason reason);

// Field order is deliberate: the scheduler touches the first cache line of every running
// request every iteration, so the per-step progress fields come first. No field belongs
// to a policy: a policy keeps what its rule needs itself, by `slot`.
struct alignas(64) Request {
  // --- Hot: read and written every iteration by the Scheduler. ---
  int32_t prompt_len = 0;         // input tokens, >= 1
  int32_t target_output_len = 0;  // output tokens to generate, >= 1 (ignore_eos semantics)
  int32_t num_computed_tokens = 0;  // tokens whose KV is cached
  int32_t num_generated = 0;        // output tokens sampled so far
  RequestState state = RequestState::kWaiting;
  bool stopped_early = false;       // the engine sampled EOS before target_output_len
  // In a batch that has not completed yet (pipeline parallelism keeps several in flight;
  // a request is in at most one).
  bool in_flight = false;
  // Dense within its replica, from acceptance (Scheduler::AddRequest) until it finishes,
  // then reused: policies and the KV manager index their per-request state by it. -1
  // before acceptance.
  int32_t slot = -1;
  int32_t client = 0;  // index into the experiment's clients (fairness policies charge by it)
  std::vector<int32_t> block_table;  // device KV block ids, token order (KvCacheManager's)
  TimeNs last_token = kNever;

  // --- What the workload says (immutable after arrival). ---
  int64_t id = 0;
  int32_t priority = 0;         // lower value = more urgent
  TimeNs arrival = 0;
  // Optional prefix identity (core/prefix_key.h): prefix_block_hashes[j] names tokens
  // [0, (j+1) * prefix_block_tokens) -- equal hashes, equal prefix -- over the leading
  // prefix_identified_tokens tokens (<= prompt + output); the rest is the request's own.
  std::vector<uint64_t> prefix_block_hashes;
  int32_t prefix_block_tokens = 0;
  int32_t prefix_identified_tokens = 0;
  // Multi-turn sessions: the session this turn belongs to (-1: none) and its turn (0-based).
  int64_t session = -1;
  int32_t turn = 0;

  // --- Progress that changes rarely (owned by the Scheduler). ---
  RejectReason reject_reason = RejectReason::kNone;
  int32_t num_preemptions = 0;
  int32_t num_recomputed_tokens = 0;  // tokens prefilled again after recompute preemption
  // Tokens its admissions took from the prefix cache instead of computing (every
  // admission: one after a recompute preemption may find its own blocks again).
  int32_t num_cached_tokens = 0;
  int32_t replica = -1;
  TimeNs first_scheduled = kNever;  // first admitted into a batch
  TimeNs first_token = kNever;
  TimeNs finish = kNever;

  int32_t NumTokens() const { return prompt_len + num_generated; }
  int32_t NumTokensToCompute() const { return NumTokens() - num_computed_tokens; }
  int32_t RemainingOutput() const { return target_output_len - num_generated; }
  bool IsFinished() const { return state == RequestState::kFinished; }
};

}  // namespace servelab
