#include "driver/driver.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace servelab {

PolicyMaker RegistryPolicyMaker(const PolicyRegistry& registry, NamedParams policy) {
  return [&registry, policy = std::move(policy)](const PolicyContext& context) {
    return registry.Make(policy, context);
  };
}

StatusOr<std::unique_ptr<Driver>> Driver::Create(const DriverOptions& options,
                                                 std::unique_ptr<Workload> workload,
                                                 const BackendFactory& backends,
                                                 const PolicyMaker& policies, Clock& clock,
                                                 const MetricsSinks& sinks) {
  SERVELAB_CHECK(options.num_replicas >= 1 && workload != nullptr);
  std::unique_ptr<Driver> driver(new Driver(clock));
  driver->workload_ = std::move(workload);
  auto router = BuiltinRouters().Make(options.router);
  if (!router.ok()) return router.status();
  driver->router_ = std::move(router).value();
  MetricsOptions metrics = options.metrics;
  driver->prefix_caching_ = options.scheduler.PrefixCaching() != PrefixCacheType::kNone;
  driver->decode_runs_ = options.decode_runs && options.scheduler.batches_in_flight == 1;
  driver->stages_ = options.scheduler.batches_in_flight;
  metrics.prefix_caching = driver->prefix_caching_;
  for (int32_t i = 0; i < options.num_replicas; ++i) {
    auto replica = std::make_unique<Replica>();
    auto backend = backends(i);
    if (!backend.ok()) return backend.status();
    replica->backend = std::move(backend).value();
    const Backend& b = *replica->backend;
    driver->decode_runs_ = driver->decode_runs_ && b.PredictsDecodeRuns();
    const KvCapacity capacity = b.Capacity();
    if (capacity.block_size != options.scheduler.block_size) {
      return Internal("backend '" + std::string(b.Name()) + "' has block size " +
                      std::to_string(capacity.block_size) + ", scheduler.block_size is " +
                      std::to_string(options.scheduler.block_size));
    }
    const int32_t max_model_len = b.MaxModelLen();
    SERVELAB_CHECK(max_model_len > 0);
    const auto watermark = static_cast<int32_t>(
        std::floor(options.scheduler.watermark * capacity.num_gpu_blocks));
    replica->kv = std::make_unique<KvCacheManager>(capacity.num_gpu_blocks, capacity.block_size,
                                                   watermark, capacity.num_cpu_blocks,
                                                   options.scheduler.PrefixCaching());
    PolicyContext context = options.policy_context;
    context.replica = i;
    context.kv = replica->kv.get();
    if (b.PredictPrefillTime(1).has_value()) {
      context.prefill_time_s = [&b](int32_t tokens) { return ToSeconds(*b.PredictPrefillTime(tokens)); };
    }
    auto policy = policies(context);
    if (!policy.ok()) return policy.status();
    if (i == 0) {
      driver->served_ = ServedFacts{std::string(b.Name()), b.Describe(),
                                    std::string((*policy)->Name()), capacity, max_model_len};
      metrics.kv_blocks_per_replica = capacity.num_gpu_blocks;
      metrics.kv_bytes_per_block = capacity.bytes_per_block;
      if (const auto cost = (*policy)->Charges()) {
        metrics.service_input_weight = cost->input_weight;
        metrics.service_output_weight = cost->output_weight;
      }
    }
    replica->scheduler = std::make_unique<Scheduler>(options.scheduler, max_model_len,
                                                     std::move(policy).value(), replica->kv.get());
    replica->stage_free.assign(static_cast<size_t>(driver->stages_), 0);
    driver->replicas_.push_back(std::move(replica));
  }
  driver->loads_.resize(options.num_replicas);
  driver->metrics_ = std::make_unique<MetricsCollector>(std::move(metrics), sinks);
  return driver;
}

Request* Driver::NewRequest() {
  if (!free_.empty()) {
    Request* r = free_.back();
    free_.pop_back();
    return r;
  }
  return &pool_.emplace_back();
}

void Driver::Release(Request* request) {
  // Keep the vectors' capacity: the next request reuses them without allocating.
  std::vector<int32_t> blocks = std::move(request->block_table);
  std::vector<uint64_t> hashes = std::move(request->prefix_block_hashes);  // (capacity kept)
  blocks.clear();
  hashes.clear();
  *request = Request();
  request->block_table = std::move(blocks);
  request->prefix_block_hashes = std::move(hashes);
  free_.push_back(request);
}

void Driver::PullArrival() {
  Request* r = NewRequest();
  if (!workload_->Next(*r)) {
    Release(r);
    next_arrival_ = nullptr;
    return;
  }
  next_arrival_ = r;
  events_.Push(r->arrival, EventPayload{EventKind::kArrival, -1});
}

void Driver::ScheduleFollowUp(const Request& done) {
  if (!workload_->HasFollowUps()) return;
  Request* next = NewRequest();
  if (!workload_->FollowUp(done, *next)) {
    Release(next);
    return;
  }
  int32_t index;
  if (free_follow_ups_.empty()) {
    index = static_cast<int32_t>(follow_ups_.size());
    follow_ups_.push_back(next);
  } else {
    index = free_follow_ups_.back();
    free_follow_ups_.pop_back();
    follow_ups_[static_cast<size_t>(index)] = next;
  }
  events_.Push(next->arrival, EventPayload{EventKind::kFollowUp, index});
}

void Driver::Arrive(Request* r, TimeNs now) {
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const Scheduler& s = *replicas_[i]->scheduler;
    loads_[i] = ReplicaLoad{s.NumRunning(), s.NumWaiting(), s.TokensPending()};
  }
  const int32_t target = router_->Route(*r, loads_);
  SERVELAB_CHECK(target >= 0 && target < NumReplicas());
  r->replica = target;
  ++progress_.arrived;
  metrics_->OnArrival(*r);
  if (!replicas_[target]->scheduler->AddRequest(*r, now)) {
    ++progress_.rejected;
    metrics_->OnRejected(*r);
    ScheduleFollowUp(*r);
    Release(r);
  }
}

void Driver::StepDone(int32_t index, TimeNs now) {
  Replica& replica = *replicas_[index];
  Scheduler& scheduler = *replica.scheduler;
  std::span<Request* const> finished;
  if (scheduler.DecodeRunTailInFlight()) {  // the last iteration of a decode run
    metrics_->OnDecodeRunStep(index, replica.step_start, now, scheduler.Kv().NumUsedBlocks(),
                              scheduler.NumWaiting());
    finished = scheduler.CommitDecodeRunTail(replica.result, now);
  } else if (stages_ == 1) {
    metrics_->OnStep(index, scheduler.LastPlan(), replica.step_start, now,
                     scheduler.Kv().NumUsedBlocks(), scheduler.NumWaiting(),
                     scheduler.NumPreemptedLastStep());
    finished = scheduler.Commit(replica.result, now);
  } else {
    const Replica::Flight& flight = replica.flights.front();
    metrics_->OnStep(index, scheduler.OldestInFlight(), flight.start, now, flight.kv_blocks_used,
                     scheduler.NumWaiting(), flight.preempted, flight.stages);
    finished = scheduler.Commit(flight.result, now);
  }
  for (Request* done : finished) {
    ++progress_.finished;
    metrics_->OnFinished(*done);
    replica.backend->OnRequestFinished(done->id);
    ScheduleFollowUp(*done);
    Release(done);
  }
  if (stages_ > 1) replica.flights.pop_front();
  replica.busy = false;
  ++progress_.steps;
}

bool Driver::CanStart(int32_t index, TimeNs now) const {
  const Replica& replica = *replicas_[index];
  if (stages_ == 1) return !replica.busy && replica.scheduler->HasWork();
  return replica.scheduler->NumBatchesInFlight() < stages_ && now >= replica.stage_free[0] &&
         replica.scheduler->CanPlanBatch();
}

Status Driver::StartStep(int32_t index, TimeNs now) {
  Replica& replica = *replicas_[index];
  const StepPlan& plan = replica.scheduler->Schedule(now);
  if (plan.empty()) {
    // (Pipelined, the batches in flight will free requests or blocks for the next one.)
    if (replica.scheduler->HasWork() && replica.scheduler->NumBatchesInFlight() == 0) {
      return Internal("replica " + std::to_string(index) + " has " +
                      std::to_string(replica.scheduler->NumRunning()) + " running and " +
                      std::to_string(replica.scheduler->NumWaiting()) +
                      " waiting requests but can schedule none (policy '" +
                      std::string(replica.scheduler->GetPolicy().Name()) +
                      "' stalled every request)");
    }
    return Status::Ok();
  }
  StatusOr<StepResult> result = replica.backend->Execute(plan);
  if (!result.ok()) {
    // The backend's kind of error kept: bad input it finds (a prompt token past the
    // vocabulary, a recording of other steps) exits 2, a device's failure 1.
    return Status(result.status().code(), "replica " + std::to_string(index) + ", step " +
                    std::to_string(replica.steps) + " (t = " + std::to_string(ToSeconds(now)) +
                    " s): " + std::string(replica.backend->Name()) + ": " +
                    result.status().message());
  }
  if (stages_ > 1) return LaunchBatch(index, now, std::move(result).value());
  replica.result = std::move(result).value();
  return Launch(index, now, replica.result.elapsed);
}

Status Driver::LaunchBatch(int32_t index, TimeNs now, StepResult result) {
  Replica& replica = *replicas_[index];
  if (result.stages.size() != static_cast<size_t>(stages_)) {
    return Internal("replica " + std::to_string(index) + ": backend '" +
                    std::string(replica.backend->Name()) + "' timed " +
                    std::to_string(result.stages.size()) + " pipeline stages of " +
                    std::to_string(stages_));
  }
  Replica::Flight flight;
  flight.start = now;
  flight.kv_blocks_used = replica.scheduler->Kv().NumUsedBlocks();
  flight.preempted = replica.scheduler->NumPreemptedLastStep();
  TimeNs t = now;
  for (int32_t stage = 0; stage < stages_; ++stage) {
    const TimeNs elapsed = result.stages[static_cast<size_t>(stage)];
    SERVELAB_CHECK(elapsed >= 0);
    const TimeNs start = std::max(t, replica.stage_free[static_cast<size_t>(stage)]);
    if (elapsed > kMaxTime - start) {
      return InvalidArgument("replica " + std::to_string(index) + ", step " +
                             std::to_string(replica.steps) + ": simulated time would pass " +
                             std::to_string(ToSeconds(kMaxTime)) + " s");
    }
    t = start + elapsed;
    replica.stage_free[static_cast<size_t>(stage)] = t;
    flight.stages.push_back(StageSpan{start, t});
  }
  flight.result = std::move(result);
  replica.flights.push_back(std::move(flight));
  ++replica.steps;
  events_.Push(t, EventPayload{EventKind::kStepDone, index});
  events_.Push(replica.stage_free[0], EventPayload{EventKind::kStageFree, index});
  return Status::Ok();
}

Status Driver::Launch(int32_t index, TimeNs now, TimeNs elapsed) {
  Replica& replica = *replicas_[index];
  SERVELAB_CHECK(elapsed >= 0);
  if (elapsed > kMaxTime - now) {
    return InvalidArgument("replica " + std::to_string(index) + ", step " +
                           std::to_string(replica.steps) + ": simulated time would pass " +
                           std::to_string(ToSeconds(kMaxTime)) + " s");
  }
  replica.step_start = now;
  replica.busy = true;
  ++replica.steps;
  events_.Push(now + elapsed, EventPayload{EventKind::kStepDone, index});
  return Status::Ok();
}

StatusOr<TimeNs> Driver::RunDecodeIterations(
    int32_t index, TimeNs now, const std::function<void(const DriverProgress&)>& on_progress,
    int64_t progress_every_steps) {
  Replica& replica = *replicas_[index];
  Scheduler& scheduler = *replica.scheduler;
  const int32_t limit = scheduler.BeginDecodeRun(now);
  if (limit == 0) return now;
  // Stepping would handle nothing else before this: no event is pushed while the run
  // lasts (nobody finishes, nothing arrives), and no other replica starts at `now`.
  const TimeNs horizon = events_.Empty() ? kMaxTime : events_.Top().time;
  replica.backend->BeginDecodeRun(scheduler.LastPlan());
  metrics_->BeginDecodeRun(index, scheduler.LastPlan());
  run_ends_.clear();
  TimeNs start = now;
  for (int32_t j = 0; j < limit; ++j) {
    // An error, or no block for someone: end the run here and let a step say or do it.
    const StatusOr<TimeNs> elapsed = replica.backend->DecodeRunStepTime(j);
    if (!elapsed.ok() || !scheduler.AdvanceDecodeRun()) break;
    if (j == limit - 1 || *elapsed >= horizon - start) {
      // It finishes a request, or the next event comes first: it runs as a step (which
      // StepDone completes as the run's tail).
      scheduler.EndDecodeRun(run_ends_);
      replica.result.elapsed = *elapsed;
      replica.result.sampled_tokens.clear();
      replica.result.stopped.clear();
      SERVELAB_RETURN_IF_ERROR(Launch(index, start, *elapsed));
      return start;
    }
    const TimeNs end = start + *elapsed;
    metrics_->OnDecodeRunStep(index, start, end, scheduler.Kv().NumUsedBlocks(),
                              scheduler.NumWaiting());
    run_ends_.push_back(end);
    ++replica.steps;
    ++progress_.steps;
    progress_.now = end;
    if (on_progress && progress_.steps % progress_every_steps == 0) on_progress(progress_);
    start = end;
  }
  scheduler.EndDecodeRun(run_ends_);
  return start;
}

Status Driver::CheckProgress(TimeNs now) {
  const int64_t done = progress_.finished + progress_.rejected;
  if (done != done_at_check_) {
    done_at_check_ = done;
    steps_at_last_done_ = progress_.steps;
    return Status::Ok();
  }
  const int64_t stalled = progress_.steps - steps_at_last_done_;
  if (stalled <= kMinStalledSteps) return Status::Ok();
  int64_t pending = 0;
  for (const auto& replica : replicas_) pending += replica->scheduler->TokensPending();
  if (stalled <= kStallFactor * pending + kMinStalledSteps) return Status::Ok();
  return Internal("no request has finished in the last " + std::to_string(stalled) +
                  " steps (t = " + std::to_string(ToSeconds(now)) + " s), " +
                  std::to_string(kStallFactor) + " times the " + std::to_string(pending) +
                  " tokens the admitted requests still need: the schedule makes no progress "
                  "(a policy or configuration that preempts requests before they finish?); "
                  "stopped so the run does not go on forever");
}

StatusOr<RunSummary> Driver::Run(const std::function<void(const DriverProgress&)>& on_progress,
                                 int64_t progress_every_steps) {
  clock_.Start();
  PullArrival();
  while (!events_.Empty()) {
    const auto event = events_.Pop();
    const TimeNs now = clock_.HandleAt(event.time);
    progress_.now = now;
    if (event.payload.kind == EventKind::kArrival) {
      Arrive(next_arrival_, now);
      PullArrival();
    } else if (event.payload.kind == EventKind::kFollowUp) {
      const auto index = static_cast<size_t>(event.payload.replica);
      Request* r = follow_ups_[index];
      follow_ups_[index] = nullptr;
      free_follow_ups_.push_back(event.payload.replica);
      Arrive(r, now);
    } else if (event.payload.kind == EventKind::kStepDone) {
      StepDone(event.payload.replica, now);
      if (on_progress && progress_.steps % progress_every_steps == 0) on_progress(progress_);
      SERVELAB_RETURN_IF_ERROR(CheckProgress(now));
    }  // kStageFree: nothing to apply; the replica may start its next batch below
    // Start idle replicas once every event at this instant has been applied.
    if (events_.Empty() || events_.Top().time > now) {
      to_start_.clear();
      for (int32_t i = 0; i < NumReplicas(); ++i) {
        if (CanStart(i, now)) to_start_.push_back(i);
      }
      TimeNs start = now;
      if (decode_runs_ && to_start_.size() == 1) {
        auto reached = RunDecodeIterations(to_start_[0], now, on_progress, progress_every_steps);
        if (!reached.ok()) return reached.status();
        start = *reached;
      }
      for (const int32_t i : to_start_) {
        if (CanStart(i, start)) SERVELAB_RETURN_IF_ERROR(StartStep(i, start));
      }
    }
  }
  if (on_progress) on_progress(progress_);
  if (prefix_caching_) {
    for (int32_t i = 0; i < NumReplicas(); ++i) {
      metrics_->OnPrefixCacheStats(i, replicas_[i]->kv->CacheStats());
    }
  }
  return metrics_->Finish();
}

}  // namespace servelab
