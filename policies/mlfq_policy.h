#pragma once
// FastServe's skip-join multi-level feedback queue: Wu et al., "Fast Distributed
// Inference Serving for Large Language Models" (arXiv 2305.05920, 2023; NSDI'26 as
// "FastServe"), §4.1 and its Algorithm 1.
//
// Levels 0 (most urgent) .. L-1. Level l's quantum is  base_quantum * quantum_ratio^l;
// the last level's quantum is unbounded (nothing below it to demote to).
//   - Skip-join: an arriving request joins the most urgent level whose quantum is >= its
//     predicted prefill time (its first iteration), skipping the levels above, which it
//     would leave after one iteration anyway; the last level if none is long enough.
//   - Demotion: a request's attained service in its level (ns) grows by
//     StepResult::elapsed for every step it was scheduled in (its share of the batch is
//     the whole step: it waits for the step either way). Once that service exceeds the
//     level's quantum it moves one level down (it keeps running; only its level
//     changes) and its service restarts from 0.
//   - Starvation: a waiting request that has waited longer than starvation_s since it
//     arrived or was last preempted (the last time it ran) moves to level 0 with its
//     service reset, and stays there until it finishes: no other request can then
//     preempt it (none is more urgent), so promotion bounds the wait. (Demoted again by
//     the normal rule after its first step, as an earlier version did, it was preempted
//     by the next starved request. With a quantum shorter than one step and a prompt
//     that takes several chunks, recompute preemption then threw away each unfinished
//     prefill, and no promoted request ever finished: DeepSeek-V3 on two A100s, SLA
//     control cutting the token budget to 64, cycled through 87 starved requests forever.)
//   - Preemptive at iteration boundaries: ShouldPreemptFor(waiting, running) iff
//     waiting's level is strictly more urgent (smaller) than running's.
//   - Peek: the most urgent non-empty level, FIFO within it. A request re-enqueued after
//     preemption keeps its level and its service in it and goes to the BACK of that
//     level (round robin within a level, as in classic MLFQ: it already had its turn).
//     Starved requests promoted to level 0 go to its back, in promotion order.
//   - Victim (PickVictim): the candidate in the least urgent (largest) level, the latest
//     admitted among those.
//
// Starvation cost: a level other than 0 only ever receives requests at the back with
// "waiting since" = now (arrivals and preemptions; the clock never goes back), so its
// waiting-since times are non-decreasing from front to back and its head has waited the
// longest. The check (in OnStepDone, once per iteration) therefore looks at level heads
// only: O(levels + promoted), and exact, not an approximation. Level 0 is never checked
// (nothing is more urgent). Peek is O(1) (a bit mask of non-empty levels).
//
// Parameters (`policy: {name: mlfq, ...}`):
//   levels                int in [1, 64], default 8. The paper leaves the number of queues
//                         free; 8 levels at ratio 2 span quanta of 1x..128x the base, so
//                         skip-join separates prompts from one iteration up to the
//                         longest (tens of thousands of tokens), and demotion sorts
//                         requests by attained service over their first 127 base quanta
//                         (1 + 2 + ... + 64) before they reach the last level.
//   base_quantum_ms       double > 0. Level 0's quantum. Default: the paper's choice, the
//                         time of one decode iteration (the minimum iteration time), taken
//                         as the cost model's time for a one-token iteration
//                         (PolicyContext::prefill_time_s(1)); 20 ms (a typical decode
//                         iteration of a 7B-13B model on an A100) when the context has no
//                         estimate.
//   quantum_ratio         double >= 1, default 2. The paper's quanta grow geometrically
//                         with a tunable ratio; 2 doubles them per level, as in its
//                         examples.
//   starvation_s          double >= 0, default 10; 0 turns promotion off. We found no
//                         published value for the paper's starvation limit; 10 s is far
//                         above a healthy queueing delay, so only true starvation
//                         triggers it.
//   prefill_ms_per_token  double > 0, default 0.05. Skip-join's prefill estimate is
//                         prefill_ms_per_token * prompt_len when this parameter is given
//                         or the context has no prefill_time_s; otherwise the context's
//                         cost-model estimate. 0.05 ms/token ~ 2 * 7e9 FLOP per token at
//                         ~280 TFLOP/s (a 7B model on an A100 at high utilisation).
//
// State per request (by Request::slot, kept here): its level, its service in that level,
// the time it started waiting (arrival or preemption).
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "core/fields.h"
#include "core/policy.h"
#include "core/status.h"
#include "policies/registry.h"

namespace servelab {

struct MlfqPolicyOptions {
  int32_t levels = 8;
  double base_quantum_ms = 20.0;  // the factory replaces it by the one-token iteration time
  double quantum_ratio = 2.0;
  double starvation_s = 10.0;        // 0 = no promotion
  double prefill_ms_per_token = 0.05;  // used when no prefill_time_s estimator is given
};

class MlfqPolicy final : public Policy {
 public:
  // `prefill_time_s(n)`: predicted seconds to prefill n tokens; when empty, the linear
  // estimate options.prefill_ms_per_token * n.
  MlfqPolicy(const MlfqPolicyOptions& options, std::function<double(int32_t)> prefill_time_s);

  std::string_view Name() const override { return "mlfq"; }
  void Enqueue(Request& request, TimeNs now) override;
  Request* Peek(TimeNs now) override;
  void Admitted(Request& request, TimeNs now) override;
  Request* PickVictim(std::span<Request* const> running, TimeNs now) override;
  bool ShouldPreemptFor(const Request& waiting, const Request& running) const override;
  void OnStepDone(const StepPlan& plan, const StepResult& result, TimeNs now) override;
  size_t NumWaiting() const override { return num_waiting_; }
  // OnStepDone charges each running request the step's time; always preemptive.
  DecodeRunSupport DecodeRuns() const override { return DecodeRunSupport::kEmptyQueue; }

  int32_t NumLevels() const { return static_cast<int32_t>(queues_.size()); }
  // A request's level and its attained service there (ns). REQUIRES: it was enqueued.
  int32_t LevelOf(const Request& request) const { return StateOf(request).level; }
  double ServiceOf(const Request& request) const { return StateOf(request).service_ns; }
  // Level's quantum in ns; the last level's is std::numeric_limits<TimeNs>::max().
  TimeNs QuantumNs(int32_t level) const { return quantum_ns_[level]; }
  // The level an arriving request with this prompt joins.
  int32_t SkipJoinLevel(int32_t prompt_len) const;
  size_t NumWaitingAt(int32_t level) const { return queues_[level].size(); }

 private:
  struct State {
    int32_t level = 0;
    double service_ns = 0.0;       // attained in its current level
    TimeNs waiting_since = 0;      // arrival or latest preemption
    bool promoted = false;         // promoted for starvation: level 0 until it finishes
  };
  State& StateOf(const Request& request) {
    const auto slot = static_cast<size_t>(request.slot);
    SERVELAB_CHECK(request.slot >= 0);
    if (slot >= states_.size()) states_.resize(slot + 1);
    return states_[slot];
  }
  const State& StateOf(const Request& request) const {
    SERVELAB_CHECK(request.slot >= 0 && static_cast<size_t>(request.slot) < states_.size());
    return states_[static_cast<size_t>(request.slot)];
  }
  void Push(Request& request, int32_t level);
  void PromoteStarved(TimeNs now);

  std::vector<State> states_;                  // by Request::slot

  std::vector<TimeNs> quantum_ns_;             // per level
  std::vector<std::deque<Request*>> queues_;   // per level, FIFO
  uint64_t nonempty_ = 0;                      // bit l set iff queues_[l] is non-empty
  TimeNs starvation_ns_ = 0;                   // 0 = off
  std::function<double(int32_t)> prefill_time_s_;
  size_t num_waiting_ = 0;
};

// The registry's factory: reads the parameters above (unknown keys are errors) and takes
// the prefill estimate and the default base quantum from `context`.
StatusOr<std::unique_ptr<Policy>> MakeMlfqPolicy(ParamReader& params,
                                                 const PolicyContext& context);

}  // namespace servelab
