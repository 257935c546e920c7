#pragma once
// Virtual Token Counter (VTC) fairness: Sheng et al., "Fairness in Serving Large Language
// Models", OSDI'24 (Algorithm 2 of the arXiv version; artifact Ying1123/VTC-artifact).
//
// One counter c_i per client i: the weighted service it has received, in "token units".
//   admission of a request of client i:  c_i += input_weight * prompt_len / weight_i
//   every token sampled for client i:    c_i += output_weight / weight_i
// (weight_i is PolicyClient::weight; the counter divided by it is weighted VTC, §4.3.)
//
// Admission (Peek): among backlogged clients (those with a waiting request), the one
// with the smallest counter; ties go to the lowest client index. Within a client, FIFO
// (its oldest waiting request); a preempted request returns to the FRONT of its
// client's queue, since it was admitted before everything still waiting there.
//
// Lift (Algorithm 2, lines 7-13): when client u becomes backlogged (its queue goes from
// empty to non-empty, on an arrival or on a preempted request's return):
//   - if another client is backlogged:  c_u = max(c_u, min{c_k : k backlogged})
//   - else (nothing waits at all):      c_u = max(c_u, c_l), l = the client whose queue
//                                       emptied last (the last one to leave the queue);
//                                       no lift before any queue has ever emptied.
// So an idle client cannot bank credit and later monopolise admission, while counters
// are never reset (a reset would erase deficits already owed). The artifact's code
// (vtc_req_queue.py) omits the empty-queue case; we follow the paper.
//
// Choices the paper leaves open (it has no preemption):
//   - Prompt tokens are charged once, at the first admission. A preempted request's
//     re-admission is not charged again: the client receives no extra service from the
//     recompute, which the scheduler, not the client, caused. Its sampled tokens are
//     never recharged either (a re-prefill samples only the next new token).
//   - The prompt is charged in full at admission even when chunked prefill spreads it
//     over several steps (as the paper charges at batch formation).
//   - Victim (PickVictim): the candidate of the client with the LARGEST counter (the
//     most served), ties to the highest client index (the mirror of admission's tie
//     rule, so the client admission favours is not the one evicted); within that
//     client the latest admitted. ShouldPreemptFor is false (VTC is non-preemptive).
//   - Clients beyond PolicyContext::clients (or when it is empty) get weight 1; their
//     counters are created on first sight.
//
// Parameters (`policy: {name: vtc, ...}`):
//   input_weight   double >= 0, default 1   w_p: cost per prompt token (paper: 1)
//   output_weight  double >= 0, default 2   w_q: cost per output token (paper: 2,
//                                           after OpenAI's price ratio)
//
// Cost: Peek and the lift scan the clients, O(#clients); Enqueue, Admitted are O(1) plus
// the lift; OnStepDone is O(batch); PickVictim is O(#candidates).
//
// The per-step charge reads Request::client, which sits on the request's hot cache line.
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "core/fields.h"
#include "core/policy.h"
#include "core/status.h"
#include "policies/registry.h"

namespace servelab {

struct VtcPolicyOptions {
  double input_weight = 1.0;   // counter units per prompt token, before the client weight
  double output_weight = 2.0;  // counter units per sampled token, before the client weight
};

class VtcPolicy final : public Policy {
 public:
  // `client_weights[i]`: client i's fairness weight, each > 0 (may be empty).
  VtcPolicy(const VtcPolicyOptions& options, std::vector<double> client_weights);

  std::string_view Name() const override { return "vtc"; }
  void Enqueue(Request& request, TimeNs now) override;
  Request* Peek(TimeNs now) override;
  void Admitted(Request& request, TimeNs now) override;
  Request* PickVictim(std::span<Request* const> running, TimeNs now) override;
  void OnStepDone(const StepPlan& plan, const StepResult& result, TimeNs now) override;
  size_t NumWaiting() const override { return num_waiting_; }
  // OnStepDone counts tokens by client; Peek and PickVictim only read; never preempts.
  DecodeRunSupport DecodeRuns() const override { return DecodeRunSupport::kBlockedQueue; }
  std::optional<ServiceCost> Charges() const override {
    return ServiceCost{options_.input_weight, options_.output_weight};
  }

  // Client's counter (weighted token units); 0 for a client never seen.
  double Counter(int32_t client) const;
  // Requests of `client` waiting now.
  size_t NumWaiting(int32_t client) const;

 private:
  // Grows the per-client tables to hold `client` (clients unknown to the context get
  // weight 1). Inline fast path.
  void EnsureClient(int32_t client) {
    if (client < 0 || static_cast<size_t>(client) >= weights_.size()) GrowClients(client);
  }
  void GrowClients(int32_t client);
  // The lift rule, for `client` whose queue is about to become non-empty.
  void Lift(int32_t client);

  VtcPolicyOptions options_;
  std::vector<double> weights_;               // per client, > 0
  std::vector<double> counters_;              // per client
  std::vector<std::deque<Request*>> queues_;  // per client, oldest first
  int32_t last_emptied_ = -1;                 // client whose queue emptied last; -1 = none yet
  size_t num_waiting_ = 0;
  // OnStepDone's per-client token counts, kChargeLanes interleaved copies (lane-major).
  static constexpr size_t kChargeLanes = 4;
  std::vector<int32_t> step_tokens_;
};

// The registry's factory: reads input_weight and output_weight (unknown keys are errors)
// and the client weights from `context` (each must be > 0).
StatusOr<std::unique_ptr<Policy>> MakeVtcPolicy(ParamReader& params,
                                                const PolicyContext& context);

}  // namespace servelab
