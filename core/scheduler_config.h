#pragma once
// Scheduler knobs, named as vLLM names them. Plain data; every default documented.
#include <cstdint>

#include "core/fields.h"
#include "core/prefix_cache.h"

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
  kSwap,       // copy the victim's blocks to host memory (hardware.swap_space_gib) and
               // back before it resumes; recompute when the swap space is full
};
inline constexpr EnumName<PreemptionMode> kPreemptionNames[] = {
    {"recompute", PreemptionMode::kRecompute}, {"swap", PreemptionMode::kSwap}};

// SLA-driven adaptive batching (the seeds' recommended strategy): an AIMD controller
// that shrinks the running-batch limit and the token budget when the observed latency
// percentile exceeds the target and grows them back while it holds, so the replica keeps
// the target at the largest batch it allows.
enum class SlaMetric : uint8_t {
  kTpotP95,  // p95 TPOT across requests, held via the windowed mean decode step time
  kTtftP95,  // p95 of time to first token of the requests that got one in the window
};
inline constexpr EnumName<SlaMetric> kSlaMetricNames[] = {{"tpot_p95", SlaMetric::kTpotP95},
                                                          {"ttft_p95", SlaMetric::kTtftP95}};

struct SlaControlConfig {
  SlaMetric metric = SlaMetric::kTpotP95;
  double target_ms = 100.0;
  int32_t window = 64;           // most recent samples the estimate is taken over
  int32_t interval_steps = 32;   // iterations between two adjustments
  double decrease = 0.8;         // multiplicative decrease when the target is missed
  int32_t increase_seqs = 4;     // additive increase of the batch limit when it holds
  int32_t increase_tokens = 256; // additive increase of the token budget when it holds
  int32_t min_num_seqs = 1;
  int32_t min_batched_tokens = 64;

  template <class V>
  void VisitFields(V& v) {
    v.Enum("metric", metric, EnumNames<SlaMetric>(kSlaMetricNames));
    v.Field("target_ms", target_ms, kPositive);
    v.Field("window", window, kAtLeastOne);
    v.Field("interval_steps", interval_steps, kAtLeastOne);
    v.Field("decrease", decrease, Bounds{0.0, 1.0, true, true});
    v.Field("increase_seqs", increase_seqs, kNonNegative);
    v.Field("increase_tokens", increase_tokens, kNonNegative);
    v.Field("min_num_seqs", min_num_seqs, kAtLeastOne);
    v.Field("min_batched_tokens", min_batched_tokens, kAtLeastOne);
  }
};

struct SchedulerConfig {
  Batching batching = Batching::kContinuous;
  // Ordering policy: "fcfs" or {name: ..., <its parameters>}. Default fcfs.
  NamedParams policy{"fcfs", {}, "scheduler.policy", "", ""};
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
  // When present, max_num_seqs and max_num_batched_tokens become upper bounds that an
  // SLA controller moves below.
  bool has_sla_control = false;
  SlaControlConfig sla_control;
  // Automatic prefix caching (core/prefix_cache.h): absent = none; {type: hash} is vLLM's,
  // {type: radix} SGLang's RadixAttention.
  bool has_prefix_cache = false;
  PrefixCacheConfig prefix_cache;
  // Batches in flight at once: the replica's pipeline stages (hardware.pipeline_parallel,
  // set by the experiment; not a key). Each batch then holds up to max_num_seqs requests
  // and max_num_batched_tokens tokens, as vLLM's virtual engines do.
  int32_t batches_in_flight = 1;

  PrefixCacheType PrefixCaching() const {
    return has_prefix_cache ? prefix_cache.type : PrefixCacheType::kNone;
  }

  template <class V>
  void VisitFields(V& v) {
    v.Enum("batching", batching, EnumNames<Batching>(kBatchingNames));
    v.Named("policy", policy);
    // Bounded so that what the scheduler sizes by them (its per-request arrays, reserved
    // up front) fits any machine: vLLM's own defaults are 256-1024 and 8192-16384.
    v.Field("max_num_seqs", max_num_seqs, Bounds{1, 1 << 20});
    v.Field("max_num_batched_tokens", max_num_batched_tokens, Bounds{1, 1 << 26});
    v.Field("chunked_prefill", chunked_prefill);
    v.Field("block_size", block_size, Bounds{1, 4096});
    v.Enum("preemption", preemption, EnumNames<PreemptionMode>(kPreemptionNames));
    v.Field("watermark", watermark, Bounds{0.0, 1.0, false, true});
    v.Field("max_model_len", max_model_len, kNonNegative);
    v.OptionalSection("sla_control", sla_control, has_sla_control);
    v.OptionalSection("prefix_cache", prefix_cache, has_prefix_cache);
  }
};

}  // namespace servelab
