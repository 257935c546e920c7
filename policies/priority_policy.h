#pragma once
// Strict priority classes: the smallest Request::priority (set from the request's
// client) is admitted first, first come first served within a class.
//
// Parameters (`policy: {name: priority, ...}`):
//   preemptive  bool, default false. When true, ShouldPreemptFor(waiting, running) holds
//               iff waiting's effective class is strictly more urgent (smaller) than
//               running's — vLLM V0's priority preemption, except that vLLM compares
//               (priority, arrival) pairs; we compare classes only, so requests of one
//               class never displace each other.
//   aging_s     double seconds, >= 0, default 0 (no aging). A request's effective class
//               is  priority - floor((now - arrival) / aging_s):  one class more urgent
//               per aging_s seconds since arrival, so a low class cannot starve. Age is
//               counted from arrival (time in the system), the same formula for waiting
//               and running requests: preemption never changes a request's standing,
//               and a request admitted by aging is not at once displaced by the class
//               it aged past. Each request steps at multiples of aging_s after its OWN
//               arrival, so two whose arrivals are not a whole number of intervals
//               apart may swap places at each other's steps (classes 3 and 0 arriving
//               2.5 intervals apart alternate); at most one swap per step, never churn.
//
// Order: the smallest (effective class, arrival, id). Without aging this is (priority,
// arrival, id). `now` comes from Peek; ShouldPreemptFor (which has no clock) uses the
// latest time this policy was told (Enqueue, Peek, Admitted, PickVictim, OnStepDone).
// Victim under memory pressure: the candidate with the largest (effective class,
// arrival, id): the least urgent class, latest arrival within it.
//
// Cost: one binary heap per non-empty class, keyed by (arrival, id). A class's head is
// its oldest, hence most aged, member, so Peek compares the heads only: O(#classes)
// with aging, O(1) without; Enqueue and Admitted are O(log n).
#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "core/fields.h"
#include "core/policy.h"
#include "core/status.h"
#include "policies/registry.h"

namespace servelab {

struct PriorityPolicyOptions {
  bool preemptive = false;  // see above
  double aging_s = 0.0;     // seconds per class of aging; 0 = none
};

class PriorityPolicy final : public Policy {
 public:
  explicit PriorityPolicy(const PriorityPolicyOptions& options);

  std::string_view Name() const override { return "priority"; }
  void Enqueue(Request& request, TimeNs now) override;
  Request* Peek(TimeNs now) override;
  void Admitted(Request& request, TimeNs now) override;
  Request* PickVictim(std::span<Request* const> running, TimeNs now) override;
  bool ShouldPreemptFor(const Request& waiting, const Request& running) const override;
  void OnStepDone(const StepPlan& plan, const StepResult& result, TimeNs now) override;
  size_t NumWaiting() const override { return num_waiting_; }
  // Peek and PickVictim only advance the clock that OnStepDone advances past them.
  DecodeRunSupport DecodeRuns() const override {
    return options_.preemptive ? DecodeRunSupport::kEmptyQueue : DecodeRunSupport::kBlockedQueue;
  }

  // priority - floor((now - arrival) / aging_s), or priority without aging.
  int64_t EffectiveClass(const Request& request, TimeNs now) const;

 private:
  void Observe(TimeNs now) { last_now_ = std::max(last_now_, now); }

  PriorityPolicyOptions options_;
  TimeNs aging_ns_ = 0;  // options_.aging_s in ns, >= 1 when aging is on
  TimeNs last_now_ = 0;
  // priority -> min-heap on (arrival, id) (std::push_heap with a "later" comparator).
  // Empty classes are erased, so iteration visits only classes with waiters.
  std::map<int32_t, std::vector<Request*>> classes_;
  size_t num_waiting_ = 0;
};

// The registry's factory: reads `preemptive` and `aging_s`; unknown keys are errors.
StatusOr<std::unique_ptr<Policy>> MakePriorityPolicy(ParamReader& params,
                                                     const PolicyContext& context);

}  // namespace servelab
