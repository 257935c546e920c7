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

#include "core/text.h"
#include "core/uniform_step.h"
#include "driver/experiment.h"
#include "driver/result_folder.h"
#include "sim/sim_backend.h"
#include "sim/validation_backends.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;
using validation_internal::EngineStep;
using validation_internal::EngineSteps;
using validation_internal::RecordingBackend;
using validation_internal::ReplayBackend;
using validation_internal::ReplayState;

// Whether `step` is one of `kind` with a measured time to compare against.
bool Compared(const StepComparison& step, StepKind kind) {
  if (kind == StepKind::kDecodeOnly && !step.decode_only) return false;
  if (kind == StepKind::kMixed && step.decode_only) return false;
  return step.measured_s > 0;
}

// Each compared step's (predicted - measured) / measured, in step order.
std::vector<double> RelativeErrors(const std::vector<StepComparison>& steps, StepKind kind) {
  std::vector<double> rel;
  for (const StepComparison& step : steps) {
    if (Compared(step, kind)) rel.push_back((step.predicted_s - step.measured_s) / step.measured_s);
  }
  return rel;
}

double SumOf(const std::vector<ReferenceStep>& steps, double ReferenceStep::*seconds) {
  double sum = 0;
  for (const ReferenceStep& r : steps) sum += r.*seconds;
  return sum;
}

}  // namespace

double RelativeChange(double from, double to) { return from > 0 ? (to - from) / from : 0.0; }

GraphAgreement GraphAgreementOf(std::span<const StepComparison> steps) {
  GraphAgreement a;
  const auto said = [](const std::optional<DecodeGraphRun>& g) {
    return g ? "a graph of " + std::to_string(g->rows) + " rows for context " + std::to_string(g->context_bucket)
             : std::string("op by op");
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepComparison& step = steps[i];
    if (!step.graphs_reported) {
      if (step.graph_predicted) ++a.unreported;
      continue;
    }
    if (step.padding > 0) {
      ++a.padded;
      continue;
    }
    const std::optional<DecodeGraphRun>& engine = step.graph_measured;
    const std::optional<DecodeGraphRun>& sim = step.graph_predicted;
    if (sim) ++a.priced_graphs;
    if (engine) {
      ++a.engine_graphs;
      if (!sim) ++a.priced_eager;
      else if (*sim == *engine) ++a.same;
      else ++a.other_graph;
    } else if (sim) {
      ++a.sim_only;
    }
    if (a.first_difference.empty() && engine != sim) {
      a.first_difference = "step " + std::to_string(i + 1) + " (" + std::to_string(step.seqs) + " sequences): the engine ran " +
                           said(engine) + ", the simulator priced " + said(sim);
    }
  }
  return a;
}

StepRange StepRangeOf(const StepComparison& step) {
  if (!step.decode_only) return StepRange{0, "mixed"};
  int64_t top = 1;  // 64 bits: doubling past 2^30 sequences stays defined
  while (top < step.seqs) top *= 2;
  const int64_t bottom = top / 2 + 1;
  return StepRange{top, "decode_" + (bottom >= top ? std::to_string(top)
                                                   : std::to_string(bottom) + "-" + std::to_string(top))};
}

std::vector<StepRangeError> StepErrorsByRange(std::span<const StepComparison> steps) {
  struct Range {
    std::string name;
    std::vector<double> errors;
    double measured_s = 0, predicted_s = 0;
  };
  std::map<int64_t, Range> by_top;  // decode ranges by their top; the mixed steps at 0
  for (const StepComparison& step : steps) {
    if (!(step.measured_s > 0)) continue;
    const StepRange range = StepRangeOf(step);
    Range& r = by_top[range.top];
    r.name = range.name;
    r.errors.push_back((step.predicted_s - step.measured_s) / step.measured_s);
    r.measured_s += step.measured_s;
    r.predicted_s += step.predicted_s;
  }
  std::vector<StepRangeError> out;
  auto add = [&out](int64_t top, const Range& r) {
    const double n = static_cast<double>(r.errors.size());
    out.push_back(StepRangeError{top, r.name, ErrorStats::Of(r.errors), r.measured_s / n, r.predicted_s / n});
  };
  for (const auto& [top, r] : by_top) {
    if (top > 0) add(top, r);
  }
  if (auto mixed = by_top.find(0); mixed != by_top.end()) add(0, mixed->second);
  return out;
}

std::vector<StepRangeError> DecodeErrorsAfterPrefill(std::span<const StepComparison> steps) {
  struct Bucket {
    int32_t last;  // 0: no end
    const char* name;
  };
  static constexpr Bucket kBuckets[] = {{1, "k=1"}, {2, "k=2"}, {3, "k=3"}, {7, "k=4-7"}, {15, "k=8-15"},
                                        {0, "k=16+"}};
  std::vector<StepRangeError> out;
  int32_t first = 1;
  for (const Bucket& b : kBuckets) {
    std::vector<double> errors;
    double measured = 0, predicted = 0;
    for (const StepComparison& step : steps) {
      if (!step.decode_only || !(step.measured_s > 0) || step.after_prefill < first) continue;
      if (b.last > 0 && step.after_prefill > b.last) continue;
      errors.push_back((step.predicted_s - step.measured_s) / step.measured_s);
      measured += step.measured_s;
      predicted += step.predicted_s;
    }
    first = b.last + 1;
    if (errors.empty()) continue;
    const double n = static_cast<double>(errors.size());
    out.push_back(StepRangeError{b.last, b.name, ErrorStats::Of(errors), measured / n, predicted / n});
  }
  return out;
}

double LoadValidation::MeanStepS(StepKind kind, bool predicted) const {
  double sum = 0;
  int64_t n = 0;
  for (const StepComparison& step : steps) {
    if (!Compared(step, kind)) continue;
    sum += predicted ? step.predicted_s : step.measured_s;
    ++n;
  }
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

double LoadValidation::TimeErrorPct(StepKind kind) const {
  const double measured = MeanStepS(kind, false);
  return measured > 0 ? 100.0 * (MeanStepS(kind, true) - measured) / measured : 0.0;
}

ErrorWander LoadValidation::DecodeWander(int32_t window) const {
  return ErrorWander::Of(RelativeErrors(steps, StepKind::kDecodeOnly), window);
}

double HostCheck::Before() const { return SumOf(steps, &ReferenceStep::before_s); }
double HostCheck::After() const { return SumOf(steps, &ReferenceStep::after_s); }
double HostCheck::Predicted() const { return SumOf(steps, &ReferenceStep::predicted_s); }

std::string ReferenceStep::Label() const {
  return std::string(decode ? "decode-" : "prefill-") + std::to_string(tokens) + "@" +
         std::to_string(context);
}

double HostCheck::DriftPct() const {
  double sum = 0;
  for (const ReferenceStep& r : steps) sum += RelativeChange(r.before_s, r.after_s);
  return steps.empty() ? 0.0 : sum / static_cast<double>(steps.size()) * 100.0;
}

double HostCheck::MaxDriftPct() const {
  double largest = 0;
  for (const ReferenceStep& r : steps) {
    largest = std::max(largest, std::abs(RelativeChange(r.before_s, r.after_s)));
  }
  return largest * 100.0;
}

double HostCheck::ErrorPct(bool after) const {
  double sum = 0;
  for (const ReferenceStep& r : steps) sum += RelativeChange(after ? r.after_s : r.before_s, r.predicted_s);
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

  const std::vector<double> decode_errors = RelativeErrors(v.steps, StepKind::kDecodeOnly);
  v.step_error = ErrorStats::Of(RelativeErrors(v.steps, StepKind::kAll));
  v.decode_step_error = ErrorStats::Of(decode_errors);
  v.mixed_step_error = ErrorStats::Of(RelativeErrors(v.steps, StepKind::kMixed));
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


}  // namespace servelab
