#include "policies/vtc_policy.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/params.h"

namespace servelab {

VtcPolicy::VtcPolicy(const VtcPolicyOptions& options, std::vector<double> client_weights)
    : options_(options), weights_(std::move(client_weights)) {
  SERVELAB_CHECK(options_.input_weight >= 0.0 && options_.output_weight >= 0.0);
  for (double w : weights_) SERVELAB_CHECK(w > 0.0 && std::isfinite(w));
  counters_.assign(weights_.size(), 0.0);
  queues_.resize(weights_.size());
}

void VtcPolicy::GrowClients(int32_t client) {
  SERVELAB_CHECK(client >= 0);
  const size_t n = static_cast<size_t>(client) + 1;
  if (n <= weights_.size()) return;
  weights_.resize(n, 1.0);
  counters_.resize(n, 0.0);
  queues_.resize(n);
}

double VtcPolicy::Counter(int32_t client) const {
  return client >= 0 && static_cast<size_t>(client) < counters_.size() ? counters_[client] : 0.0;
}

size_t VtcPolicy::NumWaiting(int32_t client) const {
  return client >= 0 && static_cast<size_t>(client) < queues_.size() ? queues_[client].size()
                                                                       : 0;
}

void VtcPolicy::Lift(int32_t client) {
  bool any_backlogged = false;
  double floor = 0.0;
  for (size_t k = 0; k < queues_.size(); ++k) {
    if (static_cast<int32_t>(k) == client || queues_[k].empty()) continue;
    if (!any_backlogged || counters_[k] < floor) floor = counters_[k];
    any_backlogged = true;
  }
  if (!any_backlogged) {
    if (last_emptied_ < 0) return;  // nothing has ever left the queue: no reference
    floor = counters_[last_emptied_];
  }
  counters_[client] = std::max(counters_[client], floor);
}

void VtcPolicy::Enqueue(Request& request, TimeNs /*now*/) {
  const int32_t c = request.client;
  EnsureClient(c);
  if (queues_[c].empty()) Lift(c);
  if (request.state == RequestState::kPreempted) {
    queues_[c].push_front(&request);
  } else {
    queues_[c].push_back(&request);
  }
  ++num_waiting_;
}

Request* VtcPolicy::Peek(TimeNs /*now*/) {
  int32_t best = -1;
  for (size_t k = 0; k < queues_.size(); ++k) {
    if (queues_[k].empty()) continue;
    if (best < 0 || counters_[k] < counters_[best]) best = static_cast<int32_t>(k);
  }
  return best < 0 ? nullptr : queues_[best].front();
}

void VtcPolicy::Admitted(Request& request, TimeNs /*now*/) {
  const int32_t c = request.client;
  SERVELAB_CHECK(c >= 0 && static_cast<size_t>(c) < queues_.size());
  std::deque<Request*>& queue = queues_[c];
  SERVELAB_CHECK(!queue.empty() && queue.front() == &request);
  queue.pop_front();
  --num_waiting_;
  if (queue.empty()) last_emptied_ = c;
  // The scheduler marks the request running only after this call, so kPreempted here
  // means a re-admission, whose prompt was charged at its first admission.
  if (request.state != RequestState::kPreempted) {
    counters_[c] += options_.input_weight * request.prompt_len / weights_[c];
  }
}

Request* VtcPolicy::PickVictim(std::span<Request* const> running, TimeNs /*now*/) {
  Request* victim = nullptr;
  for (Request* r : running) {
    EnsureClient(r->client);
    if (victim == nullptr) {
      victim = r;
      continue;
    }
    const double c = counters_[r->client];
    const double v = counters_[victim->client];
    // ">=": among equals, the later candidate (later admitted, or higher client index).
    if (c > v || (c == v && r->client >= victim->client)) victim = r;
  }
  return victim;
}

void VtcPolicy::OnStepDone(const StepPlan& plan, const StepResult& /*result*/, TimeNs /*now*/) {
  for (const ScheduledRequest& s : plan.seqs) {
    if (!s.emits_token || s.is_padding) continue;
    const int32_t c = s.request->client;
    EnsureClient(c);
    counters_[c] += options_.output_weight / weights_[c];
  }
}

StatusOr<std::unique_ptr<Policy>> MakeVtcPolicy(const NamedParams& config,
                                                const PolicyContext& context) {
  ParamReader params(config);
  VtcPolicyOptions options;
  options.input_weight = params.GetDouble("input_weight", options.input_weight, kNonNegative);
  options.output_weight = params.GetDouble("output_weight", options.output_weight, kNonNegative);
  SERVELAB_RETURN_IF_ERROR(params.Finish());
  std::vector<double> weights;
  for (const PolicyClient& client : context.clients) {
    if (!(client.weight > 0.0) || !std::isfinite(client.weight)) {
      std::ostringstream message;
      if (!config.where.empty()) message << config.where << ": ";
      message << config.path << ": policy 'vtc' needs every client weight > 0; client '"
              << client.name << "' has weight " << client.weight;
      return InvalidArgument(message.str());
    }
    weights.push_back(client.weight);
  }
  return std::unique_ptr<Policy>(std::make_unique<VtcPolicy>(options, std::move(weights)));
}

}  // namespace servelab
