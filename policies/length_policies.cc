#include "policies/length_policies.h"

#include <algorithm>
#include <tuple>

#include "core/params.h"

namespace servelab {
namespace {

// The waiting order's primary key for an unpromoted request: smaller goes first.
double RankKey(LengthRule rule, const Request& r) {
  switch (rule) {
    case LengthRule::kSjf:
      return r.policy_score;
    case LengthRule::kSrpt:
      return LengthPolicy::PredictedRemaining(r);
    case LengthRule::kLof:
      return -r.policy_score;
  }
  return 0.0;
}

}  // namespace

bool LengthPolicy::Before::operator()(const Request* a, const Request* b) const {
  if (a->policy_level != b->policy_level) return a->policy_level > b->policy_level;
  if (a->policy_level > 0) return a->policy_seq < b->policy_seq;  // promoted: FIFO
  const double ka = RankKey(rule, *a);
  const double kb = RankKey(rule, *b);
  return std::tie(ka, a->arrival, a->id) < std::tie(kb, b->arrival, b->id);
}

LengthPolicy::LengthPolicy(const LengthPolicyOptions& options, uint64_t seed)
    : options_(options),
      predictor_(options.rule == LengthRule::kLof ? LengthPredictorConfig{} : options.predictor,
                 seed),
      waiting_(Before{options.rule}) {
  SERVELAB_CHECK(options_.starvation_iters >= 0);
}

std::string_view LengthPolicy::Name() const {
  switch (options_.rule) {
    case LengthRule::kSjf:
      return "sjf";
    case LengthRule::kSrpt:
      return "srpt";
    case LengthRule::kLof:
      return "lof";
  }
  return "?";
}

double LengthPolicy::PredictedRemaining(const Request& request) {
  return std::max(1.0, request.policy_score - request.num_generated);
}

void LengthPolicy::Enqueue(Request& request, TimeNs /*now*/) {
  // The prediction is drawn once; a preempted request comes back with it. (It is a
  // pure function of seed and request, so drawing again would give the same value.)
  if (request.state != RequestState::kPreempted || request.policy_score <= 0.0) {
    request.policy_score = predictor_.Predict(request);
  }
  request.policy_level = 0;
  request.policy_seq = next_seq_++;
  const bool inserted = waiting_.insert(&request).second;
  SERVELAB_CHECK_MSG(inserted, "request enqueued twice");
  if (options_.starvation_iters > 0) {
    unpromoted_.emplace(request.policy_seq, Waiter{&request, iters_});
  }
}

Request* LengthPolicy::Peek(TimeNs /*now*/) {
  return waiting_.empty() ? nullptr : *waiting_.begin();
}

void LengthPolicy::Admitted(Request& request, TimeNs /*now*/) {
  SERVELAB_CHECK(!waiting_.empty() && *waiting_.begin() == &request);
  waiting_.erase(waiting_.begin());
  if (request.policy_level == 0 && options_.starvation_iters > 0) {
    unpromoted_.erase(request.policy_seq);
  }
  request.policy_level = 0;
}

Request* LengthPolicy::PickVictim(std::span<Request* const> running, TimeNs /*now*/) {
  Request* victim = nullptr;
  for (Request* r : running) {
    if (victim == nullptr) {
      victim = r;
      continue;
    }
    bool later = false;
    if (options_.rule == LengthRule::kLof) {
      later = std::tie(r->arrival, r->id) > std::tie(victim->arrival, victim->id);
    } else {
      const double kr = PredictedRemaining(*r);
      const double kv = PredictedRemaining(*victim);
      later = std::tie(kr, r->arrival, r->id) > std::tie(kv, victim->arrival, victim->id);
    }
    if (later) victim = r;
  }
  return victim;
}

bool LengthPolicy::ShouldPreemptFor(const Request& waiting, const Request& running) const {
  return options_.preemptive && PredictedRemaining(waiting) < PredictedRemaining(running);
}

void LengthPolicy::OnStepDone(const StepPlan& /*plan*/, const StepResult& /*result*/,
                              TimeNs /*now*/) {
  ++iters_;
  if (options_.starvation_iters == 0) return;
  // unpromoted_ is in enqueue order, hence in enqueued_iter order: the starved ones are
  // a prefix of it.
  while (!unpromoted_.empty()) {
    auto it = unpromoted_.begin();
    if (iters_ - it->second.enqueued_iter < options_.starvation_iters) break;
    Request& r = *it->second.request;
    unpromoted_.erase(it);
    waiting_.erase(&r);  // before its key fields change
    r.policy_level = 1;
    r.policy_seq = next_seq_++;
    waiting_.insert(&r);
  }
}

namespace {

StatusOr<std::unique_ptr<Policy>> MakeShortestFirst(ParamReader& params,
                                                    const PolicyContext& context,
                                                    LengthRule rule) {
  LengthPolicyOptions options;
  options.rule = rule;
  options.predictor = ReadLengthPredictorParams(params);
  options.starvation_iters =
      params.GetInt("starvation_iters", options.starvation_iters, kNonNegative);
  options.preemptive = params.GetBool("preemptive", rule == LengthRule::kSrpt);
  SERVELAB_RETURN_IF_ERROR(params.Finish());
  return std::unique_ptr<Policy>(std::make_unique<LengthPolicy>(options, context.seed));
}

}  // namespace

StatusOr<std::unique_ptr<Policy>> MakeSjfPolicy(ParamReader& params,
                                                const PolicyContext& context) {
  return MakeShortestFirst(params, context, LengthRule::kSjf);
}

StatusOr<std::unique_ptr<Policy>> MakeSrptPolicy(ParamReader& params,
                                                 const PolicyContext& context) {
  return MakeShortestFirst(params, context, LengthRule::kSrpt);
}

StatusOr<std::unique_ptr<Policy>> MakeLofPolicy(ParamReader& params,
                                                const PolicyContext& context) {
  SERVELAB_RETURN_IF_ERROR(params.Finish());
  LengthPolicyOptions options;
  options.rule = LengthRule::kLof;
  return std::unique_ptr<Policy>(std::make_unique<LengthPolicy>(options, context.seed));
}

}  // namespace servelab
