#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <string>

#include "policies/registry.h"

namespace servelab {

StatusOr<std::unique_ptr<Simulator>> Simulator::Create(const SimulationOptions& options,
                                                       std::unique_ptr<Workload> workload,
                                                       const BackendFactory& factory,
                                                       MetricsCollector* metrics) {
  SERVELAB_CHECK(options.num_replicas >= 1 && options.max_model_len > 0);
  std::unique_ptr<Simulator> sim(new Simulator());
  sim->workload_ = std::move(workload);
  sim->metrics_ = metrics;
  auto router = MakeRouter(options.router);
  if (!router.ok()) return router.status();
  sim->router_ = std::move(router).value();
  for (int32_t i = 0; i < options.num_replicas; ++i) {
    auto replica = std::make_unique<Replica>();
    auto backend = factory(i);
    if (!backend.ok()) return backend.status();
    replica->backend = std::move(backend).value();
    const KvCapacity capacity = replica->backend->Capacity();
    if (capacity.block_size != options.scheduler.block_size) {
      return Internal("backend block size " + std::to_string(capacity.block_size) +
                      " differs from scheduler.block_size " +
                      std::to_string(options.scheduler.block_size));
    }
    const auto watermark = static_cast<int32_t>(
        std::floor(options.scheduler.watermark * capacity.num_gpu_blocks));
    replica->kv = std::make_unique<KvCacheManager>(capacity.num_gpu_blocks, capacity.block_size,
                                                   watermark, capacity.num_cpu_blocks);
    PolicyContext context = options.policy_context;
    context.replica = i;
    auto policy = BuiltinPolicies().Make(options.scheduler.policy, context);
    if (!policy.ok()) return policy.status();
    replica->scheduler = std::make_unique<Scheduler>(options.scheduler, options.max_model_len,
                                                     std::move(policy).value(), replica->kv.get());
    sim->replicas_.push_back(std::move(replica));
  }
  sim->loads_.resize(options.num_replicas);
  sim->wall_clock_ = options.wall_clock;
  return sim;
}

Request* Simulator::NewRequest() {
  if (!free_.empty()) {
    Request* r = free_.back();
    free_.pop_back();
    return r;
  }
  return &pool_.emplace_back();
}

void Simulator::Release(Request* request) {
  // Keep the vectors' capacity: the next request reuses them without allocating.
  std::vector<int32_t> blocks = std::move(request->block_table);
  std::vector<uint64_t> hashes = std::move(request->prefix_block_hashes);
  blocks.clear();
  hashes.clear();
  *request = Request();
  request->block_table = std::move(blocks);
  request->prefix_block_hashes = std::move(hashes);
  free_.push_back(request);
}

void Simulator::PullArrival() {
  Request* r = NewRequest();
  if (!workload_->Next(*r)) {
    Release(r);
    next_arrival_ = nullptr;
    return;
  }
  next_arrival_ = r;
  events_.Push(r->arrival, EventPayload{EventKind::kArrival, -1});
}

Status Simulator::StartStep(int32_t index, TimeNs now) {
  Replica& replica = *replicas_[index];
  const StepPlan& plan = replica.scheduler->Schedule(now);
  if (plan.empty()) {
    if (replica.scheduler->HasWork()) {
      return Internal("replica " + std::to_string(index) + " has " +
                      std::to_string(replica.scheduler->NumRunning()) + " running and " +
                      std::to_string(replica.scheduler->NumWaiting()) +
                      " waiting requests but can schedule none (policy '" +
                      std::string(replica.scheduler->GetPolicy().Name()) +
                      "' stalled every request)");
    }
    return Status::Ok();
  }
  replica.result = replica.backend->Execute(plan);
  SERVELAB_CHECK(replica.result.elapsed >= 0);
  replica.step_start = now;
  replica.busy = true;
  events_.Push(now + replica.result.elapsed, EventPayload{EventKind::kStepDone, index});
  return Status::Ok();
}

Status Simulator::Run(const std::function<void(const SimulationProgress&)>& on_progress,
                      int64_t progress_every_steps) {
  PullArrival();
  const auto wall_start = std::chrono::steady_clock::now();
  while (!events_.Empty()) {
    const auto event = events_.Pop();
    TimeNs now = event.time;
    if (wall_clock_) {
      // Real time: wait for the event's instant, and never run ahead of the real clock
      // (host overhead between steps makes the next one start later).
      auto real = [&] {
        return static_cast<TimeNs>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now() - wall_start)
                                       .count());
      };
      if (now > real()) std::this_thread::sleep_for(std::chrono::nanoseconds(now - real()));
      now = std::max(now, real());
    }
    progress_.now = now;
    if (event.payload.kind == EventKind::kArrival) {
      Request* r = next_arrival_;
      for (size_t i = 0; i < replicas_.size(); ++i) {
        const Scheduler& s = *replicas_[i]->scheduler;
        loads_[i] = ReplicaLoad{s.NumRunning(), s.NumWaiting(), s.TokensPending()};
      }
      const int32_t target = router_->Route(*r, loads_);
      SERVELAB_CHECK(target >= 0 && target < NumReplicas());
      r->replica = target;
      ++progress_.arrived;
      if (metrics_ != nullptr) metrics_->OnArrival(*r);
      if (!replicas_[target]->scheduler->AddRequest(*r, now)) {
        ++progress_.rejected;
        if (metrics_ != nullptr) metrics_->OnRejected(*r);
        Release(r);
      }
      PullArrival();
    } else {
      Replica& replica = *replicas_[event.payload.replica];
      Scheduler& scheduler = *replica.scheduler;
      if (metrics_ != nullptr) {
        metrics_->OnStep(event.payload.replica, scheduler.LastPlan(),
                         replica.step_start, now, scheduler.Kv().NumUsedBlocks(),
                         scheduler.NumWaiting(), scheduler.NumPreemptedLastStep());
      }
      for (Request* done : scheduler.Commit(replica.result, now)) {
        ++progress_.finished;
        if (metrics_ != nullptr) metrics_->OnFinished(*done);
        replica.backend->OnRequestFinished(done->id);
        Release(done);
      }
      replica.busy = false;
      ++progress_.steps;
      if (on_progress && progress_.steps % progress_every_steps == 0) on_progress(progress_);
    }
    // Start idle replicas once every event at this instant has been applied.
    if (events_.Empty() || events_.Top().time > now) {
      for (int32_t i = 0; i < NumReplicas(); ++i) {
        if (!replicas_[i]->busy && replicas_[i]->scheduler->HasWork()) {
          SERVELAB_RETURN_IF_ERROR(StartStep(i, now));
        }
      }
    }
  }
  if (on_progress) on_progress(progress_);
  return Status::Ok();
}

}  // namespace servelab
