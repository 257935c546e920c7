#include "core/scheduler.h"

#include <algorithm>
#include <limits>

#include "core/status.h"

namespace servelab {

Scheduler::Scheduler(const SchedulerConfig& config, int32_t max_model_len,
                     std::unique_ptr<Policy> policy, KvCacheManager* kv)
    : config_(config),
      max_model_len_(max_model_len),
      policy_(std::move(policy)),
      kv_(kv),
      batching_(MakeBatchFormation(config.batching)) {
  SERVELAB_CHECK(policy_ != nullptr && kv_ != nullptr);
  SERVELAB_CHECK(kv_->BlockSize() == config_.block_size);
  if (config_.has_sla_control) {
    sla_ = std::make_unique<SlaController>(config_.sla_control, config_.max_num_seqs,
                                           config_.max_num_batched_tokens);
  }
  SERVELAB_CHECK(config_.batches_in_flight >= 1);
  running_.reserve(config_.max_num_seqs);
  finished_.reserve(config_.max_num_seqs);
  plan_.seqs.reserve(config_.max_num_seqs);
  if (config_.batches_in_flight > 1) flights_.resize(static_cast<size_t>(config_.batches_in_flight));
}

bool Scheduler::AddRequest(Request& request, TimeNs now) {
  SERVELAB_CHECK(request.prompt_len >= 1 && request.target_output_len >= 1);
  const int64_t total = int64_t{request.prompt_len} + request.target_output_len;
  RejectReason reason = RejectReason::kNone;
  if (total > max_model_len_) {
    reason = RejectReason::kExceedsContextWindow;
  } else if (!kv_->CanEverHold(total - 1)) {
    // The last sampled token's KV is never computed, hence total - 1 cached tokens at
    // most; even alone it could not hold them: it would be preempted forever.
    reason = RejectReason::kExceedsKvCapacity;
  } else if (!config_.chunked_prefill && request.prompt_len > config_.max_num_batched_tokens) {
    reason = RejectReason::kExceedsTokenBudget;
  }
  if (reason != RejectReason::kNone) {
    request.state = RequestState::kRejected;
    request.reject_reason = reason;
    request.finish = now;
    return false;
  }
  if (free_slots_.empty()) {
    request.slot = num_slots_++;
  } else {
    request.slot = free_slots_.back();
    free_slots_.pop_back();
  }
  request.state = RequestState::kWaiting;
  tokens_pending_ += total;
  policy_->Enqueue(request, now);
  return true;
}

int32_t Scheduler::NumSeqsLimit() const {
  return sla_ ? sla_->NumSeqsLimit() : config_.max_num_seqs;
}

int32_t Scheduler::TokenBudgetLimit() const {
  if (!sla_) return config_.max_num_batched_tokens;
  // Without chunked prefill a prompt above the controller's budget could never be
  // admitted once nothing runs: no step would end, so the controller could never relax.
  // With nothing running there is no TPOT to protect: the configured budget applies.
  if (!config_.chunked_prefill && running_.empty()) return config_.max_num_batched_tokens;
  // Running requests always get their decode token: the controller trims prefill only.
  return std::max(sla_->TokenBudget(), NumSchedulable());
}

const StepPlan& Scheduler::Schedule(TimeNs now) {
  plan_.Clear();
  plan_.start = now;
  preempted_this_step_ = 0;
  memory_preemption_this_step_ = false;
  int32_t budget = TokenBudgetLimit();
  if (batching_->Displaces()) PreemptForWaiting(now, budget);
  ScheduleRunning(now, budget);
  batching_->AddPadding(plan_);
  if (batching_->AdmissionOpen(NumRunning(), memory_preemption_this_step_)) {
    AdmitWaiting(now, budget);
  }
  preempted_last_step_ = preempted_this_step_;
  FinishPlan();
  if (config_.batches_in_flight == 1 || plan_.empty()) return plan_;
  // Pipeline parallelism: the batch joins those in flight; its requests sit out the
  // batches planned until it completes.
  SERVELAB_CHECK(num_flights_ < config_.batches_in_flight);
  for (const ScheduledRequest& seq : plan_.seqs) {
    if (seq.is_padding) continue;
    seq.request->in_flight = true;
    ++num_in_flight_;
  }
  StepPlan& flight = flights_[(first_flight_ + num_flights_) % flights_.size()];
  std::swap(flight, plan_);
  ++num_flights_;
  return flight;
}

const StepPlan& Scheduler::LastPlan() const {
  if (config_.batches_in_flight == 1 || num_flights_ == 0) return plan_;
  return flights_[(first_flight_ + num_flights_ - 1) % flights_.size()];
}

const StepPlan& Scheduler::OldestInFlight() const {
  if (config_.batches_in_flight == 1) return plan_;
  SERVELAB_CHECK(num_flights_ > 0);
  return flights_[first_flight_];
}

std::span<Request* const> Scheduler::VictimCandidates(std::span<Request* const> requests) {
  if (num_in_flight_ == 0) return requests;
  victims_.clear();
  for (Request* r : requests) {
    if (!r->in_flight) victims_.push_back(r);
  }
  return victims_;
}

void Scheduler::FinishPlan() {
  int32_t prefill = 0, decode = 0, emitting = 0, padding = 0;
  for (const ScheduledRequest& s : plan_.seqs) {
    const bool is_decode = s.IsDecode();
    decode += is_decode ? 1 : 0;
    prefill += is_decode ? 0 : s.num_new_tokens;
    emitting += s.emits_token ? 1 : 0;
    padding += s.is_padding ? 1 : 0;
  }
  plan_.num_prefill_tokens = prefill;
  plan_.num_decode_tokens = decode;
  plan_.num_emitting = emitting;
  plan_.num_padding = padding;
  if (prefill > 0) {
    decode_streak_ = 0;
  } else if (decode > 0) {
    decode_streak_ = std::min(decode_streak_ + 1, kMaxStepsSincePrefill);
    plan_.steps_since_prefill = decode_streak_;
  }
}

void Scheduler::PreemptForWaiting(TimeNs now, int32_t budget) {
  // Each pass displaces one victim; at most as many passes as there are running requests.
  for (size_t guard = running_.size(); guard > 0 && !running_.empty(); --guard) {
    Request* waiting = policy_->Peek(now);
    if (waiting == nullptr) return;
    const int32_t to_compute = waiting->NumTokensToCompute() - kv_->CachedPrefixTokens(*waiting);
    const int32_t n = std::max(1, std::min(to_compute, budget));
    const bool has_slot = NumSchedulable() < NumSeqsLimit() &&
                          static_cast<int64_t>(running_.size()) < MaxRunning();
    if (has_slot && kv_->CanAdmit(*waiting, n)) return;  // it will join without displacing
    const std::span<Request* const> candidates = VictimCandidates(running_);
    if (candidates.empty()) return;
    Request* victim = policy_->PickVictim(candidates, now);
    if (victim == nullptr || !policy_->ShouldPreemptFor(*waiting, *victim)) return;
    Preempt(*victim, now);
  }
}

void Scheduler::ScheduleRunning(TimeNs now, int32_t& budget_out) {
  int32_t budget = budget_out;  // a local: the compiler keeps it in a register
  // One batch in flight holds every running request (at most max_num_seqs of them); with
  // several, each batch holds up to max_num_seqs of those in none.
  const size_t max_batch = config_.batches_in_flight > 1 ? static_cast<size_t>(NumSeqsLimit())
                                                         : running_.size();
  size_t i = 0;
  while (i < running_.size() && plan_.seqs.size() < max_batch) {
    Request& r = *running_[i];
    if (r.in_flight) {  // in a batch still in the pipeline
      ++i;
      continue;
    }
    int32_t n = r.NumTokensToCompute();
    SERVELAB_CHECK(n >= 1);
    if (n > budget) n = config_.chunked_prefill || r.num_generated > 0 ? budget : 0;
    if (n <= 0) {  // no budget left for it in this step
      ++i;
      continue;
    }
    // Fast path (most decode steps): the request's last block still has room.
    if (!kv_->AllocateSlots(r, n)) {
      bool preempted_self = false;
      bool stalled = false;
      do {
        // Victims come from the requests not yet scheduled in this step (r included).
        const std::span<Request* const> candidates =
            VictimCandidates(std::span<Request* const>(running_.data() + i, running_.size() - i));
        Request* victim = policy_->PickVictim(candidates, now);
        if (victim == nullptr) {
          stalled = true;
          break;
        }
        SERVELAB_CHECK_MSG(std::find(candidates.begin(), candidates.end(), victim) !=
                               candidates.end(),
                           "policy picked a victim outside the candidates");
        preempted_self = victim == &r;
        memory_preemption_this_step_ = true;
        Preempt(*victim, now);
        if (preempted_self) break;
      } while (!kv_->AllocateSlots(r, n));
      if (preempted_self) continue;  // running_[i] is now the next request
      if (stalled) {
        ++i;
        continue;
      }
    }
    AddToPlan(r, n);
    budget -= n;
    ++i;
  }
  budget_out = budget;
}

void Scheduler::AdmitWaiting(TimeNs now, int32_t& budget) {
  const int32_t max_seqs = NumSeqsLimit();
  const int64_t max_running = MaxRunning();
  while (budget > 0 && NumSchedulable() < max_seqs &&
         static_cast<int64_t>(running_.size()) < max_running) {
    Request* r = policy_->Peek(now);
    if (r == nullptr) break;
    // Tokens its cached prefix covers are not computed (prefix caching; else 0).
    const int32_t cached = kv_->CachedPrefixTokens(*r);
    const int32_t to_compute = r->NumTokensToCompute() - cached;
    int32_t n = to_compute;
    const bool may_chunk =
        batching_->ChunksAdmissions() && (config_.chunked_prefill || r->num_generated > 0);
    if (n > budget) {
      if (!may_chunk) break;
      n = budget;
    }
    // Admission asks for room for the request's whole remaining prefill, though only this
    // step's chunk is allocated: admitting a prompt whose later chunks cannot fit only
    // has it preempted by its own next chunk, again and again (recompute thrashing).
    if (!kv_->Admit(*r, n, to_compute, plan_.swap_in)) break;
    policy_->Admitted(*r, now);
    r->state = RequestState::kRunning;
    if (r->first_scheduled == kNever) r->first_scheduled = now;
    r->num_cached_tokens += cached;
    running_.push_back(r);
    AddToPlan(*r, n);
    plan_.seqs.back().num_cached_tokens = cached;
    plan_.num_cached_tokens += cached;
    budget -= n;
  }
}

void Scheduler::Preempt(Request& victim, TimeNs now) {
  auto it = std::find(running_.begin(), running_.end(), &victim);
  SERVELAB_CHECK(it != running_.end());
  running_.erase(it);
  // Swap keeps its computed tokens on the host; otherwise (or when the host is full)
  // they are recomputed.
  if (config_.preemption != PreemptionMode::kSwap || !kv_->SwapOut(victim, plan_.swap_out)) {
    victim.num_recomputed_tokens += victim.num_computed_tokens;
    kv_->Free(victim);
    victim.num_computed_tokens = 0;
  }
  victim.num_preemptions += 1;
  victim.state = RequestState::kPreempted;
  ++preempted_this_step_;
  policy_->Enqueue(victim, now);
}

std::span<Request* const> Scheduler::Commit(const StepResult& result, TimeNs end) {
  finished_.clear();
  const StepPlan& plan = OldestInFlight();
  if (kv_->Cache() != nullptr) {
    // Blocks this step fills are cached before a finishing request frees them.
    for (const ScheduledRequest& s : plan.seqs) {
      if (s.is_padding) continue;
      kv_->CacheComputedBlocks(*s.request, s.num_computed_tokens, s.ContextLen());
    }
  }
  size_t sampled = 0;
  bool any_done = false;
  for (const ScheduledRequest& s : plan.seqs) {
    if (s.is_padding) continue;
    Request& r = *s.request;
    if (config_.batches_in_flight > 1) {
      r.in_flight = false;
      --num_in_flight_;
    }
    r.num_computed_tokens += s.num_new_tokens;
    if (!s.emits_token) continue;
    r.num_generated += 1;
    if (r.num_generated == 1) {  // (reads only the hot cache line: see request.h)
      r.first_token = end;
      if (sla_) sla_->OnFirstToken(end - r.arrival);
    }
    r.last_token = end;
    if (sampled < result.stopped.size() && result.stopped[sampled] != 0 &&
        r.num_generated < r.target_output_len) {
      r.stopped_early = true;
    }
    ++sampled;
    if (!IsDone(r)) continue;
    any_done = true;
    kv_->Free(r);
    if (batching_->Leaves(r)) Finish(r, end);
  }
  if (any_done) std::erase_if(running_, [this](const Request* r) { return IsDone(*r); });
  for (Request* r : batching_->Release(NumRunning())) Finish(*r, end);
  if (sla_) sla_->OnStep(end - plan.start, plan.num_decode_tokens);
  policy_->OnStepDone(plan, result, end);
  if (config_.batches_in_flight > 1) {
    first_flight_ = (first_flight_ + 1) % flights_.size();
    --num_flights_;
  }
  return finished_;
}

bool Scheduler::CanBeginDecodeRun() const {
  const DecodeRunSupport support = policy_->DecodeRuns();
  if (running_.empty() || support == DecodeRunSupport::kNone || sla_ != nullptr ||
      config_.batches_in_flight > 1 || kv_->Cache() != nullptr || batching_->Holds()) {
    return false;
  }
  const auto n = static_cast<int32_t>(running_.size());
  const int32_t budget = TokenBudgetLimit();
  if (n > budget) return false;  // someone would wait for budget: not every request decodes
  if (policy_->NumWaiting() > 0) {
    // Schedule() would try to admit (and, batching permitting, to displace for) the
    // waiting requests every iteration: a run needs that to be impossible throughout.
    // The slots, the budget left after the decodes and the batching rule stay as they are
    // while the batch does.
    const bool admission_closed =
        n >= NumSeqsLimit() || budget - n <= 0 || !batching_->AdmissionOpen(n, false);
    if (support != DecodeRunSupport::kBlockedQueue || !admission_closed) return false;
  }
  return true;
}

int32_t Scheduler::BeginDecodeRun(TimeNs now) {
  SERVELAB_CHECK(!run_.tail_in_flight);
  if (!CanBeginDecodeRun()) return 0;
  int32_t limit = std::numeric_limits<int32_t>::max();
  plan_.Clear();
  plan_.start = now;
  const int32_t block_size = config_.block_size;
  run_.allocated = 0;
  run_.start = now;
  const size_t n = running_.size();
  run_.first.resize(n);
  run_.bucket.resize(n);
  run_.bucket_begin.assign(static_cast<size_t>(block_size) + 1, 0);
  plan_.seqs.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    Request& r = *running_[i];
    // Every request decodes, and got its last token now. (A refusal here leaves plan_
    // half built: the next Schedule() clears it.)
    if (r.NumTokensToCompute() != 1 || r.last_token != now || IsDone(r)) return 0;
    limit = std::min(limit, r.target_output_len - r.num_generated);
    plan_.seqs.push_back(ScheduledRequest{&r, 1, r.num_computed_tokens, true, false});
    // Iteration j writes token num_computed_tokens + j: it needs a block when that token
    // is past the blocks the request holds, and then every block_size iterations.
    const int64_t first = static_cast<int64_t>(r.block_table.size()) * block_size - r.num_computed_tokens;
    SERVELAB_CHECK(first >= 0 && first <= std::numeric_limits<int32_t>::max());
    run_.first[i] = static_cast<int32_t>(first);
    run_.bucket[i] = static_cast<int32_t>(first) % block_size;  // one division a request
    ++run_.bucket_begin[static_cast<size_t>(run_.bucket[i]) + 1];
  }
  // The requests by first % block_size (a counting sort: running order within each).
  for (size_t b = 1; b < run_.bucket_begin.size(); ++b) run_.bucket_begin[b] += run_.bucket_begin[b - 1];
  run_.order.resize(n);
  run_.next.assign(run_.bucket_begin.begin(), run_.bucket_begin.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    run_.order[run_.next[static_cast<size_t>(run_.bucket[i])]++] = static_cast<int32_t>(i);
  }
  // FinishPlan's counters, known here: n decodes, each emitting (a run has no padding).
  plan_.num_prefill_tokens = 0;
  plan_.num_decode_tokens = static_cast<int32_t>(n);
  plan_.num_emitting = static_cast<int32_t>(n);
  plan_.num_padding = 0;
  // Iteration j is the streak's (decode_streak_ + 1 + j)th: the run's backend counts j.
  plan_.steps_since_prefill = std::min(decode_streak_ + 1, kMaxStepsSincePrefill);
  preempted_last_step_ = 0;
  return limit;
}

bool Scheduler::AdvanceDecodeRun() {
  const int32_t j = run_.allocated;
  const auto bucket = static_cast<size_t>(j % config_.block_size);
  const std::span<const int32_t> crossing(run_.order.data() + run_.bucket_begin[bucket],
                                          run_.bucket_begin[bucket + 1] - run_.bucket_begin[bucket]);
  int32_t needed = 0;
  for (const int32_t i : crossing) needed += run_.first[static_cast<size_t>(i)] <= j ? 1 : 0;
  if (needed > kv_->NumFreeBlocks()) return false;
  // In running order, as ScheduleRunning allocates them: the same blocks go to the same
  // requests.
  for (const int32_t i : crossing) {
    if (run_.first[static_cast<size_t>(i)] > j) continue;
    const bool allocated = kv_->AllocateSlots(*running_[static_cast<size_t>(i)], j + 1);
    SERVELAB_CHECK(allocated);
  }
  ++run_.allocated;
  return true;
}

void Scheduler::EndDecodeRun(std::span<const TimeNs> ends) {
  const auto k = static_cast<int32_t>(ends.size());
  SERVELAB_CHECK(k <= run_.allocated && run_.allocated <= k + 1);
  StepResult result;
  TimeNs start = run_.start;
  for (const TimeNs end : ends) {
    result.elapsed = end - start;
    policy_->OnStepDone(plan_, result, end);
    start = end;
  }
  run_.completed = k;
  // Every iteration allocated ran or runs (the tail): each a decode-only step.
  decode_streak_ = static_cast<int32_t>(
      std::min<int64_t>(int64_t{decode_streak_} + run_.allocated, kMaxStepsSincePrefill));
  if (run_.allocated == k + 1) {
    // The tail is in flight: its Commit applies the run's tokens with its own.
    run_.tail_in_flight = true;
  } else if (k > 0) {
    AdvanceRunning(k, ends.back());
  }
  run_.allocated = 0;
}

namespace {

// One request `iterations` decode tokens further, its last at `last_token`.
void AdvanceDecode(Request& r, int32_t iterations, TimeNs last_token) {
  r.num_computed_tokens += iterations;
  r.num_generated += iterations;
  r.last_token = last_token;
  SERVELAB_CHECK(r.num_generated <= r.target_output_len);
}

}  // namespace

void Scheduler::AdvanceRunning(int32_t iterations, TimeNs last_token) {
  for (Request* r : running_) AdvanceDecode(*r, iterations, last_token);
}

std::span<Request* const> Scheduler::CommitDecodeRunTail(const StepResult& result, TimeNs end) {
  SERVELAB_CHECK(run_.tail_in_flight);
  run_.tail_in_flight = false;
  finished_.clear();
  // AdvanceRunning and the completion check in one pass over the running requests (each
  // request's fields are one cache line: reading them twice was a measurable part of a
  // run's cost). A request's completion depends on it alone.
  const int32_t iterations = run_.completed + 1;
  bool any_done = false;
  for (Request* r : running_) {
    AdvanceDecode(*r, iterations, end);
    if (!IsDone(*r)) continue;
    any_done = true;
    kv_->Free(*r);
    if (batching_->Leaves(*r)) Finish(*r, end);
  }
  if (any_done) std::erase_if(running_, [this](const Request* r) { return IsDone(*r); });
  for (Request* r : batching_->Release(NumRunning())) Finish(*r, end);
  policy_->OnStepDone(plan_, result, end);
  return finished_;
}

void Scheduler::Finish(Request& request, TimeNs end) {
  request.state = RequestState::kFinished;
  request.finish = end;
  kv_->Free(request);
  tokens_pending_ -= int64_t{request.prompt_len} + request.target_output_len;
  free_slots_.push_back(request.slot);
  finished_.push_back(&request);
}

}  // namespace servelab
