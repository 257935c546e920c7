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
  // Count the step's sampled tokens per client, then charge each client once. The counts
  // go to kChargeLanes interleaved copies by batch position: consecutive tokens of one
  // client would otherwise chain every increment through the same memory word, which
  // made this loop the largest cost of a VTC iteration at 256 running requests.
  const size_t n = counters_.size();
  step_tokens_.assign(kChargeLanes * n, 0);
  const std::vector<ScheduledRequest>& seqs = plan.seqs;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const ScheduledRequest& s = seqs[i];
    if (!s.emits_token || s.is_padding) continue;
    const auto c = static_cast<size_t>(s.request->client);  // on the request's hot line
    SERVELAB_CHECK(c < n);  // Enqueue made room for every client that can be running
    ++step_tokens_[(i % kChargeLanes) * n + c];
  }
  for (size_t c = 0; c < n; ++c) {
    int64_t tokens = 0;
    for (size_t lane = 0; lane < kChargeLanes; ++lane) tokens += step_tokens_[lane * n + c];
    if (tokens > 0) counters_[c] += options_.output_weight * static_cast<double>(tokens) / weights_[c];
  }
}

StatusOr<std::unique_ptr<Policy>> MakeVtcPolicy(ParamReader& params,
                                                const PolicyContext& context) {
  VtcPolicyOptions options;
  options.input_weight = params.GetDouble("input_weight", options.input_weight, kNonNegative);
  options.output_weight = params.GetDouble("output_weight", options.output_weight, kNonNegative);
  SERVELAB_RETURN_IF_ERROR(params.Finish());
  std::vector<double> weights;
  for (const PolicyClient& client : context.clients) {
    if (!(client.weight > 0.0) || !std::isfinite(client.weight)) {
      std::ostringstream message;
      const NamedParams& config = params.Named();
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
