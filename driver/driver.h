#pragma once
// The backend-neutral driver: one step loop for the simulator and the real engine.
//
// It holds an event queue of arrivals and step completions, a router, and replicas of
// Scheduler + KvCacheManager + Backend; its time comes from an injected Clock (virtual
// or wall, driver/clock.h). What it is built from:
//   BackendFactory  one Backend per replica: the simulator's (sim/) or the engine's
//                   (engine/). Each backend reports its own KV capacity and the context
//                   it serves; the driver builds the replica's KV manager and scheduler
//                   from those facts and reports them (Served()).
//   PolicyMaker     one Policy per replica (normally the policy registry's).
//   Clock           when each event is handled.
//
// Decode runs (DriverOptions::decode_runs): when one replica alone is to start a step and
// its scheduler and backend allow, the iterations up to the next event are advanced in one
// stride (RunDecodeIterations), with the same outputs as stepping.
//
// Each replica runs one iteration at a time, or with pipeline parallelism
// (scheduler.batches_in_flight = pp stages) up to pp batches, each stage busy with a
// different one: a batch enters the first stage when it is free and moves to each next
// stage when that one is; a new batch is planned when the first stage frees (a kStageFree
// event) from the requests in no batch in flight, and batches complete in order. An
// idle replica starts a step as soon as a request arrives (after every event at that same instant has been applied, so a burst
// at t = 0 forms one batch). A request's lifetime: arrival -> router -> scheduler ->
// finished or rejected -> metrics -> its slot is reused. A backend error ends the run at
// that step with the backend's message (an Internal status naming replica, step and time).
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/kv_cache_manager.h"
#include "core/scheduler.h"
#include "core/scheduler_config.h"
#include "core/status.h"
#include "driver/clock.h"
#include "driver/event_queue.h"
#include "driver/metrics.h"
#include "driver/router.h"
#include "driver/workload.h"
#include "policies/registry.h"

namespace servelab {

// Replica `replica`'s backend. Called once per replica, in order, before the run.
using BackendFactory = std::function<StatusOr<std::unique_ptr<Backend>>(int32_t replica)>;
// A replica's policy, given what the driver knows for it (its index, its backend's
// prefill-time prediction).
using PolicyMaker = std::function<StatusOr<std::unique_ptr<Policy>>(const PolicyContext&)>;
// The policy registry's maker for `policy` ("fcfs" or {name: ..., ...}).
PolicyMaker RegistryPolicyMaker(const PolicyRegistry& registry, NamedParams policy);

struct DriverOptions {
  // Its max_model_len is not read here: each backend folds it into MaxModelLen().
  SchedulerConfig scheduler;
  int32_t num_replicas = 1;
  NamedParams router{"round_robin", {}, "cluster.router", "", ""};
  PolicyContext policy_context;  // seed and clients; replica and prefill_time_s are set here
  // Advance decode runs in one stride where the backend predicts them (DESIGN.md,
  // Speed; Scheduler::BeginDecodeRun). Every output is the same either way: false steps
  // every iteration (SERVELAB_DECODE_RUNS=0 in the environment, to check that).
  bool decode_runs = true;
  // The run's metrics, less what the backends and policies tell (KV blocks, bytes per
  // block, the service cost): the driver fills those in.
  MetricsOptions metrics;
};

// What a replica ran with, as its backend and policy reported it (every replica is built
// alike; these are replica 0's).
struct ServedFacts {
  std::string backend;     // Backend::Name()
  std::string detail;      // Backend::Describe()
  std::string policy;      // Policy::Name()
  KvCapacity capacity;
  int32_t max_model_len = 0;
};

struct DriverProgress {
  TimeNs now = 0;
  int64_t arrived = 0;
  int64_t finished = 0;
  int64_t rejected = 0;
  int64_t steps = 0;
};

class Driver {
 public:
  // Builds every replica (backend, KV manager, policy, scheduler) and the metrics
  // collector writing to `sinks`. `clock` must outlive the driver. Errors: a backend or
  // policy that cannot be built, a backend whose block size differs from
  // scheduler.block_size.
  static StatusOr<std::unique_ptr<Driver>> Create(const DriverOptions& options,
                                                  std::unique_ptr<Workload> workload,
                                                  const BackendFactory& backends,
                                                  const PolicyMaker& policies, Clock& clock,
                                                  const MetricsSinks& sinks);

  // Runs until the workload is exhausted and every request finished or was rejected,
  // then returns the summary. Call once. `on_progress`, if set, is called every
  // `progress_every_steps` iterations and at the end.
  StatusOr<RunSummary> Run(const std::function<void(const DriverProgress&)>& on_progress = {},
                           int64_t progress_every_steps = 4096);

  const ServedFacts& Served() const { return served_; }
  const DriverProgress& Progress() const { return progress_; }
  int32_t NumReplicas() const { return static_cast<int32_t>(replicas_.size()); }
  const Scheduler& ReplicaScheduler(int32_t i) const { return *replicas_[i]->scheduler; }

 private:
  struct Replica {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<KvCacheManager> kv;
    std::unique_ptr<Scheduler> scheduler;
    StepResult result;
    TimeNs step_start = 0;
    int64_t steps = 0;
    bool busy = false;
    // Pipeline parallelism (stages_ > 1): when each stage is next free, and the batches in
    // flight, oldest first (the scheduler's order).
    struct Flight {
      TimeNs start = 0;            // entered the first stage
      int32_t kv_blocks_used = 0;  // after its allocation
      int32_t preempted = 0;
      StepResult result;
      std::vector<StageSpan> stages;
    };
    std::vector<TimeNs> stage_free;
    std::deque<Flight> flights;
  };
  // kStageFree: a replica's first pipeline stage has passed its batch on.
  enum class EventKind : uint8_t { kArrival, kStepDone, kFollowUp, kStageFree };
  struct EventPayload {
    EventKind kind;
    int32_t replica;  // kStepDone; kFollowUp: the index into follow_ups_
  };

  Driver(Clock& clock) : clock_(clock) {}
  Request* NewRequest();
  void Release(Request* request);
  void PullArrival();
  void Arrive(Request* request, TimeNs now);
  // A finished or rejected request's follow-up (multi-turn sessions), as an event.
  void ScheduleFollowUp(const Request& done);
  void StepDone(int32_t replica, TimeNs now);
  // A run whose requests stop finishing while work remains is stuck: every step computes
  // at least one token, and a request needs at most its prompt and output tokens a time
  // through (more only when preemption makes it start again), so kStallFactor steps for
  // every token the admitted requests still need (Scheduler::TokensPending), plus
  // kMinStalledSteps, without one finishing or being rejected, is no progress. Internal
  // error then, instead of a run that writes steps.csv until the disk is full (an MLFQ
  // livelock once did). A legitimate run stays far below the bound.
  Status CheckProgress(TimeNs now);
  static constexpr int64_t kStallFactor = 100;
  static constexpr int64_t kMinStalledSteps = int64_t{1} << 16;
  Status StartStep(int32_t replica, TimeNs now);
  // The replica is busy with a step planned at `now` that takes `elapsed`.
  Status Launch(int32_t replica, TimeNs now, TimeNs elapsed);
  // Pipeline parallelism: the batch planned at `now` enters the pipeline, each stage
  // taking it when free (result.stages: its time there).
  Status LaunchBatch(int32_t replica, TimeNs now, StepResult result);
  // Whether the replica would start a step now: idle with work, or (pipelined) a batch
  // could enter its free first stage.
  bool CanStart(int32_t replica, TimeNs now) const;
  // Advances replica's decode run from `now` (the only replica to start at `now`, with
  // every event at `now` applied) through its iterations that end before the next event
  // and finish nobody; the first that does not is launched as a step. Returns the time
  // the run reached: the replica is then busy, or idle at that time (stepping resumes).
  StatusOr<TimeNs> RunDecodeIterations(int32_t replica, TimeNs now,
                                       const std::function<void(const DriverProgress&)>& on_progress,
                                       int64_t progress_every_steps);

  Clock& clock_;
  std::unique_ptr<Workload> workload_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<MetricsCollector> metrics_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<ReplicaLoad> loads_;
  EventQueue<EventPayload> events_;
  std::deque<Request> pool_;     // stable addresses
  std::vector<Request*> free_;   // recycled slots
  Request* next_arrival_ = nullptr;
  std::vector<Request*> follow_ups_;       // pending follow-up arrivals, by event index
  std::vector<int32_t> free_follow_ups_;   // reusable indexes into follow_ups_
  DriverProgress progress_;
  // The progress check (CheckProgress): requests finished or rejected when it last saw
  // one more, and the step count then.
  int64_t done_at_check_ = 0;
  int64_t steps_at_last_done_ = 0;
  bool prefix_caching_ = false;  // scheduler.prefix_cache is on
  bool decode_runs_ = false;     // DriverOptions::decode_runs and the backends predict them
  int32_t stages_ = 1;           // pipeline stages per replica (batches in flight)
  std::vector<TimeNs> run_ends_;  // a decode run's iteration ends (reused)
  std::vector<int32_t> to_start_;  // replicas to start at this instant (reused)
  ServedFacts served_;
};

}  // namespace servelab
