#pragma once
// The driver: a virtual clock, an event queue of arrivals and step completions, a router
// and one Scheduler + KvCacheManager + Backend per replica. The same driver runs any
// Backend whose clock is virtual (the simulator, or the engine with `clock: virtual`).
//
// Each replica runs one iteration at a time. An idle replica starts a step as soon as a
// request arrives (after every event at that same instant has been applied, so a burst
// at t = 0 forms one batch). A request's lifetime: arrival -> router -> scheduler ->
// finished or rejected -> metrics -> its slot is reused.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/kv_cache_manager.h"
#include "core/metrics.h"
#include "core/scheduler.h"
#include "core/scheduler_config.h"
#include "core/status.h"
#include "policies/registry.h"
#include "sim/event_queue.h"
#include "sim/router.h"
#include "sim/workload.h"

namespace servelab {

using BackendFactory = std::function<StatusOr<std::unique_ptr<Backend>>(int32_t replica)>;

struct SimulationOptions {
  SchedulerConfig scheduler;
  int32_t max_model_len = 0;  // effective context window (REQUIRES > 0)
  int32_t num_replicas = 1;
  NamedParams router{"round_robin", {}, "cluster.router", ""};
  PolicyContext policy_context;  // seed and clients, for the policies
  // Real time instead of virtual: arrivals are released at their times on the wall
  // clock, and each step starts when the real clock says (engine with clock: wall).
  bool wall_clock = false;
};

struct SimulationProgress {
  TimeNs now = 0;
  int64_t arrived = 0;
  int64_t finished = 0;
  int64_t rejected = 0;
  int64_t steps = 0;
};

class Simulator {
 public:
  // Builds the replicas: one backend each from `factory`, the policy from the registry.
  static StatusOr<std::unique_ptr<Simulator>> Create(const SimulationOptions& options,
                                                     std::unique_ptr<Workload> workload,
                                                     const BackendFactory& factory,
                                                     MetricsCollector* metrics);

  // Runs until the workload is exhausted and every request finished or was rejected.
  // `on_progress`, if set, is called every `progress_every_steps` iterations.
  Status Run(const std::function<void(const SimulationProgress&)>& on_progress = {},
             int64_t progress_every_steps = 4096);

  const SimulationProgress& Progress() const { return progress_; }
  int32_t NumReplicas() const { return static_cast<int32_t>(replicas_.size()); }
  const Scheduler& ReplicaScheduler(int32_t i) const { return *replicas_[i]->scheduler; }

 private:
  struct Replica {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<KvCacheManager> kv;
    std::unique_ptr<Scheduler> scheduler;
    StepResult result;
    TimeNs step_start = 0;
    bool busy = false;
  };
  enum class EventKind : uint8_t { kArrival, kStepDone };
  struct EventPayload {
    EventKind kind;
    int32_t replica;
  };

  Simulator() = default;
  Request* NewRequest();
  void Release(Request* request);
  void PullArrival();
  Status StartStep(int32_t replica, TimeNs now);

  std::unique_ptr<Workload> workload_;
  std::unique_ptr<Router> router_;
  MetricsCollector* metrics_ = nullptr;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<ReplicaLoad> loads_;
  EventQueue<EventPayload> events_;
  std::deque<Request> pool_;     // stable addresses
  std::vector<Request*> free_;   // recycled slots
  Request* next_arrival_ = nullptr;
  SimulationProgress progress_;
  bool wall_clock_ = false;
};

}  // namespace servelab
