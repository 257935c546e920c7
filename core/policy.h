#pragma once
// A Policy decides ORDER (which waiting request to admit next) and VICTIMS (whom to
// preempt). It owns the waiting queue so each can keep the structure its rule needs.
// It never reads a wall clock and never does I/O: every backend shares it.
#include <optional>
#include <span>
#include <string_view>

#include "core/request.h"
#include "core/step_plan.h"
#include "core/time.h"

namespace servelab {

// The service a fairness policy charges a client for (VTC's cost function): input_weight
// per prompt token plus output_weight per output token. Fairness metrics count service
// in the units of the policy that ran.
struct ServiceCost {
  double input_weight = 1.0;
  double output_weight = 2.0;
};

// What a policy allows of decode runs (DESIGN.md, Speed): iterations that only grow the
// running requests by a token each, advanced by the scheduler without planning each one.
// The scheduler then calls OnStepDone once per iteration, with the run's batch as the
// plan (every running request, one decode token each) and that iteration's elapsed time,
// but with the contexts of the run's first iteration: a policy allows runs only if its
// OnStepDone reads from the plan which requests it holds, never their token counts.
//   kNone          never (the default: a new policy is stepped until it says otherwise)
//   kEmptyQueue    while nothing waits
//   kBlockedQueue  also while requests wait but none can be admitted (no free slot or no
//                  token budget left): the scheduler then skips the per-iteration Peek,
//                  PickVictim and ShouldPreemptFor calls, so they must change nothing
//                  that OnStepDone does not redo, and ShouldPreemptFor must never hold.
enum class DecodeRunSupport { kNone, kEmptyQueue, kBlockedQueue };

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view Name() const = 0;

  // A request arrives, or comes back after preemption (state kPreempted).
  virtual void Enqueue(Request& request, TimeNs now) = 0;
  // The next candidate to admit, or null when nothing waits. Must not change the queue:
  // the scheduler may decline (no memory, no budget) and ask again next step.
  virtual Request* Peek(TimeNs now) = 0;
  // The scheduler took Peek()'s answer: remove it from the waiting queue.
  virtual void Admitted(Request& request, TimeNs now) = 0;
  // Whom to preempt when memory runs out; `running` is in admission order and holds at
  // least one request. Null means "preempt nothing" (the scheduler then stalls the
  // growing request instead).
  virtual Request* PickVictim(std::span<Request* const> running, TimeNs now) = 0;
  // Preemptive policies: should `waiting` displace `running` now, memory permitting?
  virtual bool ShouldPreemptFor(const Request& waiting, const Request& running) const {
    return false;
  }
  // Called once per iteration after it ran: counters, quanta, aging.
  virtual void OnStepDone(const StepPlan& plan, const StepResult& result, TimeNs now) {}
  // Number of waiting requests (for metrics and progress).
  virtual size_t NumWaiting() const = 0;
  // The service cost this policy charges by, when it charges one (VTC).
  virtual std::optional<ServiceCost> Charges() const { return std::nullopt; }

  // Whether the scheduler may advance a decode run (Scheduler::BeginDecodeRun) under
  // this policy instead of stepping it, and when. See DecodeRunSupport.
  virtual DecodeRunSupport DecodeRuns() const { return DecodeRunSupport::kNone; }
};

}  // namespace servelab
