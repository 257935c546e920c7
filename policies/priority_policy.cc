#include "policies/priority_policy.h"

#include <algorithm>
#include <tuple>

#include "core/params.h"

namespace servelab {
namespace {

// Heap comparator: true when a comes after b, so the heap's front is the earliest.
bool ArrivesLater(const Request* a, const Request* b) {
  return std::tie(a->arrival, a->id) > std::tie(b->arrival, b->id);
}

}  // namespace

PriorityPolicy::PriorityPolicy(const PriorityPolicyOptions& options) : options_(options) {
  SERVELAB_CHECK(options_.aging_s >= 0.0);
  if (options_.aging_s > 0.0) aging_ns_ = std::max<TimeNs>(1, FromSeconds(options_.aging_s));
}

int64_t PriorityPolicy::EffectiveClass(const Request& request, TimeNs now) const {
  if (aging_ns_ == 0) return request.priority;
  const TimeNs age = std::max<TimeNs>(0, now - request.arrival);
  return int64_t{request.priority} - age / aging_ns_;
}

void PriorityPolicy::Enqueue(Request& request, TimeNs now) {
  Observe(now);
  std::vector<Request*>& heap = classes_[request.priority];
  heap.push_back(&request);
  std::push_heap(heap.begin(), heap.end(), ArrivesLater);
  ++num_waiting_;
}

Request* PriorityPolicy::Peek(TimeNs now) {
  Observe(now);
  if (classes_.empty()) return nullptr;
  if (aging_ns_ == 0) return classes_.begin()->second.front();
  Request* best = nullptr;
  int64_t best_class = 0;
  for (const auto& [priority, heap] : classes_) {
    Request* head = heap.front();
    const int64_t cls = EffectiveClass(*head, now);
    if (best == nullptr ||
        std::tie(cls, head->arrival, head->id) < std::tie(best_class, best->arrival, best->id)) {
      best = head;
      best_class = cls;
    }
  }
  return best;
}

void PriorityPolicy::Admitted(Request& request, TimeNs now) {
  Observe(now);
  auto it = classes_.find(request.priority);
  SERVELAB_CHECK(it != classes_.end() && it->second.front() == &request);
  std::vector<Request*>& heap = it->second;
  std::pop_heap(heap.begin(), heap.end(), ArrivesLater);
  heap.pop_back();
  if (heap.empty()) classes_.erase(it);
  --num_waiting_;
}

Request* PriorityPolicy::PickVictim(std::span<Request* const> running, TimeNs now) {
  Observe(now);
  Request* victim = nullptr;
  int64_t victim_class = 0;
  for (Request* r : running) {
    const int64_t cls = EffectiveClass(*r, now);
    if (victim == nullptr ||
        std::tie(cls, r->arrival, r->id) > std::tie(victim_class, victim->arrival, victim->id)) {
      victim = r;
      victim_class = cls;
    }
  }
  return victim;
}

bool PriorityPolicy::ShouldPreemptFor(const Request& waiting, const Request& running) const {
  return options_.preemptive &&
         EffectiveClass(waiting, last_now_) < EffectiveClass(running, last_now_);
}

void PriorityPolicy::OnStepDone(const StepPlan& /*plan*/, const StepResult& /*result*/,
                                TimeNs now) {
  Observe(now);
}

StatusOr<std::unique_ptr<Policy>> MakePriorityPolicy(ParamReader& params,
                                                     const PolicyContext& /*context*/) {
  PriorityPolicyOptions options;
  options.preemptive = params.GetBool("preemptive", options.preemptive);
  options.aging_s = params.GetDouble("aging_s", options.aging_s, kNonNegative);
  SERVELAB_RETURN_IF_ERROR(params.Finish());
  return std::unique_ptr<Policy>(std::make_unique<PriorityPolicy>(options));
}

}  // namespace servelab
