#pragma once
// The Scheduler owns the mechanics of continuous batching over a paged KV cache:
// the per-iteration token budget, max_num_seqs, chunked prefill, block allocation,
// admission, preemption (recompute or swap) and SLA-driven batch control. Its Policy
// decides only order and victims.
//
// Preemption happens for two reasons: memory (a running request cannot grow: the
// policy's victim among the requests not yet scheduled this step is preempted, and no
// request is admitted in that step), and urgency (preemptive policies: when the policy's
// next waiting request cannot be admitted for lack of a slot or blocks and
// ShouldPreemptFor(waiting, victim) holds, the victim makes room first).
//
// There is no prefill phase and no decode phase: each running request computes
// NumTokensToCompute() tokens (capped by the budget) and samples a token when it
// catches up. The scheduler never counts KV blocks: it asks the KvCacheManager for room
// for tokens. How batches form (continuous or static) is a BatchFormation it consults.
// One iteration is
//     const StepPlan& plan = scheduler.Schedule(now);   // allocates, may preempt
//     StepResult result = backend.Execute(plan);
//     auto finished = scheduler.Commit(result, now + result.elapsed);
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/batch_formation.h"
#include "core/kv_cache_manager.h"
#include "core/policy.h"
#include "core/request.h"
#include "core/scheduler_config.h"
#include "core/sla_controller.h"
#include "core/step_plan.h"
#include "core/time.h"

namespace servelab {

class Scheduler {
 public:
  // `max_model_len`: the longest prompt + output accepted (the model's context window
  // unless the config lowers it). `kv` must outlive the scheduler.
  Scheduler(const SchedulerConfig& config, int32_t max_model_len, std::unique_ptr<Policy> policy,
            KvCacheManager* kv);

  // An arriving request. Returns false, with request.state = kRejected and a reason,
  // when it can never be served here; otherwise it gets a slot (Request::slot, dense in
  // this replica, reused after it finishes) and waits in the policy's queue.
  bool AddRequest(Request& request, TimeNs now);

  // The next iteration's batch. Allocates its KV blocks; preempts (policy's victim)
  // when a running request cannot grow. Empty when there is nothing to run.
  const StepPlan& Schedule(TimeNs now);

  // Applies the iteration that Schedule() planned and that ended at `end`: advances
  // computed tokens, appends sampled tokens, finishes requests and frees their blocks.
  // Returns the requests finished in this step (valid until the next call).
  std::span<Request* const> Commit(const StepResult& result, TimeNs end);

  // Decode runs (DESIGN.md, Speed). Right after a Commit at `now`, the next iterations may
  // be a run: every running request computes one decode token per iteration and nothing
  // else happens (nobody is admitted or preempted; only contexts, blocks and token counts
  // grow). A run is advanced without planning each iteration, with every effect identical
  // to stepping it:
  //     int32_t limit = scheduler.BeginDecodeRun(now);   // 0: step normally
  //     while (...) { scheduler.AdvanceDecodeRun() ... }  // iteration j's KV slots
  //     scheduler.EndDecodeRun(ends);                     // the completed iterations
  //     [scheduler.CommitDecodeRunTail(result, end);]     // the last, if it was started
  // BeginDecodeRun returns how many iterations the run may last: through the first that
  // finishes a request. LastPlan() is then the run's batch (one decode token for each
  // running request, in running order, contexts as at its first iteration) until the next
  // Schedule().
  // It returns 0 unless every running request decodes and got its last token at `now`,
  // they all fit the token budget, and nothing could change the batch: no SLA controller,
  // no prefix cache, no pipeline batches in flight, no static-batching padding, the policy
  // allows runs (Policy::DecodeRuns) and either nothing waits or nothing waiting can be
  // admitted.
  int32_t BeginDecodeRun(TimeNs now);
  // Allocates the KV slots of the run's next iteration. False, with nothing changed, when
  // a request would need a block that is not free: the run must end before it (stepping
  // then preempts).
  bool AdvanceDecodeRun();
  // Applies the run's first `ends.size()` iterations, ended at `ends` (ascending), as
  // their Commits would (none of them may finish a request): tokens, last_token times,
  // the policy's OnStepDone for each. If one more iteration was allocated, it is the run's
  // tail, started at ends.back() (or the run's start): until CommitDecodeRunTail applies
  // it, the running requests' token counts stay as at the run's start (nothing reads them
  // meanwhile: arrivals only enqueue).
  void EndDecodeRun(std::span<const TimeNs> ends);
  // Applies the tail that ended at `end`, with the iterations before it, as Commit would:
  // it may finish requests (returned, valid until the next call).
  std::span<Request* const> CommitDecodeRunTail(const StepResult& result, TimeNs end);
  bool DecodeRunTailInFlight() const { return run_.tail_in_flight; }

  bool HasWork() const {
    return !running_.empty() || batching_->Holds() || policy_->NumWaiting() > 0;
  }
  // Pipeline parallelism (SchedulerConfig::batches_in_flight > 1): Schedule() plans a new
  // batch from the requests in no batch in flight, while up to batches_in_flight batches
  // are; Commit() applies the oldest (batches complete in the order they were planned).
  // Whether a new batch could hold anything: a request waits, or one runs outside every
  // batch in flight.
  bool CanPlanBatch() const {
    return policy_->NumWaiting() > 0 || NumSchedulable() > 0 || batching_->Holds();
  }
  int32_t NumBatchesInFlight() const { return config_.batches_in_flight == 1 ? 0 : num_flights_; }
  // The batch Commit() applies next (with one batch in flight: LastPlan()).
  const StepPlan& OldestInFlight() const;
  int32_t NumRunning() const { return static_cast<int32_t>(running_.size()); }
  int32_t NumWaiting() const { return static_cast<int32_t>(policy_->NumWaiting()); }
  int32_t NumPreemptedLastStep() const { return preempted_last_step_; }
  // The limits in force this step (the SLA controller moves them below the config).
  int32_t NumSeqsLimit() const;
  int32_t TokenBudgetLimit() const;
  // Prompt + output tokens of requests accepted and not yet finished (for routers).
  int64_t TokensPending() const { return tokens_pending_; }
  // The plan the last Schedule() returned (until the next Schedule()).
  const StepPlan& LastPlan() const;
  const KvCacheManager& Kv() const { return *kv_; }
  Policy& GetPolicy() { return *policy_; }
  const SchedulerConfig& Config() const { return config_; }

 private:
  void PreemptForWaiting(TimeNs now, int32_t budget);
  void ScheduleRunning(TimeNs now, int32_t& budget);
  void AdmitWaiting(TimeNs now, int32_t& budget);
  // Frees the victim's blocks and returns it to the policy's queue.
  void Preempt(Request& victim, TimeNs now);
  // Appends `request`'s share of the step (hot: once per running request per step).
  // The plan's token counters are summed by FinishPlan(), not here.
  void AddToPlan(Request& request, int32_t num_new_tokens) {
    const int32_t computed = request.num_computed_tokens;
    const bool emits = computed + num_new_tokens == request.NumTokens();
    plan_.seqs.push_back(ScheduledRequest{&request, num_new_tokens, computed, emits, false});
  }
  // Fills the plan's token counters from its seqs.
  void FinishPlan();
  void Finish(Request& request, TimeNs end);
  bool IsDone(const Request& request) const {
    return request.num_generated >= request.target_output_len || request.stopped_early;
  }

  // The run BeginDecodeRun started: its iterations allocated so far; for each running
  // request (by index into running_) the first iteration that needs a new block (then
  // every block_size iterations); the requests ordered by that iteration % block_size,
  // in running order within each residue, bucket b being order[bucket_begin[b],
  // bucket_begin[b + 1]).
  struct DecodeRun {
    int32_t allocated = 0;
    int32_t completed = 0;  // iterations EndDecodeRun applied (or left to the tail)
    bool tail_in_flight = false;
    TimeNs start = 0;
    std::vector<int32_t> first;
    std::vector<int32_t> bucket;  // first % block_size
    std::vector<int32_t> order;
    std::vector<size_t> bucket_begin;
    std::vector<size_t> next;  // BeginDecodeRun's scratch
  };
  bool CanBeginDecodeRun() const;
  // Every running request `iterations` tokens further, its last at `last_token`.
  void AdvanceRunning(int32_t iterations, TimeNs last_token);
  // Requests that may run at once: NumSeqsLimit() for each batch in flight (pipelined,
  // every batch may hold that many: vLLM's virtual engines).
  int64_t MaxRunning() const { return int64_t{NumSeqsLimit()} * config_.batches_in_flight; }
  // Running requests that a new batch may hold: those in no batch in flight.
  int32_t NumSchedulable() const { return static_cast<int32_t>(running_.size()) - num_in_flight_; }
  // Of `requests`, those a preemption may take (none in flight); `requests` itself when
  // nothing is in flight.
  std::span<Request* const> VictimCandidates(std::span<Request* const> requests);

  SchedulerConfig config_;
  int32_t max_model_len_;
  std::unique_ptr<Policy> policy_;
  KvCacheManager* kv_;
  std::unique_ptr<BatchFormation> batching_;
  std::unique_ptr<SlaController> sla_;  // null unless config.has_sla_control
  std::vector<Request*> running_;  // admission order; excludes static-batch padding
  std::vector<Request*> finished_;
  std::vector<int32_t> free_slots_;  // a stack of slots given back by finished requests
  int32_t num_slots_ = 0;            // slots ever handed out
  StepPlan plan_;
  int32_t preempted_this_step_ = 0;
  bool memory_preemption_this_step_ = false;
  int32_t preempted_last_step_ = 0;
  int64_t tokens_pending_ = 0;
  // Decode-only steps planned since the last step with prompt tokens
  // (StepPlan::steps_since_prefill).
  int32_t decode_streak_ = 0;
  DecodeRun run_;
  // Pipeline parallelism: the batches in flight, oldest first, in a ring of
  // batches_in_flight plans (plan_ is swapped in as each is planned); the requests they hold.
  std::vector<StepPlan> flights_;
  size_t first_flight_ = 0;
  int32_t num_flights_ = 0;
  int32_t num_in_flight_ = 0;
  std::vector<Request*> victims_;  // VictimCandidates' scratch
};

}  // namespace servelab
