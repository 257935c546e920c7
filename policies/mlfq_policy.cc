#include "policies/mlfq_policy.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "core/params.h"

namespace servelab {
namespace {

constexpr TimeNs kUnbounded = std::numeric_limits<TimeNs>::max();

}  // namespace

MlfqPolicy::MlfqPolicy(const MlfqPolicyOptions& options,
                       std::function<double(int32_t)> prefill_time_s)
    : prefill_time_s_(std::move(prefill_time_s)) {
  SERVELAB_CHECK(options.levels >= 1 && options.levels <= 64);
  SERVELAB_CHECK(options.base_quantum_ms > 0.0 && options.quantum_ratio >= 1.0);
  SERVELAB_CHECK(options.starvation_s >= 0.0 && options.prefill_ms_per_token > 0.0);
  queues_.resize(options.levels);
  quantum_ns_.resize(options.levels, kUnbounded);
  for (int32_t l = 0; l + 1 < options.levels; ++l) {
    const double ns = options.base_quantum_ms * 1e6 * std::pow(options.quantum_ratio, l);
    // Quanta past ~292 years are as good as unbounded.
    quantum_ns_[l] = ns >= 9e18 ? kUnbounded : std::max<TimeNs>(1, std::llround(ns));
  }
  if (options.starvation_s > 0.0) {
    starvation_ns_ = std::max<TimeNs>(1, FromSeconds(options.starvation_s));
  }
  if (!prefill_time_s_) {
    const double s_per_token = options.prefill_ms_per_token * 1e-3;
    prefill_time_s_ = [s_per_token](int32_t n) { return s_per_token * n; };
  }
}

int32_t MlfqPolicy::SkipJoinLevel(int32_t prompt_len) const {
  const double t = prefill_time_s_(prompt_len);
  const int32_t last = NumLevels() - 1;
  if (!(t * 1e9 < 9e18)) return last;  // unbounded (or NaN) estimate
  const TimeNs prefill = FromSeconds(t);
  for (int32_t l = 0; l < last; ++l) {
    if (quantum_ns_[l] >= prefill) return l;
  }
  return last;
}

void MlfqPolicy::Push(Request& request, int32_t level) {
  queues_[level].push_back(&request);
  nonempty_ |= uint64_t{1} << level;
}

void MlfqPolicy::Enqueue(Request& request, TimeNs now) {
  State& state = StateOf(request);
  if (request.state != RequestState::kPreempted) {
    state.level = SkipJoinLevel(request.prompt_len);
    state.service_ns = 0.0;
    state.promoted = false;
  }
  SERVELAB_CHECK(state.level >= 0 && state.level < NumLevels());
  state.waiting_since = now;
  Push(request, state.level);
  ++num_waiting_;
}

Request* MlfqPolicy::Peek(TimeNs /*now*/) {
  if (nonempty_ == 0) return nullptr;
  return queues_[std::countr_zero(nonempty_)].front();
}

void MlfqPolicy::Admitted(Request& request, TimeNs /*now*/) {
  const int32_t l = StateOf(request).level;
  SERVELAB_CHECK(l >= 0 && l < NumLevels());
  std::deque<Request*>& queue = queues_[l];
  SERVELAB_CHECK(!queue.empty() && queue.front() == &request);
  queue.pop_front();
  if (queue.empty()) nonempty_ &= ~(uint64_t{1} << l);
  --num_waiting_;
}

Request* MlfqPolicy::PickVictim(std::span<Request* const> running, TimeNs /*now*/) {
  Request* victim = nullptr;
  int32_t victim_level = -1;
  for (Request* r : running) {
    // ">=": within the least urgent level, the latest admitted.
    const int32_t level = StateOf(*r).level;
    if (level >= victim_level) {
      victim = r;
      victim_level = level;
    }
  }
  return victim;
}

bool MlfqPolicy::ShouldPreemptFor(const Request& waiting, const Request& running) const {
  return StateOf(waiting).level < StateOf(running).level;
}

void MlfqPolicy::OnStepDone(const StepPlan& plan, const StepResult& result, TimeNs now) {
  const int32_t last = NumLevels() - 1;
  for (const ScheduledRequest& s : plan.seqs) {
    if (s.is_padding) continue;
    State& state = states_[static_cast<size_t>(s.request->slot)];  // enqueued, hence sized
    state.service_ns += static_cast<double>(result.elapsed);
    if (state.promoted) continue;  // pinned to level 0 until it finishes (header)
    if (state.level < last && state.service_ns > static_cast<double>(quantum_ns_[state.level])) {
      state.level += 1;
      state.service_ns = 0.0;
    }
  }
  PromoteStarved(now);
}

void MlfqPolicy::PromoteStarved(TimeNs now) {
  if (starvation_ns_ == 0) return;
  for (int32_t l = 1; l < NumLevels(); ++l) {
    std::deque<Request*>& queue = queues_[l];
    while (!queue.empty() && now - StateOf(*queue.front()).waiting_since > starvation_ns_) {
      Request& r = *queue.front();
      queue.pop_front();
      State& state = StateOf(r);
      state.level = 0;
      state.service_ns = 0.0;
      state.promoted = true;
      Push(r, 0);
    }
    if (queue.empty()) nonempty_ &= ~(uint64_t{1} << l);
  }
}

StatusOr<std::unique_ptr<Policy>> MakeMlfqPolicy(ParamReader& params,
                                                 const PolicyContext& context) {
  MlfqPolicyOptions options;
  if (context.prefill_time_s) {
    // FastServe's base quantum: the minimum iteration time, i.e. a one-token iteration.
    const double one_token_ms = context.prefill_time_s(1) * 1e3;
    if (one_token_ms > 0.0 && std::isfinite(one_token_ms)) options.base_quantum_ms = one_token_ms;
  }
  options.levels = static_cast<int32_t>(params.GetInt("levels", options.levels, Bounds{1, 64}));
  options.base_quantum_ms = params.GetDouble("base_quantum_ms", options.base_quantum_ms, kPositive);
  options.quantum_ratio = params.GetDouble("quantum_ratio", options.quantum_ratio, kAtLeastOne);
  options.starvation_s = params.GetDouble("starvation_s", options.starvation_s, kNonNegative);
  options.prefill_ms_per_token =
      params.GetDouble("prefill_ms_per_token", options.prefill_ms_per_token, kPositive);
  SERVELAB_RETURN_IF_ERROR(params.Finish());
  std::function<double(int32_t)> prefill =
      params.Has("prefill_ms_per_token") ? nullptr : context.prefill_time_s;
  return std::unique_ptr<Policy>(std::make_unique<MlfqPolicy>(options, std::move(prefill)));
}

}  // namespace servelab
