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
};

}  // namespace servelab
