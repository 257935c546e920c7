#pragma once
// The backends a validation wraps around the engine's and the simulator's (validation.h):
// RecordingBackend costs each step the engine executes on the simulator too, and keeps it
// for ReplayBackend, which runs the simulator on the engine's own step times. Only
// validation.cc, recorded_engine.cc (WrappingBackend) and their tests include this.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/prefix_key.h"
#include "sim/validation.h"

namespace servelab::validation_internal {

// What tells one step of a run from another: its sequences (each one's request, new
// tokens, context and whether it emits, in order, hashed) and its swap copies, the counts
// kept to be told; and when it starts.
struct StepKey {
  TimeNs start = 0;
  int32_t seqs = 0, tokens = 0, swaps = 0;
  uint64_t hash = 0;

  // The same work, whenever it starts.
  bool SameWork(const StepKey& o) const {
    return seqs == o.seqs && tokens == o.tokens && swaps == o.swaps && hash == o.hash;
  }
  static StepKey Of(const StepPlan& plan) {
    StepKey k;
    k.start = plan.start;
    k.seqs = static_cast<int32_t>(plan.seqs.size());
    k.swaps = static_cast<int32_t>(plan.swap_out.size() + plan.swap_in.size());
    uint64_t h = 0x5e9a7e95ULL;
    for (const ScheduledRequest& seq : plan.seqs) {
      k.tokens += seq.num_new_tokens;
      h = MixKey(h, static_cast<uint64_t>(seq.request->id));
      h = MixKey(h, (static_cast<uint64_t>(static_cast<uint32_t>(seq.num_computed_tokens)) << 32) |
                        static_cast<uint32_t>(seq.num_new_tokens));
      h = MixKey(h, (seq.emits_token ? 1u : 0u) | (seq.is_padding ? 2u : 0u));
    }
    for (const auto* copies : {&plan.swap_out, &plan.swap_in}) {
      for (const BlockCopy& c : *copies) {
        h = MixKey(h, (static_cast<uint64_t>(static_cast<uint32_t>(c.src)) << 32) |
                          static_cast<uint32_t>(c.dst));
      }
      h = MixKey(h, 0x5eaULL);  // the two lists kept apart
    }
    k.hash = h;
    return k;
  }
  // "12 sequences (140 tokens, 0 swap copies) from t = 1.234567890 s"
  std::string Said() const {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%d sequence%s (%d token%s, %d swap cop%s) from t = %.9f s", seqs,
                  seqs == 1 ? "" : "s", tokens, tokens == 1 ? "" : "s", swaps, swaps == 1 ? "y" : "ies",
                  ToSeconds(start));
    return buf;
  }
};

// One step the engine executed, as the replay needs it: which step, and what it took.
struct EngineStep {
  StepKey key;
  TimeNs elapsed = 0;
  std::vector<TimeNs> stages;
};
// Per replica, the engine's steps in order (a map: a replica's list stays where it is
// while the next replica's is added).
using EngineSteps = std::map<int32_t, std::vector<EngineStep>>;

// A backend that is `inner` but for Execute, which the wrapper defines: every other call
// forwarded, except decode runs' (a wrapper steps every iteration). The driver calls its
// backends from one thread.
class WrappingBackend : public Backend {
 public:
  explicit WrappingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  std::string_view Name() const override { return inner_->Name(); }
  KvCapacity Capacity() const override { return inner_->Capacity(); }
  int32_t MaxModelLen() const override { return inner_->MaxModelLen(); }
  std::optional<TimeNs> PredictPrefillTime(int32_t num_tokens) const override {
    return inner_->PredictPrefillTime(num_tokens);
  }
  std::string Describe() const override { return inner_->Describe(); }
  void OnRequestFinished(int64_t request_id) override { inner_->OnRequestFinished(request_id); }
  std::optional<ExpertsRun> Routing(const StepPlan& plan) const override { return inner_->Routing(plan); }
  std::optional<DecodeGraphRun> DecodeGraph(const StepPlan& plan) const override { return inner_->DecodeGraph(plan); }
  bool ReportsDecodeGraphs() const override { return inner_->ReportsDecodeGraphs(); }

 protected:
  Backend& inner() const { return *inner_; }

 private:
  std::unique_ptr<Backend> inner_;
};

// The engine's backend, each plan it executes costed on the simulator's backend too
// (before the engine runs it: the plan's requests are as scheduled); with `trace`, each
// step kept for the replay.
class RecordingBackend final : public WrappingBackend {
 public:
  RecordingBackend(std::unique_ptr<Backend> engine, std::unique_ptr<Backend> sim,
                   std::vector<StepComparison>* steps, std::vector<EngineStep>* trace)
      : WrappingBackend(std::move(engine)), sim_(std::move(sim)), steps_(steps), trace_(trace) {}

  StatusOr<StepResult> Execute(const StepPlan& plan) override {
    StepComparison step;
    bool decode_only = true;
    for (const ScheduledRequest& seq : plan.seqs) {
      step.tokens += seq.num_new_tokens;
      step.context_tokens += seq.num_computed_tokens;
      decode_only = decode_only && seq.IsDecode();
      if (seq.is_padding) ++step.padding;
    }
    step.seqs = static_cast<int32_t>(plan.seqs.size());
    step.decode_only = decode_only && !plan.seqs.empty();
    step.after_prefill = plan.steps_since_prefill;
    auto predicted = sim_->Execute(plan);
    if (!predicted.ok()) return predicted.status();
    const StepKey key = StepKey::Of(plan);  // before the engine runs it, as the replay's
    auto result = inner().Execute(plan);
    if (!result.ok()) return result;
    step.measured_s = ToSeconds(result->elapsed);
    step.predicted_s = ToSeconds(predicted->elapsed);
    step.experts_measured = inner().Routing(plan);
    step.experts_predicted = sim_->Routing(plan);
    step.graphs_reported = inner().ReportsDecodeGraphs();
    step.graph_measured = inner().DecodeGraph(plan);
    step.graph_predicted = sim_->DecodeGraph(plan);
    if (step.tokens > 0) steps_->push_back(step);  // swap-only steps: nothing to compare
    if (trace_ != nullptr) trace_->push_back(EngineStep{key, result->elapsed, result->stages});
    return result;
  }

 private:
  std::unique_ptr<Backend> sim_;
  std::vector<StepComparison>* steps_;
  std::vector<EngineStep>* trace_;
};

// Where a replay stands, over its replicas.
struct ReplayState {
  int64_t matched = 0;
  int64_t shifted = 0;  // of the matched, those that started at another time
  TimeNs largest_shift = 0;
  std::string parted;                 // the first parting's account
  std::map<int32_t, size_t> reached;  // per replica, the steps it executed
};

// The simulator's backend with the engine's step times (StepReplay): each plan is executed
// by the simulator, and while it is the engine's next step's work its time is the
// engine's (a start at another time is counted: time the engine spent between steps).
// From the first step that is not (or the first past the engine's last), the simulator's
// own times. It steps every iteration, as the engine does (no decode runs).
class ReplayBackend final : public WrappingBackend {
 public:
  ReplayBackend(std::unique_ptr<Backend> sim, int32_t replica, const std::vector<EngineStep>* trace,
                ReplayState* state)
      : WrappingBackend(std::move(sim)), replica_(replica), trace_(trace), state_(state) {}

  StatusOr<StepResult> Execute(const StepPlan& plan) override {
    const StepKey key = StepKey::Of(plan);
    auto result = inner().Execute(plan);
    if (!result.ok()) return result;
    const size_t i = state_->reached[replica_]++;
    if (parted_) return result;
    if (i < trace_->size() && (*trace_)[i].key.SameWork(key)) {
      const EngineStep& engine = (*trace_)[i];
      result->elapsed = engine.elapsed;
      result->stages = engine.stages;
      ++state_->matched;
      if (engine.key.start != key.start) {
        ++state_->shifted;
        state_->largest_shift = std::max(state_->largest_shift, std::abs(engine.key.start - key.start));
      }
      return result;
    }
    parted_ = true;
    if (state_->parted.empty()) {
      state_->parted = "replica " + std::to_string(replica_) + ", step " + std::to_string(i + 1) +
                       ": the replay ran " + key.Said() + ", " +
                       (i < trace_->size() ? "the engine " + (*trace_)[i].key.Said()
                                           : std::string("the engine had finished"));
    }
    return result;
  }

 private:
  int32_t replica_;
  const std::vector<EngineStep>* trace_;
  ReplayState* state_;
  bool parted_ = false;
};

}  // namespace servelab::validation_internal
