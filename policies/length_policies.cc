#include "policies/length_policies.h"

#include <algorithm>
#include <tuple>

#include "core/params.h"

namespace servelab {
namespace {

// The waiting order's primary key for an unpromoted request: smaller goes first.
double RankKey(LengthRule rule, double predicted, const Request& r) {
  switch (rule) {
    case LengthRule::kSjf:
      return predicted;
    case LengthRule::kSrpt:
      return std::max(1.0, predicted - r.num_generated);
    case LengthRule::kLof:
      return -predicted;
  }
  return 0.0;
}

}  // namespace

bool LengthPolicy::Before::operator()(const Request* a, const Request* b) const {
  const State& sa = policy->StateOf(*a);
  const State& sb = policy->StateOf(*b);
  if (sa.promoted != sb.promoted) return sa.promoted;
  if (sa.promoted) return sa.seq < sb.seq;  // promoted: FIFO
  const LengthRule rule = policy->options_.rule;
  const double ka = RankKey(rule, sa.predicted, *a);
  const double kb = RankKey(rule, sb.predicted, *b);
  return std::tie(ka, a->arrival, a->id) < std::tie(kb, b->arrival, b->id);
}

LengthPolicy::LengthPolicy(const LengthPolicyOptions& options, uint64_t seed)
    : options_(options),
      predictor_(options.rule == LengthRule::kLof ? LengthPredictorConfig{} : options.predictor,
                 seed),
      waiting_(Before{this}) {
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

double LengthPolicy::PredictedRemaining(const Request& request) const {
  return std::max(1.0, StateOf(request).predicted - request.num_generated);
}

void LengthPolicy::Enqueue(Request& request, TimeNs /*now*/) {
  State& state = StateOf(request);
  // The prediction is drawn once; a preempted request comes back with it. (It is a
  // pure function of seed and request, so drawing again would give the same value.)
  if (request.state != RequestState::kPreempted || state.predicted <= 0.0) {
    state.predicted = predictor_.Predict(request);
  }
  state.promoted = false;
  state.seq = next_seq_++;
  const bool inserted = waiting_.insert(&request).second;
  SERVELAB_CHECK_MSG(inserted, "request enqueued twice");
  if (options_.starvation_iters > 0) {
    unpromoted_.emplace(state.seq, Waiter{&request, iters_});
  }
}

Request* LengthPolicy::Peek(TimeNs /*now*/) {
  return waiting_.empty() ? nullptr : *waiting_.begin();
}

void LengthPolicy::Admitted(Request& request, TimeNs /*now*/) {
  SERVELAB_CHECK(!waiting_.empty() && *waiting_.begin() == &request);
  waiting_.erase(waiting_.begin());
  State& state = StateOf(request);
  if (!state.promoted && options_.starvation_iters > 0) unpromoted_.erase(state.seq);
  state.promoted = false;
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
    waiting_.erase(&r);  // before its key changes
    State& state = StateOf(r);
    state.promoted = true;
    state.seq = next_seq_++;
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
