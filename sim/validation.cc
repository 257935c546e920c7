#include "sim/validation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "core/prefix_key.h"
#include "core/text.h"
#include "core/uniform_step.h"
#include "driver/experiment.h"
#include "driver/result_folder.h"
#include "sim/counted_routing.h"
#include "sim/sim_backend.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;

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
      decode_only = decode_only && seq.IsDecode();
    }
    step.seqs = static_cast<int32_t>(plan.seqs.size());
    step.decode_only = decode_only && !plan.seqs.empty();
    auto predicted = sim_->Execute(plan);
    if (!predicted.ok()) return predicted.status();
    const StepKey key = StepKey::Of(plan);  // before the engine runs it, as the replay's
    auto result = inner().Execute(plan);
    if (!result.ok()) return result;
    step.measured_s = ToSeconds(result->elapsed);
    step.predicted_s = ToSeconds(predicted->elapsed);
    step.experts_measured = inner().Routing(plan);
    step.experts_predicted = sim_->Routing(plan);
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

enum class Steps { kAll, kDecodeOnly, kMixed };

// Whether `step` is one of `which` with a measured time to compare against.
bool Compared(const StepComparison& step, Steps which) {
  if (which == Steps::kDecodeOnly && !step.decode_only) return false;
  if (which == Steps::kMixed && step.decode_only) return false;
  return step.measured_s > 0;
}

// Each compared step's (predicted - measured) / measured, in step order.
std::vector<double> RelativeErrors(const std::vector<StepComparison>& steps, Steps which) {
  std::vector<double> rel;
  for (const StepComparison& step : steps) {
    if (Compared(step, which)) rel.push_back((step.predicted_s - step.measured_s) / step.measured_s);
  }
  return rel;
}

// The compared steps' mean measured (or predicted) time, seconds; 0 with none.
double MeanStep(const std::vector<StepComparison>& steps, Steps which, bool predicted) {
  double sum = 0;
  int64_t n = 0;
  for (const StepComparison& step : steps) {
    if (!Compared(step, which)) continue;
    sum += predicted ? step.predicted_s : step.measured_s;
    ++n;
  }
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

// The compared steps' summed predicted time against their summed measured time, percent;
// 0 with none.
double TimeErrorPct(const std::vector<StepComparison>& steps, Steps which) {
  const double measured = MeanStep(steps, which, false);
  return measured > 0 ? 100.0 * (MeanStep(steps, which, true) - measured) / measured : 0.0;
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string Pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.2f", v);
  return buf;
}

// (to - from) / from, a fraction; 0 when `from` is not positive.
double Change(double from, double to) { return from > 0 ? (to - from) / from : 0.0; }

// A mixture of experts' routing over one kind of step of a run: decode-only steps of a
// range of batch sizes (1, 2, 3-4, 5-8, ...: the scheduler's batches grow by ones, the
// router's distinct experts saturate), or the steps with a prefill chunk; the engine's
// counts and the simulator's expectation, each the mean over the steps.
struct RoutingRow {
  std::string steps;  // "decode_1", "decode_3-4", "mixed"
  int64_t count = 0;
  ExpertsRun engine, sim;
};

// The routing model that fits a run's counts, on the engine's and on the simulator's
// expectations: the skew (FitRoutingSkew) its decode-only steps of two or more sequences
// fit, then, at that skew, the locality and favourites (FitRoutingLocality) its lone
// prefill chunks (one sequence, more than one token) fit; with how many steps of each. The simulator's
// recover its own routing; the engine's are the ones to route with to route as it did.
// None without such steps or routing counts.
struct RoutingFit {
  int64_t decode_steps = 0;
  double skew_engine = 0, skew_sim = 0;  // 0 without decode steps
  int64_t chunk_steps = 0;
  RoutingLocality locality_engine, locality_sim;  // {1, 0} without lone chunks
};
std::optional<RoutingFit> FitRouting(const LoadValidation& v) {
  const ModelSpec& model = v.sim_config.model;
  if (!model.IsMoe()) return std::nullopt;
  std::vector<RoutingCount> decodes, decodes_expected, chunks, chunks_expected;
  for (const StepComparison& step : v.steps) {
    if (!step.experts_measured || !step.experts_predicted) continue;
    if (step.decode_only && step.seqs >= 2) {
      decodes.push_back(RoutingCount{step.seqs, 1, step.experts_measured->run});
      decodes_expected.push_back(RoutingCount{step.seqs, 1, step.experts_predicted->run});
    } else if (!step.decode_only && step.seqs == 1 && step.tokens > 1) {
      chunks.push_back(RoutingCount{1, step.tokens, step.experts_measured->run});
      chunks_expected.push_back(RoutingCount{1, step.tokens, step.experts_predicted->run});
    }
  }
  if (decodes.empty() && chunks.empty()) return std::nullopt;
  const int32_t e = model.num_experts, k = model.num_experts_per_tok;
  RoutingFit fit;
  fit.decode_steps = static_cast<int64_t>(decodes.size());
  if (!decodes.empty()) {
    fit.skew_engine = FitRoutingSkew(e, k, decodes);
    fit.skew_sim = FitRoutingSkew(e, k, decodes_expected);
  }
  fit.chunk_steps = static_cast<int64_t>(chunks.size());
  if (!chunks.empty()) {
    fit.locality_engine = FitRoutingLocality(e, k, fit.skew_engine, chunks);
    fit.locality_sim = FitRoutingLocality(e, k, fit.skew_sim, chunks_expected);
  }
  return fit;
}

// The rows of a run whose steps counted their routing, decode ranges in order, then the
// mixed steps; empty for a dense model or an engine that does not count.
std::vector<RoutingRow> RoutingRows(const std::vector<StepComparison>& steps) {
  std::map<int32_t, RoutingRow> decode;  // by the range's top, a power of two
  RoutingRow mixed{"mixed", 0, {}, {}};
  for (const StepComparison& step : steps) {
    if (!step.experts_measured || !step.experts_predicted) continue;
    RoutingRow* row = &mixed;
    if (step.decode_only) {
      int32_t top = 1;
      while (top < step.seqs) top *= 2;
      row = &decode[top];
      if (row->count == 0) {
        const int32_t bottom = top / 2 + 1;
        row->steps = "decode_" + (bottom >= top ? std::to_string(top)
                                                : std::to_string(bottom) + "-" + std::to_string(top));
      }
    }
    ++row->count;
    row->engine.run += step.experts_measured->run;
    row->engine.single_row += step.experts_measured->single_row;
    row->sim.run += step.experts_predicted->run;
    row->sim.single_row += step.experts_predicted->single_row;
  }
  std::vector<RoutingRow> rows;
  for (auto& [top, row] : decode) rows.push_back(row);
  if (mixed.count > 0) rows.push_back(mixed);
  for (RoutingRow& row : rows) {
    const double n = static_cast<double>(row.count);
    row.engine = ExpertsRun{row.engine.run / n, row.engine.single_row / n};
    row.sim = ExpertsRun{row.sim.run / n, row.sim.single_row / n};
  }
  return rows;
}

double SumOf(const std::vector<ReferenceStep>& steps, double ReferenceStep::*seconds) {
  double sum = 0;
  for (const ReferenceStep& r : steps) sum += r.*seconds;
  return sum;
}

}  // namespace

double HostCheck::Before() const { return SumOf(steps, &ReferenceStep::before_s); }
double HostCheck::After() const { return SumOf(steps, &ReferenceStep::after_s); }
double HostCheck::Predicted() const { return SumOf(steps, &ReferenceStep::predicted_s); }

std::string ReferenceStep::Label() const {
  return std::string(decode ? "decode-" : "prefill-") + std::to_string(tokens) + "@" +
         std::to_string(context);
}

double HostCheck::DriftPct() const {
  double sum = 0;
  for (const ReferenceStep& r : steps) sum += Change(r.before_s, r.after_s);
  return steps.empty() ? 0.0 : sum / static_cast<double>(steps.size()) * 100.0;
}

double HostCheck::MaxDriftPct() const {
  double largest = 0;
  for (const ReferenceStep& r : steps) largest = std::max(largest, std::abs(Change(r.before_s, r.after_s)));
  return largest * 100.0;
}

double HostCheck::ErrorPct(bool after) const {
  double sum = 0;
  for (const ReferenceStep& r : steps) sum += Change(after ? r.after_s : r.before_s, r.predicted_s);
  return steps.empty() ? 0.0 : sum / static_cast<double>(steps.size()) * 100.0;
}

bool HostCheck::Drifted(double max_drift_pct) const { return MaxDriftPct() > max_drift_pct; }

double LoadValidation::ErrorPct(const std::string& metric, const std::string& statistic) const {
  for (const MetricComparison& m : metrics) {
    if (m.metric == metric && m.statistic == statistic) return m.error_pct;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

ExperimentConfig SimulatedTwin(const ExperimentConfig& engine_config, const KvCapacity& capacity,
                               int32_t max_model_len) {
  ExperimentConfig sim = engine_config;
  sim.backend = BackendKind::kSim;
  sim.hardware.num_gpu_blocks = capacity.num_gpu_blocks;
  sim.scheduler.block_size = capacity.block_size;
  sim.scheduler.max_model_len = max_model_len;
  return sim;
}

Status PredictReferenceSteps(const ExperimentConfig& sim_config, std::vector<ReferenceStep>& steps) {
  auto factory = MakeSimBackendFactory(sim_config);
  if (!factory.ok()) return factory.status();
  for (ReferenceStep& r : steps) {
    // A fresh backend per step: nothing a step leaves behind (its swaps, its cache) is
    // in the next one's cost.
    auto backend = (*factory)(0);
    if (!backend.ok()) return backend.status();
    const UniformStep step(DecodesOrChunk(r.decode, r.tokens, r.context));
    auto result = (*backend)->Execute(step.Plan());
    if (!result.ok()) return result.status();
    r.predicted_s = ToSeconds(result->elapsed);
  }
  return Status::Ok();
}

namespace {

// (sim - engine) / engine x 100; 0 when both are 0, +inf when only the engine's is.
double ErrorPctOf(double engine, double sim) {
  if (engine != 0) return (sim - engine) / engine * 100.0;
  return sim != 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

}  // namespace

std::vector<MetricComparison> CompareRuns(const RunSummary& engine, const RunSummary& sim) {
  std::vector<MetricComparison> out;
  auto add = [&](const std::string& metric, const std::string& statistic, double e, double s) {
    out.push_back(MetricComparison{metric, statistic, e, s, ErrorPctOf(e, s)});
  };
  const std::pair<const char*, Distribution RunSummary::*> latencies[] = {
      {"ttft", &RunSummary::ttft_s}, {"tpot", &RunSummary::tpot_s},
      {"itl", &RunSummary::itl_s}, {"e2e", &RunSummary::e2e_s}};
  for (const auto& [name, member] : latencies) {
    const Distribution& e = engine.*member;
    const Distribution& s = sim.*member;
    add(name, "mean", e.mean, s.mean);
    add(name, "p50", e.p50, s.p50);
    add(name, "p90", e.p90, s.p90);
    add(name, "p99", e.p99, s.p99);
  }
  add("output_throughput", "value", engine.output_throughput, sim.output_throughput);
  add("request_throughput", "value", engine.request_throughput, sim.request_throughput);
  return out;
}

namespace {

// The engine's run of `config` into dir/engine, each step costed by the simulator as it
// runs (RecordingBackend): v.engine, v.steps and their errors, v.sim_config (the twin),
// v.sim_cost_model; with `trace`, every replica's steps for the replay.
Status RunEngineRecorded(const ExperimentConfig& config, const BackendFactory& engine,
                         const std::string& dir, bool progress, LoadValidation& v,
                         EngineSteps* trace = nullptr) {
  ExperimentConfig engine_config = config;
  engine_config.output.dir = (fs::path(dir) / "engine").string();
  auto prepared = PrepareExperiment(engine_config);
  if (!prepared.ok()) return prepared.status();
  // The simulator's side is checked before anything runs, on the experiment as given
  // (the engine's pool is known only once its backend exists).
  ExperimentConfig checked = engine_config;
  checked.backend = BackendKind::kSim;
  SERVELAB_RETURN_IF_ERROR(ResolveCostModel(checked));

  std::optional<ExperimentConfig> twin;
  BackendFactory recording = [&](int32_t replica) -> StatusOr<std::unique_ptr<Backend>> {
    auto real = engine(replica);
    if (!real.ok()) return real.status();
    ExperimentConfig sim_config =
        SimulatedTwin(checked, (*real)->Capacity(), (*real)->MaxModelLen());
    auto sims = MakeSimBackendFactory(sim_config);
    if (!sims.ok()) return sims.status();
    auto sim = (*sims)(replica);
    if (!sim.ok()) return sim.status();
    if (!twin) twin = sim_config;
    v.sim_cost_model = (*sim)->Describe();
    return std::unique_ptr<Backend>(std::make_unique<RecordingBackend>(
        std::move(real).value(), std::move(sim).value(), &v.steps,
        trace != nullptr ? &(*trace)[replica] : nullptr));
  };
  auto engine_summary = RunToFolder(*prepared, recording, progress);
  if (!engine_summary.ok()) return engine_summary.status();
  v.engine = *engine_summary;
  if (!twin) return Internal("validate: the engine built no backend");
  v.sim_config = *twin;

  const std::vector<double> decode_errors = RelativeErrors(v.steps, Steps::kDecodeOnly);
  v.step_error = ErrorStats::Of(RelativeErrors(v.steps, Steps::kAll));
  v.decode_step_error = ErrorStats::Of(decode_errors);
  v.mixed_step_error = ErrorStats::Of(RelativeErrors(v.steps, Steps::kMixed));
  v.decode_wander = ErrorWander::Of(decode_errors);
  return Status::Ok();
}

// The simulated twin's run into `folder`, each replica's backend wrapped by `wrap` when
// given.
StatusOr<RunSummary> RunTwin(
    ExperimentConfig twin, const std::string& folder, bool progress,
    const std::function<std::unique_ptr<Backend>(std::unique_ptr<Backend>, int32_t)>& wrap = {}) {
  twin.output.dir = folder;
  auto prepared = PrepareExperiment(twin);
  if (!prepared.ok()) return prepared.status();
  auto sims = MakeSimBackendFactory(prepared->config);
  if (!sims.ok()) return sims.status();
  if (!wrap) return RunToFolder(*prepared, *sims, progress);
  const BackendFactory wrapped = [&](int32_t replica) -> StatusOr<std::unique_ptr<Backend>> {
    auto sim = (*sims)(replica);
    if (!sim.ok()) return sim.status();
    return wrap(std::move(sim).value(), replica);
  };
  return RunToFolder(*prepared, wrapped, progress);
}

}  // namespace

std::string RerunFolder(int32_t run) { return "run-" + std::to_string(run); }

std::string StepReplay::Account() const {
  if (!parted.empty()) return "parted: " + parted;
  if (shifted == 0) return "one";
  char buf[160];
  std::snprintf(buf, sizeof buf, "the same work, %lld step%s started at other times (up to %.3f ms)",
                static_cast<long long>(shifted), shifted == 1 ? "" : "s", 1e3 * largest_shift_s);
  return buf;
}

double StepReplay::LargestErrorPct() const {
  double largest = 0;
  for (const MetricComparison& m : metrics) {
    if (std::abs(m.error_pct) > std::abs(largest)) largest = m.error_pct;
  }
  return largest;
}

std::vector<MetricComparison> LoadValidation::AgainstEngineMean() const {
  std::vector<MetricComparison> out = metrics;
  for (size_t m = 0; m < out.size(); ++m) {
    double sum = metrics[m].engine;
    for (const LoadValidation& again : reruns) sum += again.metrics[m].engine;
    out[m].engine = sum / static_cast<double>(1 + reruns.size());
    out[m].error_pct = ErrorPctOf(out[m].engine, out[m].sim);
  }
  return out;
}

StatusOr<LoadValidation> ValidateLoad(const ExperimentConfig& config, const BackendFactory& engine,
                                      const std::string& dir, bool progress) {
  LoadValidation v;
  EngineSteps trace;
  SERVELAB_RETURN_IF_ERROR(RunEngineRecorded(config, engine, dir, progress, v, &trace));
  auto sim_summary = RunTwin(v.sim_config, (fs::path(dir) / "sim").string(), progress);
  if (!sim_summary.ok()) return sim_summary.status();
  v.sim = *sim_summary;
  v.metrics = CompareRuns(v.engine, v.sim);

  // The twin again, on the engine's step times.
  ReplayState state;
  const std::vector<EngineStep> none;
  auto replay_summary = RunTwin(
      v.sim_config, (fs::path(dir) / "replay").string(), progress,
      [&](std::unique_ptr<Backend> sim, int32_t replica) -> std::unique_ptr<Backend> {
        const auto it = trace.find(replica);
        return std::make_unique<ReplayBackend>(std::move(sim), replica,
                                               it != trace.end() ? &it->second : &none, &state);
      });
  if (!replay_summary.ok()) return replay_summary.status();
  StepReplay replay;
  for (const auto& [replica, steps] : trace) {
    replay.steps += static_cast<int64_t>(steps.size());
    const size_t reached = state.reached[replica];
    if (state.parted.empty() && reached < steps.size()) {  // the replay finished first
      state.parted = "replica " + std::to_string(replica) + ": the replay ran " +
                     std::to_string(reached) + " steps, the engine " + std::to_string(steps.size());
    }
  }
  for (const auto& [replica, reached] : state.reached) replay.replayed += static_cast<int64_t>(reached);
  replay.matched = state.matched;
  replay.shifted = state.shifted;
  replay.largest_shift_s = ToSeconds(state.largest_shift);
  replay.parted = state.parted;
  replay.summary = *replay_summary;
  replay.metrics = CompareRuns(v.engine, replay.summary);
  v.replay = std::move(replay);
  return v;
}

StatusOr<LoadValidation> ValidateLoadAgain(const ExperimentConfig& config, const BackendFactory& engine,
                                           const std::string& dir, const LoadValidation& first,
                                           int32_t run, bool progress) {
  LoadValidation v;
  v.run = run;
  v.label = first.label + "/" + RerunFolder(run);
  SERVELAB_RETURN_IF_ERROR(RunEngineRecorded(config, engine, dir, progress, v));
  // What SimulatedTwin takes from the engine: the same, or first.sim is not this run's.
  const ExperimentConfig& a = first.sim_config;
  const ExperimentConfig& b = v.sim_config;
  if (a.hardware.num_gpu_blocks != b.hardware.num_gpu_blocks ||
      a.scheduler.block_size != b.scheduler.block_size ||
      a.scheduler.max_model_len != b.scheduler.max_model_len) {
    return Internal("validate: the engine's KV pool or context changed between runs of one load (" +
                    std::to_string(a.hardware.num_gpu_blocks) + " blocks of " +
                    std::to_string(a.scheduler.block_size) + ", context " +
                    std::to_string(a.scheduler.max_model_len) + " -> " +
                    std::to_string(b.hardware.num_gpu_blocks) + " of " +
                    std::to_string(b.scheduler.block_size) + ", " +
                    std::to_string(b.scheduler.max_model_len) + ")");
  }
  v.sim = first.sim;
  v.metrics = CompareRuns(v.engine, v.sim);
  v.run_to_run = CompareRuns(first.engine, v.engine);
  return v;
}

ErrorWander ErrorWander::Of(std::span<const double> relative_errors, int32_t window) {
  ErrorWander w;
  w.window = std::max(1, window);
  const size_t n = relative_errors.size();
  if (n >= 3) {
    double mean = 0;
    for (double e : relative_errors) mean += e;
    mean /= static_cast<double>(n);
    double lagged = 0, squares = 0;
    for (size_t i = 0; i < n; ++i) {
      const double d = relative_errors[i] - mean;
      squares += d * d;
      if (i + 1 < n) lagged += d * (relative_errors[i + 1] - mean);
    }
    // A spread under 0.01% is the steps' rounding to whole nanoseconds, not wander.
    if (squares > static_cast<double>(n) * 1e-8) w.autocorrelation = lagged / squares;
  }
  const size_t size = static_cast<size_t>(w.window);
  for (size_t start = 0; start + size <= n; start += size) {
    double sum = 0;
    for (size_t i = start; i < start + size; ++i) sum += relative_errors[i];
    const double pct = 100.0 * sum / static_cast<double>(size);
    w.window_min_pct = w.windows == 0 ? pct : std::min(w.window_min_pct, pct);
    w.window_max_pct = w.windows == 0 ? pct : std::max(w.window_max_pct, pct);
    ++w.windows;
  }
  return w;
}

namespace {

// Each load's runs in order: the first, then its reruns.
std::vector<const LoadValidation*> EveryRun(const std::vector<LoadValidation>& loads) {
  std::vector<const LoadValidation*> runs;
  for (const LoadValidation& v : loads) {
    runs.push_back(&v);
    for (const LoadValidation& again : v.reruns) runs.push_back(&again);
  }
  return runs;
}

// The latency figures a validation is judged on (ours, after BLIS's): TTFT, TPOT and E2E
// at p50 and p99.
bool TargetFigure(const MetricComparison& m) {
  return (m.metric == "ttft" || m.metric == "tpot" || m.metric == "e2e") &&
         (m.statistic == "p50" || m.statistic == "p99");
}

// (heading, figures) per column of a table of end-to-end figures.
using MetricColumns = std::vector<std::pair<std::string, std::vector<MetricComparison>>>;

// A markdown table of end-to-end figures' error_pct: a row per figure (the first column's
// order, CompareRuns'), a column per (heading, figures).
std::string MetricTable(const MetricColumns& columns) {
  std::string md = "| metric |";
  for (const auto& [heading, figures] : columns) md += " " + heading + " |";
  md += "\n|---|";
  for (size_t i = 0; i < columns.size(); ++i) md += "---|";
  md += "\n";
  if (columns.empty()) return md;
  const std::vector<MetricComparison>& rows = columns.front().second;
  for (size_t m = 0; m < rows.size(); ++m) {
    md += "| ";
    md += rows[m].metric;
    if (rows[m].statistic != "value") {
      md += ' ';
      md += rows[m].statistic;
    }
    md += " |";
    for (const auto& [heading, figures] : columns) {
      md += ' ';
      md += Pct(figures[m].error_pct);
      md += " |";
    }
    md += "\n";
  }
  return md;
}

// validation.md's section on the engine's reruns (empty without any): each rerun's
// figures against the first run's, and on the figures validations are judged on, how
// often the simulator's error on the first run is within the engine's own largest change.
std::string RunToRunMarkdown(const std::vector<LoadValidation>& loads) {
  std::vector<const LoadValidation*> reruns;
  for (const LoadValidation& v : loads) {
    for (const LoadValidation& again : v.reruns) reruns.push_back(&again);
  }
  if (reruns.empty()) return "";
  MetricColumns changes;
  for (const LoadValidation* v : reruns) changes.emplace_back(v->label, v->run_to_run);
  std::string md =
      "\nRun to run: the engine again on the same requests, right after the first run (no "
      "host check), its figures against the first run's, % ((again - first) / first). The "
      "engine's own change bounds how closely any simulator can be shown to match it.\n\n" +
      MetricTable(changes);
  // Per load and figure: the simulator's error on the first run against the largest
  // change of the engine's reruns.
  int32_t figures = 0, within = 0;
  for (const LoadValidation& v : loads) {
    if (v.reruns.empty()) continue;
    for (size_t m = 0; m < v.metrics.size(); ++m) {
      if (!TargetFigure(v.metrics[m])) continue;
      double largest = 0;
      for (const LoadValidation& again : v.reruns) {
        largest = std::max(largest, std::abs(again.run_to_run[m].error_pct));
      }
      ++figures;
      if (std::abs(v.metrics[m].error_pct) <= largest) ++within;
    }
  }
  md += "\nOf TTFT, TPOT and E2E at p50 and p99 over the loads run again, the simulator's "
        "error on the first run is within the engine's largest change between its runs on " +
        std::to_string(within) + " of " + std::to_string(figures) + ".\n";

  MetricColumns means;
  for (const LoadValidation& v : loads) {
    if (v.reruns.empty()) continue;
    means.emplace_back(v.label + " (" + std::to_string(1 + v.reruns.size()) + " runs)",
                       v.AgainstEngineMean());
  }
  md += "\nThe simulated run against the mean of the engine's runs at each load, error %:\n\n" +
        MetricTable(means);
  return md;
}

// validation.md's section on a mixture of experts' routing (empty without counts): per run
// and kind of step, the experts counted against the simulator's expectation, then the
// routing skew each run's decode batches fit.
std::string RoutingMarkdown(const std::vector<const LoadValidation*>& runs) {
  std::string routing;
  // A percentage to one decimal, a rounding's -0.0 as +0.0.
  auto tenth = [](double pct) { return std::abs(pct) < 0.05 ? 0.0 : pct; };
  for (const LoadValidation* run : runs) {
    for (const RoutingRow& row : RoutingRows(run->steps)) {
      char cells[192];
      std::snprintf(cells, sizeof cells, " | %lld | %.2f | %.2f | %+.1f | %.2f | %.2f | %+.1f |\n",
                    static_cast<long long>(row.count), row.engine.run, row.sim.run,
                    tenth(100.0 * Change(row.engine.run, row.sim.run)), row.engine.single_row,
                    row.sim.single_row, tenth(100.0 * Change(row.engine.single_row, row.sim.single_row)));
      routing += "| " + run->label + " | " + row.steps + cells;
    }
  }
  if (routing.empty()) return "";
  std::string md =
      "\nMixture of experts: the experts a MoE layer ran in each step (the mean over its layers) "
      "as the engine counted them, against the simulator's routing model, by kind of step "
      "(decode_B: decode-only steps of B sequences; mixed: steps with a prefill chunk), and of "
      "them those given one row; each the mean over the steps, error % of the simulator's.\n\n"
      "| load | steps | count | experts run | expected | error % | one-row experts | expected | "
      "error % |\n|---|---|---|---|---|---|---|---|---|\n" + routing;
  std::string fits;
  for (const LoadValidation* run : runs) {
    if (const std::optional<RoutingFit> fit = FitRouting(*run)) {
      char cells[240];
      std::snprintf(cells, sizeof cells, " | %lld | %.2f | %.2f | %lld | %.3f, %.1f | %.3f, %.1f |\n",
                    static_cast<long long>(fit->decode_steps), fit->skew_engine, fit->skew_sim,
                    static_cast<long long>(fit->chunk_steps), fit->locality_engine.locality,
                    fit->locality_engine.favourites, fit->locality_sim.locality,
                    fit->locality_sim.favourites);
      fits += "| " + run->label + cells;
    }
  }
  if (fits.empty()) return md;
  return md +
         "\nThe routing that fits the counts, on the engine's and on the simulator's expectations: "
         "the skew (cost_model.routing_skew: a Zipf exponent over the experts, 0 = uniform) of "
         "the decode-only steps of two or more sequences, then, at that skew, the locality and "
         "favourites of the lone prefill chunks (one sequence, more than one token; 0 and 1 "
         "where there are none): cost_model.routing_locality, the chance a chunk's token "
         "routes as one of its sequence's cost_model.routing_favourites shared draws rather "
         "than on its own (0 = independently; 1 over one favourite = the chunk as one token). "
         "The engine's are the ones to route with to route as this run did (--set "
         "cost_model.routing_skew=S --set cost_model.routing_locality=L --set "
         "cost_model.routing_favourites=F).\n\n| load | decode steps | skew, engine | skew, "
         "simulator | lone chunks | locality, favourites: engine | locality, favourites: "
         "simulator |\n|---|---|---|---|---|---|---|\n" + fits;
}

// validation.md's section on the replays (empty without any).
std::string ReplayMarkdown(const std::vector<LoadValidation>& loads) {
  std::string rows;
  for (const LoadValidation& v : loads) {
    if (!v.replay) continue;
    const StepReplay& r = *v.replay;
    rows += "| " + v.label + " | " + std::to_string(r.steps) + " | " + std::to_string(r.replayed) + " | " +
            std::to_string(r.matched) + " | " + Pct(r.LargestErrorPct()) + " | " + r.Account() + " |\n";
  }
  if (rows.empty()) return "";
  return "\nReplay: the simulated run again, each step taking the time the engine measured for "
         "the same step, everything else the simulator's. While the two schedules are one, the "
         "replay's figures are the engine's to the nanosecond and the end-to-end errors above are "
         "wholly the cost model's step times. Steps of the same work starting at other times are "
         "the engine's time between steps (a wall clock's); where the schedules part, the rest "
         "runs on the simulator's own times (it samples no stop tokens; the policies' "
         "predictions are its own).\n\n| load | engine steps | replay steps | "
         "replayed as the engine's | largest end-to-end error % | schedules |\n"
         "|---|---|---|---|---|---|\n" + rows;
}

// validation.csv's rows of end-to-end figures, under `label`.
void MetricRows(std::string& csv, const std::string& label, const std::vector<MetricComparison>& metrics) {
  for (const MetricComparison& m : metrics) {
    csv += label + "," + m.metric + "," + m.statistic + "," + Number(m.engine) + "," +
           Number(m.sim) + "," + Number(m.error_pct) + "\n";
  }
}

}  // namespace

std::string ValidationCsv(const std::vector<LoadValidation>& loads) {
  std::string csv = "load,quantity,statistic,engine,sim,error_pct\n";
  auto rows = [&csv](const LoadValidation& v) {
    struct Kind {
      const char* name;
      Steps steps;
      const ErrorStats* stats;
    };
    const Kind kinds[] = {{"all", Steps::kAll, &v.step_error},
                          {"decode", Steps::kDecodeOnly, &v.decode_step_error},
                          {"mixed", Steps::kMixed, &v.mixed_step_error}};
    for (const auto& [kind, which, stats] : kinds) {
      if (stats->points == 0) continue;
      // engine and sim: these steps' mean measured and predicted times.
      const std::string e = Number(MeanStep(v.steps, which, false));
      const std::string s = Number(MeanStep(v.steps, which, true));
      const std::string q = std::string("step_time_") + kind;
      csv += v.label + "," + q + ",mape," + e + "," + s + "," + Number(stats->mape) + "\n";
      csv += v.label + "," + q + ",bias," + e + "," + s + "," + Number(stats->bias) + "\n";
      csv += v.label + "," + q + ",max," + e + "," + s + "," + Number(stats->max_error) + "\n";
      csv += v.label + "," + q + ",time," + e + "," + s + "," + Number(TimeErrorPct(v.steps, which)) + "\n";
    }
    if (const ErrorWander& w = v.decode_wander; w.windows > 0) {
      const std::string e = Number(MeanStep(v.steps, Steps::kDecodeOnly, false));
      const std::string s = Number(MeanStep(v.steps, Steps::kDecodeOnly, true));
      const std::string at = v.label + ",step_time_decode,";
      csv += at + "autocorrelation," + e + "," + s + "," + Number(w.autocorrelation) + "\n";
      csv += at + "window_min," + e + "," + s + "," + Number(w.window_min_pct) + "\n";
      csv += at + "window_max," + e + "," + s + "," + Number(w.window_max_pct) + "\n";
    }
    if (const std::optional<RoutingFit> fit = FitRouting(v)) {
      if (fit->decode_steps > 0) {
        csv += v.label + ",routing_skew,decode," + Number(fit->skew_engine) + "," + Number(fit->skew_sim) +
               "," + Number(fit->skew_sim - fit->skew_engine) + "\n";
      }
      if (fit->chunk_steps > 0) {
        const RoutingLocality& by_engine = fit->locality_engine;
        const RoutingLocality& by_sim = fit->locality_sim;
        csv += v.label + ",routing_locality,chunk," + Number(by_engine.locality) + "," +
               Number(by_sim.locality) + "," + Number(by_sim.locality - by_engine.locality) + "\n";
        csv += v.label + ",routing_favourites,chunk," + Number(by_engine.favourites) + "," +
               Number(by_sim.favourites) + "," + Number(by_sim.favourites - by_engine.favourites) +
               "\n";
      }
    }
    for (const RoutingRow& row : RoutingRows(v.steps)) {
      csv += v.label + ",routing_experts," + row.steps + "," + Number(row.engine.run) + "," +
             Number(row.sim.run) + "," + Number(100.0 * Change(row.engine.run, row.sim.run)) + "\n";
      csv += v.label + ",routing_single_row," + row.steps + "," + Number(row.engine.single_row) + "," +
             Number(row.sim.single_row) + "," + Number(100.0 * Change(row.engine.single_row, row.sim.single_row)) +
             "\n";
    }
    for (const bool after : {false, true}) {
      for (const ReferenceStep& r : v.host.steps) {
        const double measured = after ? r.after_s : r.before_s;
        csv += v.label + ",reference_step," + (after ? "after:" : "before:") + r.Label() + "," +
               Number(measured) + "," + Number(r.predicted_s) + "," +
               Number(100.0 * Change(measured, r.predicted_s)) + "\n";
      }
    }
    MetricRows(csv, v.label, v.metrics);
  };
  for (const LoadValidation& v : loads) {
    rows(v);
    if (v.replay) {
      const StepReplay& r = *v.replay;
      const std::string at = v.label + "/replay,schedule,";
      const std::string steps = std::to_string(r.steps);
      auto pct = [&r](int64_t n) {
        return r.steps > 0 ? 100.0 * static_cast<double>(n - r.steps) / static_cast<double>(r.steps) : 0.0;
      };
      csv += at + "steps," + steps + "," + std::to_string(r.replayed) + "," + Number(pct(r.replayed)) + "\n";
      csv += at + "matched," + steps + "," + std::to_string(r.matched) + "," + Number(pct(r.matched)) + "\n";
      csv += at + "shifted," + std::to_string(r.matched) + "," + std::to_string(r.shifted) + "," +
             Number(r.matched > 0 ? 100.0 * static_cast<double>(r.shifted) / static_cast<double>(r.matched) : 0.0) +
             "\n";
      MetricRows(csv, v.label + "/replay", r.metrics);
    }
    for (const LoadValidation& again : v.reruns) rows(again);
    // The simulated run against the mean of the engine's runs.
    if (!v.reruns.empty()) MetricRows(csv, v.label + "/mean", v.AgainstEngineMean());
  }
  return csv;
}

std::string ValidationMarkdown(const std::string& experiment,
                               const std::vector<LoadValidation>& loads) {
  const std::vector<const LoadValidation*> runs = EveryRun(loads);
  std::string md = "# Validation: " + experiment + "\n\n";
  if (!loads.empty()) md += "Simulator: " + loads.front().sim_cost_model + "\n\n";
  md += "Errors are (simulated - measured) / measured. Step time: the simulator's cost of "
        "each step plan the engine executed.\n\n";
  md += "Time error: of the steps' summed time, what the end-to-end figures move with (a step "
        "weighs by its length, where in the MAPE each weighs the same).\n\n";
  md += "| load | engine busy | steps | step MAPE % | step bias % | worst step % | time error % "
        "| decode MAPE % | mixed MAPE % |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const LoadValidation* run : runs) {
    const LoadValidation& v = *run;
    char row[256];  // the numbers; the label (up to a folder name's length) goes before
    std::snprintf(row, sizeof row, " | %.0f%% | %lld | %.2f | %+.2f | %.1f | %+.2f | %.2f | %.2f |\n",
                  100.0 * v.engine.gpu_busy_fraction,
                  static_cast<long long>(v.step_error.points), v.step_error.mape,
                  v.step_error.bias, v.step_error.max_error, TimeErrorPct(v.steps, Steps::kAll),
                  v.decode_step_error.mape, v.mixed_step_error.mape);
    md += "| " + v.label + row;
  }
  bool wander = false;
  for (const LoadValidation* v : runs) wander = wander || v->decode_wander.windows > 0;
  if (wander) {
    md += "\nDecode-only steps' errors in step order: the lag-one autocorrelation of "
          "consecutive ones, and the lowest and highest mean error over stretches of " +
          std::to_string(loads.front().decode_wander.window) +
          " (at a steady load each stretch mixes the same configurations: a model's error "
          "stays put from one to the next, a host changing speed during the run parts "
          "them).\n\n| load | decode steps | "
          "autocorrelation | stretches | lowest % | highest % |\n|---|---|---|---|---|---|\n";
    for (const LoadValidation* run : runs) {
      const LoadValidation& v = *run;
      const ErrorWander& w = v.decode_wander;
      if (w.windows == 0) continue;
      char row[256];
      std::snprintf(row, sizeof row, " | %lld | %.2f | %d | %+.1f | %+.1f |\n",
                    static_cast<long long>(v.decode_step_error.points), w.autocorrelation,
                    w.windows, w.window_min_pct, w.window_max_pct);
      md += "| " + v.label + row;
    }
  }
  md += RoutingMarkdown(runs);
  bool checked = false;
  for (const LoadValidation* v : runs) checked = checked || !v->host.steps.empty();
  if (checked) {
    md += "\nHost check: the engine's reference steps (decode-B@C: B sequences at context C; "
          "prefill-T@C: a chunk of T tokens after C), timed as the profile times its rows "
          "right before and after the load's run; drift is their medians' mean relative "
          "change across the run (max: the largest one step's), error the simulator's mean "
          "relative error on them.\n\n| load | reference steps | attempts | before ms | "
          "after ms | drift % | max drift % | error before % | error after % |\n"
          "|---|---|---|---|---|---|---|---|---|\n";
    for (const LoadValidation* run : runs) {
      const LoadValidation& v = *run;
      if (v.host.steps.empty()) continue;
      std::string labels;
      for (const ReferenceStep& r : v.host.steps) {
        if (!labels.empty()) labels += ' ';
        labels += r.Label();
      }
      char row[256];
      std::snprintf(row, sizeof row, " | %d | %.3f | %.3f | %+.2f | %.2f | %+.2f | %+.2f |\n",
                    v.host.attempts, 1e3 * v.host.Before(),
                    1e3 * v.host.After(), v.host.DriftPct(), v.host.MaxDriftPct(),
                    v.host.ErrorPct(false), v.host.ErrorPct(true));
      md += "| " + v.label + " | " + labels + row;
    }
  }
  MetricColumns errors;
  for (const LoadValidation* v : runs) errors.emplace_back(v->label, v->metrics);
  md += "\nEnd to end, error % of the simulated run:\n\n" + MetricTable(errors);
  md += ReplayMarkdown(loads);
  md += RunToRunMarkdown(loads);
  return md;
}

}  // namespace servelab
