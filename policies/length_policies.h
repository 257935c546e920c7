#pragma once
// Length-ordered policies: shortest (predicted) job first, shortest (predicted)
// remaining processing time, and longest output first.
//
//   sjf   admit the smallest predicted total output length first.
//   srpt  admit the smallest predicted REMAINING output first:
//         max(1, predicted total - num_generated), so a request preempted part-way
//         comes back ranked by what it still has to generate.
//   lof   admit the largest true output length (target_output_len) first, as SGLang's
//         `lof` schedule policy (which sorts by the request's max_new_tokens). Victim:
//         the latest arrival (ties: larger id) — the rule itself says nothing about
//         victims, and latest-arrival is FCFS's choice, which keeps lof comparable.
// Ties in every rule: earlier arrival, then smaller id (FCFS). A preempted request
// (state kPreempted) keeps the prediction drawn at its first Enqueue.
//
// Parameters of sjf and srpt (lof takes none):
//   predictor         oracle | noisy | bucket, default oracle (see length_predictor.h);
//                     `sigma` (noisy, default 0.5) and `p` (bucket, default 0.8) exist
//                     only for their kind.
//   starvation_iters  int >= 0, default 0 (off). Starvation guard after Fu et al.,
//                     "Efficient LLM Scheduling by Learning to Rank" (2024): a request
//                     that has waited through that many iterations (OnStepDone calls
//                     since its latest Enqueue) is promoted ahead of every unpromoted
//                     one; promoted requests are admitted FIFO in promotion order.
//   preemptive        bool, default false for sjf, true for srpt.
//                     ShouldPreemptFor(waiting, running) iff waiting's predicted
//                     remaining < running's predicted remaining (strictly).
// Victim (sjf, srpt): the candidate with the longest predicted remaining output; ties:
// latest arrival, then larger id.
//
// Cost: an ordered set for the queue and, with the starvation guard, a map in enqueue
// order: O(log n) per Enqueue / Admitted / promotion, O(1) Peek.
//
// State per request (by Request::slot, kept here): its predicted total output tokens,
// whether it is promoted, its enqueue (or promotion) sequence number.
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "core/fields.h"
#include "core/policy.h"
#include "core/status.h"
#include "policies/length_predictor.h"
#include "policies/registry.h"

namespace servelab {

enum class LengthRule : uint8_t { kSjf, kSrpt, kLof };

struct LengthPolicyOptions {
  LengthRule rule = LengthRule::kSjf;
  LengthPredictorConfig predictor;  // lof ignores it: always the true length
  int64_t starvation_iters = 0;     // 0 = no starvation guard
  bool preemptive = false;
};

class LengthPolicy final : public Policy {
 public:
  // `seed`: the experiment seed (PolicyContext::seed), for the predictor's draws.
  LengthPolicy(const LengthPolicyOptions& options, uint64_t seed);

  std::string_view Name() const override;
  void Enqueue(Request& request, TimeNs now) override;
  Request* Peek(TimeNs now) override;
  void Admitted(Request& request, TimeNs now) override;
  Request* PickVictim(std::span<Request* const> running, TimeNs now) override;
  bool ShouldPreemptFor(const Request& waiting, const Request& running) const override;
  void OnStepDone(const StepPlan& plan, const StepResult& result, TimeNs now) override;
  size_t NumWaiting() const override { return waiting_.size(); }
  // OnStepDone counts iterations; Peek and PickVictim only read.
  DecodeRunSupport DecodeRuns() const override {
    return options_.preemptive ? DecodeRunSupport::kEmptyQueue : DecodeRunSupport::kBlockedQueue;
  }

  // The predicted total output tokens, and max(1, predicted total - num_generated).
  // REQUIRES: the request was enqueued here.
  double Predicted(const Request& request) const { return StateOf(request).predicted; }
  double PredictedRemaining(const Request& request) const;
  bool IsPromoted(const Request& request) const { return StateOf(request).promoted; }

 private:
  struct State {
    double predicted = 0.0;  // total output tokens; 0 = not drawn yet
    bool promoted = false;   // by the starvation guard
    int64_t seq = 0;         // enqueue (or promotion) sequence number
  };
  State& StateOf(const Request& request) {
    SERVELAB_CHECK(request.slot >= 0);
    const auto slot = static_cast<size_t>(request.slot);
    if (slot >= states_.size()) states_.resize(slot + 1);
    return states_[slot];
  }
  const State& StateOf(const Request& request) const {
    SERVELAB_CHECK(request.slot >= 0 && static_cast<size_t>(request.slot) < states_.size());
    return states_[static_cast<size_t>(request.slot)];
  }
  // Strict weak order of the waiting set; reads state that stays fixed while a request
  // waits (erase before changing it).
  struct Before {
    const LengthPolicy* policy;
    bool operator()(const Request* a, const Request* b) const;
  };
  struct Waiter {
    Request* request;
    int64_t enqueued_iter;  // iters_ at Enqueue
  };

  LengthPolicyOptions options_;
  LengthPredictor predictor_;
  std::vector<State> states_;  // by Request::slot
  std::set<Request*, Before> waiting_;
  std::map<int64_t, Waiter> unpromoted_;  // by State::seq; only with the guard on
  int64_t next_seq_ = 0;
  int64_t iters_ = 0;  // OnStepDone calls so far
};

// Registry factories; unknown parameters are errors.
StatusOr<std::unique_ptr<Policy>> MakeSjfPolicy(ParamReader& params,
                                                const PolicyContext& context);
StatusOr<std::unique_ptr<Policy>> MakeSrptPolicy(ParamReader& params,
                                                 const PolicyContext& context);
StatusOr<std::unique_ptr<Policy>> MakeLofPolicy(ParamReader& params,
                                                const PolicyContext& context);

}  // namespace servelab
