#pragma once
// First come, first served: admit in arrival order; under memory pressure preempt the
// latest-admitted running request (vLLM's default). A preempted request returns to the
// front of the queue, ahead of later arrivals, as in vLLM.
#include <deque>

#include "core/policy.h"

namespace servelab {

class FcfsPolicy final : public Policy {
 public:
  std::string_view Name() const override { return "fcfs"; }
  void Enqueue(Request& request, TimeNs now) override;
  Request* Peek(TimeNs now) override;
  void Admitted(Request& request, TimeNs now) override;
  Request* PickVictim(std::span<Request* const> running, TimeNs now) override;
  size_t NumWaiting() const override { return waiting_.size(); }
  DecodeRunSupport DecodeRuns() const override { return DecodeRunSupport::kBlockedQueue; }

 private:
  std::deque<Request*> waiting_;
};

}  // namespace servelab
