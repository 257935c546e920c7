// `servelab validate`: the same requests on the engine and on the simulator, at every
// load of the experiment's sweep, and the simulator's errors (sim/validation.h).
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/plot_script.h"
#include "cli/run_experiment.h"
#include "cli/validate_report.h"
#include "core/text.h"
#include "driver/config_yaml.h"
#include "driver/output_dir.h"
#include "driver/sweep_config.h"
#include "engine/engine_setup.h"
#include "engine/profiler.h"
#include "sim/recorded_engine.h"
#include "sim/validation.h"
#include "sim/validation_report.h"

namespace servelab {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

// Whether loads that differ in the swept `key` can share one engine (its model and its
// runner): the key varies the requests (workload, seed), the order the scheduler serves
// them in (scheduler.policy), what the sampler draws (engine.sampling, engine.ignore_eos:
// the backend's own options, set per load) or only the simulator's side (cost_model).
// Every other key may change the model or the runner (its KV pool, swap space, the batch
// limits its buffers and CUDA graphs are sized by), and then each load has its own.
bool KeepsTheEngine(const std::string& key) {
  for (const char* section : {"workload", "seed", "scheduler.policy", "engine.sampling",
                              "engine.ignore_eos", "cost_model"}) {
    if (key == section || key.starts_with(std::string(section) + ".")) return true;
  }
  return false;
}

int Report(const Status& status) { return ReportFailure("validate", status); }

// The engine's reference steps (HostCheckPoints, or `points`: the same steps again), timed
// as `servelab profile` times its rows (in passes, each configuration warmed up first), on
// `model`, the load's (on the CPU engine, the weights its runs stream). Errors keep their
// kind (a KV pool too small for the context: bad input).
StatusOr<std::vector<TimedStep>> TimeReferenceSteps(const ExperimentConfig& config,
                                                    std::shared_ptr<EngineModel> model,
                                                    const std::vector<ProfilePoint>& points,
                                                    double settle_ms) {
  ProfileOptions options;
  options.settle_ms = settle_ms;
  options.host_check = points.empty();
  options.points = points;
  options.repeats = 9;
  auto steps = TimeSteps(config, options, std::move(model));
  if (!steps.ok()) return Status(steps.status().code(), "host check: " + steps.status().message());
  return steps;
}

constexpr int32_t kMaxEngineRuns = 10;  // --engine-runs' largest

}  // namespace

constexpr const char* kValidateHelp = R"(
Runs the experiment (backend: engine; for validation keep engine.clock: virtual) on the
engine, and the same requests on the simulator with the engine's KV pool and context,
at every point of the file's `sweep:` block (the loads: BLIS validates at three or more,
up to about 90% of capacity), or once when it has none. --cost-model replaces the
experiment's cost_model with {type: calibrated, path: MODEL.yaml}, before any --set:
--set cost_model.routing_skew=0 then changes that model's routing.

Writes DIR/<load>/engine/, DIR/<load>/sim/ and DIR/<load>/replay/ (the files of
`servelab run`; the replay is the simulated run again with each step taking the time
the engine measured for it, below),
DIR/<load>/steps_compared.csv (each step the engine executed, in order: its new tokens,
sequences and the tokens already in their KV cache before it; measured and predicted; and
a mixture of experts' experts run, counted and expected),
DIR/validation.csv (load,quantity,statistic,engine,sim,error_pct: the step-time MAPE,
bias, worst error and error of the summed time over all, decode-only and mixed steps,
MAPE and bias by range of decode batch (step_time_decode_1, _2, _3-4, ...), the
decode-only steps'
errors' lag-one autocorrelation and lowest and highest mean over stretches of 100 in
step order, then TTFT, TPOT, ITL and E2E at mean, p50, p90, p99 and the throughputs),
DIR/validation.md, and
DIR/validation_cdf.png (measured and predicted latency CDFs per load, each of the
engine's runs drawn).

Host check: right before and after each load's run, three reference steps (a prefill
chunk of up to 128 tokens, a decode of max_num_seqs sequences, halved until the KV pool
holds it, and a decode of one sequence) are timed as `servelab profile` times its rows,
on the very runner the load's engine runs on (--no-host-check skips them). When the
sweep varies only the requests (workload keys, the seed), the policy
(scheduler.policy), the sampling (engine.sampling, engine.ignore_eos) or the cost model,
one engine serves every load, as one server serves every rate: the model is read once
and its runner kept from run to run; the last line on stderr says how many runners were
made. Their change
across the run is the host's drift: a shared or throttled host that changes speed during
a run shows up there, not only as the model's error; the simulator's error on them says
how far the host then was from the one the model was fitted on. validation.md has a
table of them per load, validation.csv a reference_step row per step, before and after
(statistic before:<step> or after:<step>, engine its median, sim its predicted time).
With --retries N, a load one of whose reference steps changed by more than --max-drift
percent across its run runs again, up to N times (the last run is kept; validation.md
and validation.csv, row attempts, say how many runs each load took). A note on stderr says when, before the kept run, the
simulator was already off the reference steps by more than --max-drift: the host (or,
on a shape the fit never saw, the model) differs from the one profiled.

What the host check cannot see, the host changing speed during the run and back, the
run shows itself: at a steady load each stretch of --wander-window decode-only steps
mixes the same configurations, so the model's mean error is much the same from one to
the next, and a host that slowed for a while parts them. With --max-wander P, a load
whose stretches' mean errors span more than P percentage points (two stretches at
least) also runs again under --retries (with or without the host check); the stretches
of the kept run are in validation.md and validation.csv (step_time_decode, window_min and
window_max).

The replay: while its schedule is the engine's, step for step (the same requests,
tokens and start), its figures are the engine's to the nanosecond, and the simulated
run's end-to-end error is wholly its cost model's step times; where the two part (the
engine stopped a request on a stop token, which the simulator does not sample; a
`clock: wall` run's time between steps; a policy's predictions), validation.md names
the step and the rest runs on the simulator's own times. validation.csv: rows under
<load>/replay (schedule steps and matched, then the end-to-end figures).

With --engine-runs N, the engine runs the load N times, one right after another (the
host check brackets the first only): the first is validated as above; each further one,
DIR/<load>/run-K/ (its engine/ and steps_compared.csv), is compared with the same
simulated run and gets rows of its own (load <load>/run-K), and validation.md a table of
how far its figures moved from the first run's: the engine's run-to-run change, the floor
under any simulator's end-to-end error on this host, and on how many of TTFT, TPOT and E2E
at p50 and p99 the simulator's error is within it; rows <load>/mean and a table hold the
simulated run against the mean of the engine's runs, and the CDF plot draws each run.
An earlier validation's run-K/ folders are removed once a load's first run is in place.

With --recorded REC (an earlier validation's folder), no engine runs: each load's engine
is the recording in REC/<load> (its steps_compared.csv, and engine/summary.json or
engine_summary.json for its KV pool and context) played back, the simulator making the
engine's plans again on the recorded step times, each checked against the recorded step
(sim/recorded_engine.h): a cost model validated again, on another machine and without
the device, against the very steps the engine measured. The engine must have run on
`clock: virtual`, the experiment and its --set be the recording's, and --out another
folder; no host check, one engine run a load.

Exit status: 0 success, 2 bad input, 1 a runtime failure (the folders of loads that
finished before either stay written).
)";

int ValidateCommand(const std::vector<std::string>& args) {
  po::options_description options("servelab validate EXPERIMENT.yaml [options]");
  std::vector<std::string> sets;
  std::string out_dir, cost_model, recorded;
  int32_t retries = 0, engine_runs = 1;
  double max_drift = 5.0, max_wander = -1;  // -1: no limit
  int32_t wander_window = ErrorWander().window;
  double settle_ms = 0;
  options.add_options()
      ("help,h", "show this help")
      ("set", po::value<std::vector<std::string>>(&sets)->composing(),
       "override a key at every load: --set workload.num_requests=64 (repeatable)")
      ("cost-model", po::value<std::string>(&cost_model),
       "MODEL.yaml from `servelab calibrate` for the simulator")
      ("out", po::value<std::string>(&out_dir),
       "validation folder (default results/<name>-validation)")
      ("recorded", po::value<std::string>(&recorded),
       "play back the engine runs an earlier validation recorded in this folder instead of "
       "running the engine (no device needed)")
      ("no-host-check", "skip timing the reference steps before and after each load")
      ("retries", po::value<int32_t>(&retries)->default_value(0),
       "re-run a load whose reference steps drifted more than --max-drift, up to N times (0-10)")
      ("engine-runs", po::value<int32_t>(&engine_runs)->default_value(1),
       "run the engine N times at each load (1-10): the first is validated; the others, "
       "right after, say how far the engine moves from run to run")
      ("max-drift", po::value<double>(&max_drift)->default_value(5.0),
       "percent the reference steps may drift across a run before --retries re-runs it (0-100)")
      ("max-wander", po::value<double>(&max_wander),
       "percentage points the decode-only steps' mean errors over stretches may span before "
       "--retries re-runs the load (0-100; default no limit)")
      ("wander-window", po::value<int32_t>(&wander_window)->default_value(wander_window),
       "decode-only steps a stretch, for validation.md's wander table and --max-wander (2-100000)")
      ("settle-ms", po::value<double>(&settle_ms)->default_value(ProfileOptions().settle_ms),
       "the host check's settling before each timed run, as `servelab profile --settle-ms` "
       "(0-60000; use the profile's)")
      ("no-plots", "skip the CDF plot")
      ("no-progress", "never draw the progress line");
  std::string experiment_path;
  po::variables_map vm;
  if (auto exit = ParseExperimentCommandLine("validate", args, options, kValidateHelp, vm,
                                             experiment_path)) {
    return *exit;
  }
  if (retries < 0 || retries > 10) {
    return Report(InvalidArgument("--retries " + std::to_string(retries) + ": must be in [0, 10]"));
  }
  if (engine_runs < 1 || engine_runs > kMaxEngineRuns) {
    return Report(InvalidArgument("--engine-runs " + std::to_string(engine_runs) + ": must be in [1, " +
                                  std::to_string(kMaxEngineRuns) + "]"));
  }
  if (!(max_drift >= 0 && max_drift <= 100)) {
    return Report(InvalidArgument("--max-drift: must be in [0, 100] (percent)"));
  }
  const bool wander_limit = vm.count("max-wander") > 0;
  if (wander_limit && !(max_wander >= 0 && max_wander <= 100)) {
    return Report(InvalidArgument("--max-wander: must be in [0, 100] (percentage points)"));
  }
  if (wander_window < 2 || wander_window > 100000) {
    return Report(InvalidArgument("--wander-window " + std::to_string(wander_window) +
                                  ": must be in [2, 100000] (decode-only steps)"));
  }
  ProfileOptions settling;  // the host check's: its range, as the profile's flag
  settling.settle_ms = settle_ms;
  if (Status checked = CheckProfileOptions(settling); !checked.ok()) return Report(checked);
  if (!recorded.empty()) {
    std::error_code ec;
    if (!fs::is_directory(recorded, ec)) {
      return Report(InvalidArgument("--recorded " + recorded + ": not a folder (a validation's --out)"));
    }
    if (engine_runs > 1 || retries > 0) {
      return Report(InvalidArgument("--recorded plays back one engine run a load: it cannot go with "
                                    "--engine-runs or --retries, which run the engine again"));
    }
  }
  const bool host_check = !vm.count("no-host-check") && recorded.empty();
  if (!host_check && !wander_limit && retries > 0) {
    return Report(InvalidArgument("--retries re-runs a load the host check found drifting, or "
                                  "whose errors wandered past --max-wander; without either it "
                                  "cannot go with --no-host-check"));
  }
  if (!cost_model.empty()) {
    std::error_code ec;
    const fs::path absolute = fs::absolute(cost_model, ec);
    if (ec || !fs::is_regular_file(absolute, ec)) {
      return Report(InvalidArgument("--cost-model " + cost_model + ": not a readable file"));
    }
    // First, so that --set cost_model.KEY=... (a routing skew, a step overhead) applies to
    // this model rather than to the one it replaces.
    sets.insert(sets.begin(), "cost_model={type: calibrated, path: " + YamlQuoted(absolute.string()) + "}");
  }

  LoadNotes notes;
  auto base = LoadExperiment(experiment_path, sets, &notes);
  if (!base.ok()) return Report(base.status());
  std::vector<std::pair<std::string, ExperimentConfig>> loads;
  // Loads that differ only in what KeepsTheEngine allows (BLIS's sweep of the arrival
  // rate, a comparison of policies) are served by one engine, as one server serves every
  // rate: its model read once and its runner kept from run to run
  // (EngineModel::MakeRunner). Any other swept key may change the engine, and each load
  // then has its own.
  bool one_engine = false;
  if (notes.sweep_line > 0) {
    auto sweep = LoadSweep(experiment_path, sets);
    if (!sweep.ok()) return Report(sweep.status());
    for (SweepPoint& p : sweep->points) loads.emplace_back(p.folder, std::move(p.config));
    one_engine = std::all_of(sweep->axes.begin(), sweep->axes.end(),
                             [](const SweepAxis& axis) { return KeepsTheEngine(axis.key); });
  } else {
    loads.emplace_back(base->name, *base);
  }
  for (const auto& [label, config] : loads) {
    if (config.backend != BackendKind::kEngine) {
      return Report(InvalidArgument(experiment_path + ": backend: validate compares the engine "
                                    "with the simulator; set backend: engine"));
    }
    // A recording is played back, not run: its engine need not be one this build can run
    // (the H200's recording, played back where servelab was built without CUDA); each
    // load's playback is checked below, once its recording is read.
    if (!recorded.empty()) {
      if (auto prepared = PrepareExperiment(config); !prepared.ok()) {
        return Report(Status(prepared.status().code(), label + ": " + prepared.status().message()));
      }
      continue;
    }
    if (Status checked = CheckExperiment(config); !checked.ok()) {
      return Report(Status(checked.code(), label + ": " + checked.message()));
    }
  }
  if (loads.size() < 3) {
    std::fprintf(stderr, "servelab validate: note: %zu load%s; BLIS's method validates at three "
                 "or more (a sweep: block over workload.arrival.rate)\n", loads.size(),
                 loads.size() == 1 ? "" : "s");
  }
  const std::string dir = out_dir.empty() ? "results/" + base->name + "-validation" : out_dir;
  // Every load's recording, read (and checked) before anything runs or is written.
  std::map<std::string, std::shared_ptr<const EngineRecording>> recordings;
  if (!recorded.empty()) {
    std::error_code ec;
    const fs::path from = fs::weakly_canonical(recorded, ec);
    if (ec) return Report(InvalidArgument("--recorded " + recorded + ": " + ec.message()));
    const fs::path to = fs::weakly_canonical(dir, ec);
    if (ec) return Report(InvalidArgument("--out " + dir + ": " + ec.message()));
    const auto [end, at] = std::mismatch(from.begin(), from.end(), to.begin(), to.end());
    if (end == from.end() || at == to.end()) {
      return Report(InvalidArgument("--out " + dir + ": the recording's folder, or one within or around "
                                    "it (--recorded " + recorded + "): write the new validation elsewhere"));
    }
    for (const auto& [label, config] : loads) {
      auto recording = ReadEngineRecording((fs::path(recorded) / label).string());
      if (!recording.ok()) return Report(Status(recording.status().code(), label + ": " + recording.status().message()));
      recordings[label] = std::make_shared<const EngineRecording>(std::move(recording).value());
      // The playback as it will run (on the recording's KV pool and context), checked
      // before anything is written.
      auto playback = MakeRecordedEngineFactory(config, recordings[label]);
      if (!playback.ok()) return Report(Status(playback.status().code(), label + ": " + playback.status().message()));
    }
  }
  const bool progress = !vm.count("no-progress") && ::isatty(STDERR_FILENO);

  std::vector<LoadValidation> results;
  // The first engine run's KV pool, for every later run of every load: a CUDA engine sizes
  // its pool by what the device has free when it starts (memory_utilization), which moves
  // by a few blocks from one runner to the next in one process; pinned, every run and its
  // simulated twin serve with the same pool. A pool the YAML sets stays as set.
  int64_t pinned_blocks = 0;
  std::shared_ptr<EngineModel> model;  // the load's: read for it, or the one engine's
  const int64_t runners_before = EngineModel::RunnersMadeInProcess();
  if (one_engine && recorded.empty() && loads.size() > 1) {
    std::fprintf(stderr, "servelab validate: the loads differ only in their requests, policy, sampling "
                 "or cost model: one engine "
                 "serves them all (its model read once, its runner kept)\n");
  }
  for (auto& load : loads) {
    // Plain references, not a structured binding: the lambdas below capture them.
    const std::string& label = load.first;
    ExperimentConfig& config = load.second;
    if (config.hardware.num_gpu_blocks == 0) config.hardware.num_gpu_blocks = pinned_blocks;
    // The load's model, read once for its engine runs and its host check (or once for
    // every load, one_engine): its runner serves both, so they run the same weights (two
    // copies of one model's weights in one process can run at different speeds:
    // experiments/validation/README.md, What limits).
    if (recorded.empty() && (model == nullptr || !one_engine)) {
      // The last load's weights and idle runner gone before the next are read (its
      // engine factory, the other holder, went with the last iteration).
      model.reset();
      auto loaded = EngineModel::Load(config);
      if (!loaded.ok()) return Report(Status(loaded.status().code(), label + ": " + loaded.status().message()));
      model = std::move(loaded).value();
    }
    const auto make_engine = [&]() -> StatusOr<BackendFactory> {
      if (recorded.empty()) return MakeEngineBackendFactory(config, model);
      auto factory = MakeRecordedEngineFactory(config, recordings.at(label));
      if (!factory.ok()) return Status(factory.status().code(), label + ": " + factory.status().message());
      return factory;
    };
    auto engine = make_engine();
    if (!engine.ok()) return Report(engine.status());
    const std::string load_dir = (fs::path(dir) / label).string();
    StatusOr<LoadValidation> v = Internal("validate: no run");
    for (int32_t attempt = 1; attempt <= retries + 1; ++attempt) {
      StatusOr<std::vector<TimedStep>> before = std::vector<TimedStep>{};
      if (host_check) before = TimeReferenceSteps(config, model, {}, settle_ms);
      if (!before.ok()) return Report(Status(before.status().code(), label + ": " + before.status().message()));
      // When each engine run starts, for matching a run to what the device logged then
      // (experiments/gpu/check.sh stamps these lines with the time).
      if (recorded.empty()) std::fprintf(stderr, "servelab validate: %s: engine run 1 (attempt %d)\n", label.c_str(), attempt);
      v = ValidateLoad(config, *engine, load_dir, progress);
      if (!v.ok()) return Report(Status(v.status().code(), label + ": " + v.status().message()));
      v->attempts = attempt;
      v->decode_wander = v->DecodeWander(wander_window);
      const char* next = attempt <= retries ? "; running it again" : "; keeping it (no retries left)";
      const ErrorWander& w = v->decode_wander;
      const bool wandered = wander_limit && w.Wandered(max_wander);
      if (wandered) {
        std::fprintf(stderr, "servelab validate: %s: the decode steps' error wandered during the run: "
                     "its means over %d stretches of %d steps span %+.1f%% to %+.1f%% (%.1f points, "
                     "more than --max-wander %.1f)%s\n", Printable(label).c_str(), w.windows, w.window,
                     w.window_min_pct, w.window_max_pct, w.SpreadPct(), max_wander, next);
      }
      if (!host_check) {
        if (wandered) continue;
        break;
      }
      std::vector<ProfilePoint> points;
      for (const TimedStep& t : *before) points.push_back(t.point);
      auto after = TimeReferenceSteps(config, model, points, settle_ms);  // the very steps timed before
      if (!after.ok()) return Report(Status(after.status().code(), label + ": " + after.status().message()));
      HostCheck& host = v->host;
      for (size_t i = 0; i < points.size(); ++i) {
        ReferenceStep r;
        r.decode = points[i].decode;
        r.tokens = points[i].tokens;
        r.context = points[i].context;
        r.before_s = (*before)[i].median_s;
        r.after_s = (*after)[i].median_s;
        host.steps.push_back(r);
      }
      if (Status predicted = PredictReferenceSteps(v->sim_config, host.steps); !predicted.ok()) {
        return Report(Status(predicted.code(), label + ": " + predicted.message()));
      }
      if (!host.Drifted(max_drift)) {
        if (wandered) continue;
        break;
      }
      std::fprintf(stderr, "servelab validate: %s: the host drifted during the run: a reference "
                   "step by %.2f%%, on average %+.2f%% (their sum %.3f -> %.3f ms)%s\n",
                   Printable(label).c_str(), host.MaxDriftPct(), host.DriftPct(), 1e3 * host.Before(),
                   1e3 * host.After(), next);
    }
    // Off the reference steps before the run already: the host is not the one the model
    // was fitted on (or, on a shape the fit never saw, the model misses there too).
    if (const HostCheck& host = v->host; !host.steps.empty() && std::abs(host.ErrorPct(false)) > max_drift) {
      std::fprintf(stderr, "servelab validate: note: %s: before the run the simulator was %+.2f%% off the "
                   "engine's reference steps (more than --max-drift %.2f%%): the host differs from the one "
                   "profiled, or the model from this shape; the step errors carry that\n",
                   Printable(label).c_str(), host.ErrorPct(false), max_drift);
    }
    v->label = label;
    if (!recorded.empty()) v->recorded_from = (fs::path(recorded) / label).string();
    if (config.hardware.num_gpu_blocks == 0) {  // the first load's first run: pin its pool
      pinned_blocks = v->sim_config.hardware.num_gpu_blocks;
      config.hardware.num_gpu_blocks = pinned_blocks;
      if (model != nullptr) model = model->WithKvBlocks(pinned_blocks);
      engine = make_engine();  // for this load's further runs
      if (!engine.ok()) return Report(engine.status());
    }
    if (Status written = WriteStepsCompared(load_dir, *v); !written.ok()) return Report(written);
    PrintLoad(*v);
    // An earlier validation's further runs went with the engine/ this run has replaced:
    // gone before any of this one's is written, so the folder never mixes the two.
    for (int32_t run = 2; run <= kMaxEngineRuns; ++run) {
      std::error_code ec;
      fs::remove_all(fs::path(load_dir) / RerunFolder(run), ec);
      if (ec) {
        return Report(Internal(label + ": cannot remove an earlier validation's " +
                               (fs::path(load_dir) / RerunFolder(run)).string() + ": " + ec.message()));
      }
    }
    // The engine again on the same requests, into DIR/<load>/run-K.
    for (int32_t run = 2; run <= engine_runs; ++run) {
      const std::string run_dir = (fs::path(load_dir) / RerunFolder(run)).string();
      if (recorded.empty()) std::fprintf(stderr, "servelab validate: %s: engine run %d\n", label.c_str(), run);
      auto again = ValidateLoadAgain(config, *engine, run_dir, *v, run, progress);
      if (!again.ok()) {
        return Report(Status(again.status().code(),
                             label + "/" + RerunFolder(run) + ": " + again.status().message()));
      }
      again->decode_wander = again->DecodeWander(wander_window);
      if (Status written = WriteStepsCompared(run_dir, *again); !written.ok()) return Report(written);
      PrintLoad(*again);
      v->reruns.push_back(std::move(again).value());
    }
    results.push_back(std::move(v).value());
  }
  if (recorded.empty()) {
    // Every engine run and host check of a load is served by one runner (of every load,
    // one_engine); more says a run made its own.
    const int64_t runners_made = EngineModel::RunnersMadeInProcess() - runners_before;
    std::fprintf(stderr, "servelab validate: %lld engine runner%s made for %zu load%s\n",
                 static_cast<long long>(runners_made), runners_made == 1 ? "" : "s", loads.size(),
                 loads.size() == 1 ? "" : "s");
  }

  auto folder = OutputDir::Open(dir);
  if (!folder.ok()) return Report(folder.status());
  const std::string md = ValidationMarkdown(base->name, results);
  Status written = (*folder)->WriteFile("validation.csv", ValidationCsv(results));
  if (written.ok()) written = (*folder)->WriteFile("validation.md", md);
  if (written.ok()) written = (*folder)->Commit();
  if (!written.ok()) return Report(written);
  std::cout << "\n" << md << "\nvalidation: " << dir << "\n";
  RemoveStalePlot((fs::path(dir) / "validation_cdf.png").string());
  if (!vm.count("no-plots")) {
    std::vector<std::string> plot_args = {dir, "--out", (fs::path(dir) / "validation_cdf.png").string()};
    for (const LoadValidation& v : results) plot_args.push_back(v.label);
    RunPlotScript("validate", "validation.py", plot_args);
  }
  return kExitOk;
}

}  // namespace servelab
