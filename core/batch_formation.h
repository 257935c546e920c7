#pragma once
// How batches form (scheduler.batching), the one place the two modes differ:
//
//   continuous  Orca's iteration-level scheduling: requests join and leave the batch at
//               every step; a prompt may join in chunks; a preemptive policy's urgent
//               request may displace a running one; as vLLM, nobody joins in a step that
//               had to preempt for memory.
//   static      the baseline the seeds compare against: a batch forms only when the
//               previous one has fully finished, every member's prompt whole; a member
//               that is done stays in the batch as padding (a decode token at its
//               context each step, no output) until the longest member is done, and all
//               return then. Its KV blocks are released when it is done (a paged cache
//               has no use for them).
//
// The scheduler asks these questions at fixed points of every step; the answers are the
// only thing batching changes.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/request.h"
#include "core/scheduler_config.h"
#include "core/step_plan.h"

namespace servelab {

class BatchFormation {
 public:
  virtual ~BatchFormation() = default;
  // May a preemptive policy's urgent waiting request displace a running one?
  virtual bool Displaces() const = 0;
  // May waiting requests join this step? `num_running`: requests running (padding not
  // counted); `memory_preempted`: this step preempted for memory.
  virtual bool AdmissionOpen(int32_t num_running, bool memory_preempted) const = 0;
  // May an admitted request bring only part of its prompt (a chunk) this step?
  virtual bool ChunksAdmissions() const = 0;
  // `request` is done (its last token was sampled at the end of this step). True: it
  // leaves now. False: the batch holds it as padding until Release.
  virtual bool Leaves(Request& request) = 0;
  // Appends one padding seq per held request to `plan` (each step they are carried).
  virtual void AddPadding(StepPlan& plan) = 0;
  virtual bool Holds() const = 0;  // any request held as padding
  // After a step, with `num_running` requests still running: the held requests that
  // leave now (all of them once nothing runs), no longer held. Valid until the next call.
  virtual std::span<Request* const> Release(int32_t num_running) = 0;
};

std::unique_ptr<BatchFormation> MakeBatchFormation(Batching batching);

}  // namespace servelab
