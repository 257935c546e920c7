#include "core/scheduler.h"

#include <algorithm>

#include "core/status.h"

namespace servelab {

Scheduler::Scheduler(const SchedulerConfig& config, int32_t max_model_len,
                     std::unique_ptr<Policy> policy, KvCacheManager* kv)
    : config_(config), max_model_len_(max_model_len), policy_(std::move(policy)), kv_(kv) {
  SERVELAB_CHECK(policy_ != nullptr && kv_ != nullptr);
  SERVELAB_CHECK(kv_->BlockSize() == config_.block_size);
  if (config_.has_sla_control) {
    sla_ = std::make_unique<SlaController>(config_.sla_control, config_.max_num_seqs,
                                           config_.max_num_batched_tokens);
  }
  running_.reserve(config_.max_num_seqs);
  finished_.reserve(config_.max_num_seqs);
  plan_.seqs.reserve(config_.max_num_seqs);
}

bool Scheduler::AddRequest(Request& request, TimeNs now) {
  SERVELAB_CHECK(request.prompt_len >= 1 && request.target_output_len >= 1);
  const int64_t total = int64_t{request.prompt_len} + request.target_output_len;
  // The last sampled token's KV is never computed, hence total - 1 cached tokens at most.
  const int32_t max_blocks = kv_->BlocksFor(total - 1);
  RejectReason reason = RejectReason::kNone;
  if (total > max_model_len_) {
    reason = RejectReason::kExceedsContextWindow;
  } else if (max_blocks > kv_->NumTotalBlocks() - kv_->WatermarkBlocks()) {
    // Even alone it could not hold all its tokens: it would be preempted forever.
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
  request.state = RequestState::kWaiting;
  tokens_pending_ += total;
  policy_->Enqueue(request, now);
  return true;
}

int32_t Scheduler::NumSeqsLimit() const {
  return sla_ ? sla_->NumSeqsLimit() : config_.max_num_seqs;
}

int32_t Scheduler::TokenBudgetLimit() const {
  // Running requests always get their decode token: the controller trims prefill only.
  return sla_ ? std::max(sla_->TokenBudget(), static_cast<int32_t>(running_.size()))
              : config_.max_num_batched_tokens;
}

const StepPlan& Scheduler::Schedule(TimeNs now) {
  plan_.Clear();
  plan_.start = now;
  preempted_this_step_ = 0;
  memory_preemption_this_step_ = false;
  int32_t budget = TokenBudgetLimit();
  if (config_.batching == Batching::kContinuous) PreemptForWaiting(now, budget);
  ScheduleRunning(now, budget);
  for (Request* r : padding_) AddPadding(*r);
  // As vLLM: no admission in a step that had to preempt for memory.
  const bool may_admit = config_.batching == Batching::kContinuous
                             ? !memory_preemption_this_step_
                             : running_.empty() && padding_.empty();
  if (may_admit) AdmitWaiting(now, budget);
  preempted_last_step_ = preempted_this_step_;
  FinishPlan();
  return plan_;
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
}

void Scheduler::PreemptForWaiting(TimeNs now, int32_t budget) {
  // Each pass displaces one victim; at most as many passes as there are running requests.
  for (size_t guard = running_.size(); guard > 0 && !running_.empty(); --guard) {
    Request* waiting = policy_->Peek(now);
    if (waiting == nullptr) return;
    const int32_t n = std::max(1, std::min(waiting->NumTokensToCompute(), budget));
    const bool has_slot = static_cast<int32_t>(running_.size()) < NumSeqsLimit();
    const bool has_blocks = waiting->kv_swapped ? kv_->CanSwapIn(*waiting, n)
                                                : kv_->CanAllocate(*waiting, n, true);
    if (has_slot && has_blocks) return;  // it will be admitted without displacing anyone
    Request* victim = policy_->PickVictim(running_, now);
    if (victim == nullptr || !policy_->ShouldPreemptFor(*waiting, *victim)) return;
    Preempt(*victim, now);
  }
}

void Scheduler::ScheduleRunning(TimeNs now, int32_t& budget_out) {
  int32_t budget = budget_out;  // a local: the compiler keeps it in a register
  size_t i = 0;
  while (i < running_.size()) {
    Request& r = *running_[i];
    int32_t n = r.NumTokensToCompute();
    SERVELAB_CHECK(n >= 1);
    if (n > budget) n = config_.chunked_prefill || r.num_generated > 0 ? budget : 0;
    if (n <= 0) {  // no budget left for it in this step
      ++i;
      continue;
    }
    // Fast path (most decode steps): the request's last block still has room.
    int32_t needed = kv_->BlocksNeeded(r, n);
    if (needed > kv_->NumFreeBlocks()) {
      bool preempted_self = false;
      bool stalled = false;
      while (needed > kv_->NumFreeBlocks()) {
        // Victims come from the requests not yet scheduled in this step (r included).
        std::span<Request* const> candidates(running_.data() + i, running_.size() - i);
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
      }
      if (preempted_self) continue;  // running_[i] is now the next request
      if (stalled) {
        ++i;
        continue;
      }
    }
    kv_->Allocate(r, n);
    AddToPlan(r, n);
    budget -= n;
    ++i;
  }
  budget_out = budget;
}

void Scheduler::AdmitWaiting(TimeNs now, int32_t& budget) {
  const int32_t max_seqs = NumSeqsLimit();
  while (budget > 0 && static_cast<int32_t>(running_.size()) < max_seqs) {
    Request* r = policy_->Peek(now);
    if (r == nullptr) break;
    int32_t n = r->NumTokensToCompute();
    const bool may_chunk =
        config_.batching == Batching::kContinuous && (config_.chunked_prefill || r->num_generated > 0);
    if (n > budget) {
      if (!may_chunk) break;
      n = budget;
    }
    // Admission asks for room for the request's whole remaining prefill, though only this
    // step's chunk is allocated: admitting a prompt whose later chunks cannot fit only
    // has it preempted by its own next chunk, again and again (recompute thrashing).
    const int32_t whole = r->NumTokensToCompute();
    if (r->kv_swapped) {
      if (!kv_->CanSwapIn(*r, whole)) break;
      kv_->SwapIn(*r, plan_.swap_in);
    } else if (!kv_->CanAllocate(*r, whole, /*admission=*/true)) {
      break;
    }
    policy_->Admitted(*r, now);
    r->state = RequestState::kRunning;
    if (r->first_scheduled == kNever) r->first_scheduled = now;
    running_.push_back(r);
    kv_->Allocate(*r, n);
    AddToPlan(*r, n);
    budget -= n;
  }
}

void Scheduler::Preempt(Request& victim, TimeNs now) {
  auto it = std::find(running_.begin(), running_.end(), &victim);
  SERVELAB_CHECK(it != running_.end());
  running_.erase(it);
  if (config_.preemption == PreemptionMode::kSwap && kv_->CanSwapOut(victim)) {
    kv_->SwapOut(victim, plan_.swap_out);  // its computed tokens survive on the host
  } else {
    victim.num_recomputed_tokens += victim.num_computed_tokens;
    kv_->Free(victim);
    victim.num_computed_tokens = 0;
  }
  victim.num_preemptions += 1;
  victim.state = RequestState::kPreempted;
  ++preempted_this_step_;
  policy_->Enqueue(victim, now);
}

void Scheduler::AddPadding(Request& request) {
  ScheduledRequest& s = plan_.seqs.emplace_back();
  s.request = &request;
  s.num_new_tokens = 1;
  s.num_computed_tokens = request.NumTokens() - 1 + request.padding_steps;
  s.is_padding = true;
}

std::span<Request* const> Scheduler::Commit(const StepResult& result, TimeNs end) {
  finished_.clear();
  size_t sampled = 0;
  for (const ScheduledRequest& s : plan_.seqs) {
    Request& r = *s.request;
    if (s.is_padding) {
      r.padding_steps += 1;
      continue;
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
    if (config_.batching == Batching::kContinuous) {
      Finish(r, end);
    } else {
      // Static batching: the member stays in the batch as padding until the batch ends;
      // its blocks are released now (a paged cache has no use for them).
      kv_->Free(r);
      padding_.push_back(&r);
    }
  }
  if (!finished_.empty() || config_.batching == Batching::kStatic) {
    std::erase_if(running_, [this](const Request* r) {
      return r->state == RequestState::kFinished ||
             (config_.batching == Batching::kStatic && IsDone(*r));
    });
  }
  if (config_.batching == Batching::kStatic && running_.empty() && !padding_.empty()) {
    // The whole batch is done: every member's response returns now.
    for (Request* r : padding_) Finish(*r, end);
    padding_.clear();
  }
  if (sla_) sla_->OnStep(end - plan_.start, plan_.num_decode_tokens);
  policy_->OnStepDone(plan_, result, end);
  return finished_;
}

void Scheduler::Finish(Request& request, TimeNs end) {
  request.state = RequestState::kFinished;
  request.finish = end;
  kv_->Free(request);
  tokens_pending_ -= int64_t{request.prompt_len} + request.target_output_len;
  finished_.push_back(&request);
}

}  // namespace servelab
