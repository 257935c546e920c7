#pragma once
// Scheduler knobs, named as vLLM names them. Plain data; every default documented.
#include <cstdint>

#include "core/fields.h"

namespace servelab {

enum class Batching : uint8_t {
  kContinuous,  // iteration-level scheduling (Orca): requests join and leave every step
  kStatic,      // a batch forms only when the previous one fully finished; finished
                // members stay in it as padding until the last one is done
};
inline constexpr EnumName<Batching> kBatchingNames[] = {
    {"continuous", Batching::kContinuous}, {"static", Batching::kStatic}};

enum class PreemptionMode : uint8_t {
  kRecompute,  // free the victim's blocks; it re-prefills prompt + generated tokens later
};
inline constexpr EnumName<PreemptionMode> kPreemptionNames[] = {
    {"recompute", PreemptionMode::kRecompute}};

struct SchedulerConfig {
  Batching batching = Batching::kContinuous;
  // Ordering policy: "fcfs" or {name: ..., <its parameters>}. Default fcfs.
  NamedParams policy{"fcfs", {}, "scheduler.policy", ""};
  int32_t max_num_seqs = 256;              // running requests per replica
  int32_t max_num_batched_tokens = 8192;   // token budget per iteration
  bool chunked_prefill = true;             // split prompts across iterations to fit budget
  int32_t block_size = 16;                 // tokens per KV block
  PreemptionMode preemption = PreemptionMode::kRecompute;
  // Fraction of KV blocks kept free at admission so running requests can grow (vLLM's
  // watermark, default 0.01). Growth of running requests may use them.
  double watermark = 0.01;
  // Longest prompt + output accepted; 0 means the model's context window.
  int32_t max_model_len = 0;

  template <class V>
  void VisitFields(V& v) {
    v.Enum("batching", batching, EnumNames<Batching>(kBatchingNames));
    v.Named("policy", policy);
    v.Field("max_num_seqs", max_num_seqs, kAtLeastOne);
    v.Field("max_num_batched_tokens", max_num_batched_tokens, kAtLeastOne);
    v.Field("chunked_prefill", chunked_prefill);
    v.Field("block_size", block_size, Bounds{1, 4096});
    v.Enum("preemption", preemption, EnumNames<PreemptionMode>(kPreemptionNames));
    v.Field("watermark", watermark, Bounds{0.0, 1.0, false, true});
    v.Field("max_model_len", max_model_len, kNonNegative);
  }
};

}  // namespace servelab
