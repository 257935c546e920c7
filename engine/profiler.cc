#include "engine/profiler.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "core/host_drift.h"
#include "core/percentile.h"
#include "core/rng.h"
#include "core/uniform_step.h"
#include "engine/engine_setup.h"
#include "engine/sampler.h"

namespace servelab {
namespace {

// Accumulates one step's op times.
class StepTimes final : public OpTimer {
 public:
  void Record(Op op, double seconds) override { seconds_[op] += seconds; }
  void RecordExperts(int32_t run, int32_t single_row) override {
    experts_run_ += run;
    single_row_experts_ += single_row;
    ++moe_layers_;
  }
  void Clear() {
    seconds_.clear();
    experts_run_ = single_row_experts_ = 0;
    moe_layers_ = 0;
  }
  const std::map<Op, double>& Seconds() const { return seconds_; }
  // The step's MoE layers' means; 0 when none counted.
  double ExpertsRun() const { return moe_layers_ > 0 ? experts_run_ / moe_layers_ : 0.0; }
  double SingleRowExperts() const {
    return moe_layers_ > 0 ? single_row_experts_ / moe_layers_ : 0.0;
  }

 private:
  std::map<Op, double> seconds_;
  double experts_run_ = 0, single_row_experts_ = 0;
  int32_t moe_layers_ = 0;
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

namespace {

// One configuration's step, built up front, and what its runs measured.
struct Timed {
  ProfilePoint c;
  std::unique_ptr<UniformStep> step;
  TokenStore tokens;
  std::map<Op, std::vector<double>> samples;
  std::vector<double> steps;
  double last_s = 0;  // its latest run's time, measured or not
  // The routing its MoE layers counted (the same every run: the same tokens).
  double experts_run = 0, single_row_experts = 0;
  // The CUDA graph its whole-step runs replayed (the same every run); none: op by op.
  std::optional<DecodeGraphRun> graph;
};

// Decodes timed one by one right after a prefill chunk (ProfileOptions::
// after_prefill_steps): two configurations of the grid, and each k-th decode's times.
struct AfterPrefillRun {
  Timed* chunk = nullptr;
  Timed* decode = nullptr;
  std::vector<std::vector<double>> after;  // [k - 1]: seconds, one a pass
};

// One experiment's engine (its model loaded, its runner made) and its configurations'
// steps.
struct Session {
  size_t index = 0;  // its experiment's
  std::shared_ptr<EngineModel> model;
  std::unique_ptr<ModelRunner> runner;
  ModelSpec spec;
  bool on_device = false;  // the runner samples (greedy) itself
  // Ops and whole steps in the same runs, unless timing ops changes how the runner runs a
  // step (CUDA: no decode graphs): then whole steps get untimed runs of their own.
  bool separate = false;
  StepTimes times;
  std::vector<std::unique_ptr<Timed>> timed;
  std::vector<AfterPrefillRun> after_prefill;
  bool full_grid = false;  // the grid, not given points or the host check
};

// `model`: the experiment's, already loaded; null: loaded here.
StatusOr<std::unique_ptr<Session>> Prepare(const ExperimentConfig& config, const ProfileOptions& options,
                                           std::shared_ptr<EngineModel> model) {
  if (config.backend != BackendKind::kEngine) {
    return InvalidArgument(config.Where("backend") + ": profile needs an engine experiment "
                           "(backend: engine)");
  }
  // The grid covers what the scheduler produces, and the runner is sized by it (the CUDA
  // runner's buffers): larger chunks or batches are the experiment's to allow.
  if (options.max_tokens > config.scheduler.max_num_batched_tokens) {
    return InvalidArgument("--max-tokens " + std::to_string(options.max_tokens) + ": above " +
                           config.Where("scheduler.max_num_batched_tokens") + " = " +
                           std::to_string(config.scheduler.max_num_batched_tokens));
  }
  if (options.max_batch > config.scheduler.max_num_seqs) {
    return InvalidArgument("--max-batch " + std::to_string(options.max_batch) + ": above " +
                           config.Where("scheduler.max_num_seqs") + " = " +
                           std::to_string(config.scheduler.max_num_seqs));
  }
  auto session = std::make_unique<Session>();
  if (model == nullptr) {
    auto loaded = EngineModel::Load(config);
    if (!loaded.ok()) return loaded.status();
    model = std::move(*loaded);
  }
  session->model = std::move(model);
  auto made = session->model->MakeRunner();
  if (!made.ok()) return made.status();
  session->runner = std::move(*made);
  const EngineModel& loaded = *session->model;
  ModelRunner& runner = *session->runner;
  session->spec = loaded.Config().spec;
  const ModelSpec& spec = session->spec;
  const KvCapacity capacity = runner.Capacity();
  const int32_t max_tokens =
      options.max_tokens > 0 ? options.max_tokens : config.scheduler.max_num_batched_tokens;
  const int32_t max_batch = options.max_batch > 0 ? options.max_batch : config.scheduler.max_num_seqs;
  // Like the two above, a longer context than the engine serves is an error, not a
  // silent clamp: the profile would lack what the flag asked for.
  if (options.max_context > loaded.MaxModelLen()) {
    return InvalidArgument("--max-context " + std::to_string(options.max_context) +
                           ": above the context the engine serves, " +
                           std::to_string(loaded.MaxModelLen()) + " (" +
                           config.Where("model") + ")");
  }
  const int32_t max_context = options.max_context > 0 ? options.max_context : loaded.MaxModelLen();
  auto fits = [&](const ProfilePoint& c) {
    return SequenceBlocks(c, capacity.block_size) * (c.decode ? c.tokens : 1) <= capacity.num_gpu_blocks;
  };
  std::vector<ProfilePoint> grid;
  std::vector<ProfilePoint> points = options.points;
  if (points.empty() && options.host_check) {
    // The host check's steps, each decode's batch halved until the KV pool holds it.
    for (ProfilePoint c : HostCheckPoints(max_tokens, max_batch, max_context)) {
      while (c.decode && c.tokens > 1 && !fits(c)) c.tokens /= 2;
      if (fits(c)) points.push_back(c);
    }
    if (points.empty()) return InvalidArgument("profile: the KV pool holds none of the host check's steps");
  }
  session->full_grid = points.empty();
  if (points.empty()) {
    grid = ProfileGrid(max_tokens, max_batch, max_context);
    std::erase_if(grid, [&](const ProfilePoint& c) { return !fits(c); });
  } else {
    for (const ProfilePoint& c : points) {
      const std::string what = std::string(c.decode ? "a decode of " : "a prefill chunk of ") +
                               std::to_string(c.tokens) + (c.decode ? " sequences" : " tokens") +
                               " after " + std::to_string(c.context) + " cached";
      if (c.tokens < 1 || c.context < 0 || c.tokens > (c.decode ? max_batch : max_tokens) ||
          int64_t{c.context} + (c.decode ? 1 : c.tokens) > max_context) {
        return InvalidArgument("profile: " + what + " is outside the experiment's limits (" +
                               std::to_string(max_tokens) + " tokens a chunk, " +
                               std::to_string(max_batch) + " sequences, context " +
                               std::to_string(max_context) + ")");
      }
      if (!fits(c)) return InvalidArgument("profile: " + what + " does not fit the KV pool");
      grid.push_back(c);
    }
  }

  session->on_device = runner.SamplesOnDevice(SamplingParams{});  // greedy: temperature 0
  session->separate = runner.ProfilesOps() && runner.OpTimerAltersSteps();
  Rng rng(static_cast<uint64_t>(config.seed), 0x50524F46);  // "PROF"
  for (const ProfilePoint& c : grid) {
    auto t = std::make_unique<Timed>();
    t->c = c;
    t->step = std::make_unique<UniformStep>(
        ShapeOf(c), 0, capacity.block_size, FirstBlock(grid, c, capacity.block_size, capacity.num_gpu_blocks),
        options.interleave_blocks);
    for (const Request& r : t->step->Requests()) {
      // Prompt and generated ids alike, drawn in position order.
      std::vector<int32_t> ids(static_cast<size_t>(r.NumTokens()));
      for (int32_t& id : ids) id = static_cast<int32_t>(rng.UniformInt(0, spec.vocab_size - 1));
      const auto prompt = ids.begin() + r.prompt_len;
      t->tokens.AddPrompt(r.id, std::vector<int32_t>(ids.begin(), prompt));
      for (auto id = prompt; id != ids.end(); ++id) t->tokens.Append(r.id, *id);
    }
    session->timed.push_back(std::move(t));
  }
  // The decodes after a chunk: the host check's chunk (or the grid's largest below it)
  // and one-sequence context, at 1, 4 and max_batch sequences, where the grid has them.
  if (options.after_prefill_steps > 0 && options.interleave && points.empty()) {
    const std::vector<ProfilePoint> check = HostCheckPoints(max_tokens, max_batch, max_context);
    const auto find = [&](const ProfilePoint& c) -> Timed* {
      for (const auto& t : session->timed) {
        if (t->c.decode == c.decode && t->c.tokens == c.tokens && t->c.context == c.context) return t.get();
      }
      return nullptr;
    };
    // The grid's chunk from position 0 closest to the host check's, not above it.
    Timed* chunk = nullptr;
    for (const auto& t : session->timed) {
      if (t->c.decode || t->c.context != 0 || t->c.tokens > check.front().tokens) continue;
      if (chunk == nullptr || t->c.tokens > chunk->c.tokens) chunk = t.get();
    }
    std::vector<int32_t> batches = {1, 4, max_batch};
    std::sort(batches.begin(), batches.end());
    batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
    for (const int32_t b : batches) {
      Timed* decode = find(ProfilePoint{true, b, check.back().context});
      if (chunk == nullptr || decode == nullptr) continue;
      AfterPrefillRun run;
      run.chunk = chunk;
      run.decode = decode;
      run.after.resize(static_cast<size_t>(options.after_prefill_steps));
      session->after_prefill.push_back(std::move(run));
    }
  }
  return session;
}

// Times every session's configurations: per session, ops and whole steps in the same
// runs or (Session::separate) in runs of each kind; in passes (options.interleave), each
// pass over every session's grid in turn, so a change of the host's speed falls on every
// session alike; else each configuration's runs back to back, session after session.
// `log`, when given, gets every measured run in the order they ran, with the samples it
// wrote (ProfileOptions::drift_window).
Status Measure(std::span<const std::unique_ptr<Session>> sessions, const ProfileOptions& options,
               std::vector<LoggedRun>* log) {
  const SamplingParams greedy;
  std::vector<float> logits;
  std::vector<int32_t> ids;
  size_t most_seqs = 0;
  for (const auto& s : sessions) {
    for (const auto& t : s->timed) most_seqs = std::max(most_seqs, t->step->Plan().seqs.size());
  }
  const std::vector<double> no_draws(most_seqs, 0.0);  // greedy
  Sampler sampler;
  // One timed run of `t`; `time_ops` and `time_step` say what it measures.
  auto time_one = [&](Session& s, Timed& t, bool measured, bool time_ops, bool time_step) -> Status {
    const int32_t seqs = static_cast<int32_t>(t.step->Plan().seqs.size());
    s.times.Clear();
    const int64_t start = NowNs();
    if (s.on_device) {
      const std::span<const double> uniforms(no_draws.data(), static_cast<size_t>(seqs));
      SERVELAB_RETURN_IF_ERROR(s.runner->ExecuteAndSample(t.step->Plan(), t.tokens, greedy, uniforms, ids));
    } else {
      SERVELAB_RETURN_IF_ERROR(s.runner->Execute(t.step->Plan(), t.tokens, logits));
      const int64_t sample_start = NowNs();
      const auto vocab = static_cast<size_t>(s.spec.vocab_size);
      for (int32_t e = 0; e < seqs; ++e) {
        sampler.Sample(std::span<const float>(logits.data() + e * vocab, vocab), greedy, e, 0);
      }
      s.times.Record(Op::kSampling, static_cast<double>(NowNs() - sample_start) * 1e-9);
    }
    const double step = static_cast<double>(NowNs() - start) * 1e-9;
    t.last_s = step;
    if (!measured) return Status::Ok();
    if (time_step) {
      t.steps.push_back(step);
      t.graph = s.runner->LastDecodeGraph();
    }
    if (!time_ops) return Status::Ok();
    t.experts_run = s.times.ExpertsRun();
    t.single_row_experts = s.times.SingleRowExperts();
    for (const auto& [op, seconds] : s.times.Seconds()) {
      const bool per_layer = InfoOf(op).scope == OpScope::kPerLayer;
      t.samples[op].push_back(per_layer ? seconds / s.spec.num_hidden_layers : seconds);
    }
    return Status::Ok();
  };
  // At least `warmup` runs and `warmup_ms` of them: after a large step the host (caches,
  // clocks) takes milliseconds to settle into a small one's steady state.
  auto warm_up = [&](Session& s, Timed& t, bool time_ops, bool time_step) -> Status {
    const int64_t until = NowNs() + static_cast<int64_t>(options.warmup_ms * 1e6);
    for (int32_t run = 0; run < options.warmup || NowNs() < until; ++run) {
      SERVELAB_RETURN_IF_ERROR(time_one(s, t, false, time_ops, time_step));
    }
    return Status::Ok();
  };
  // Back-to-back runs of `t` for about options.settle_ms, whole runs only.
  auto settle = [&](Session& s, Timed& t, bool time_ops, bool time_step) -> Status {
    const int32_t runs = SettleRuns(options.settle_ms, t.last_s);
    for (int32_t run = 0; run < runs; ++run) SERVELAB_RETURN_IF_ERROR(time_one(s, t, false, time_ops, time_step));
    return Status::Ok();
  };
  // Progress in measured runs (at most 2 x 100,000 repeats x the grids' steps).
  int64_t total = 0;
  for (const auto& s : sessions) {
    total += int64_t{s->separate ? 2 : 1} * options.repeats * static_cast<int64_t>(s->timed.size());
    total += int64_t{options.repeats} * options.after_prefill_steps * static_cast<int64_t>(s->after_prefill.size());
  }
  int64_t done = 0;
  // Rows for the log: a grid configuration's runs (two rows when ops and whole steps are
  // timed in runs apart, which run at different speeds), and each decode after a chunk
  // by its place.
  std::map<const void*, int32_t> row_of;
  auto row = [&](const void* what) { return row_of.try_emplace(what, static_cast<int32_t>(row_of.size())).first->second; };
  // The last sample of each list, as a measured run just wrote it.
  auto last = [](std::vector<double>& values) { return SampleRef{&values, values.size() - 1}; };
  auto measure = [&](Session& s, Timed& t, bool time_ops, bool time_step) -> Status {
    if (options.on_measure) options.on_measure(s.index, t.c);
    SERVELAB_RETURN_IF_ERROR(time_one(s, t, true, time_ops, time_step));
    if (log != nullptr) {
      LoggedRun run;
      run.row = row(time_step ? static_cast<const void*>(&t.steps) : static_cast<const void*>(&t.samples));
      run.seconds = t.last_s;
      if (time_step) run.samples.push_back(last(t.steps));
      if (time_ops) {
        for (const auto& [op, seconds] : s.times.Seconds()) run.samples.push_back(last(t.samples.at(op)));
      }
      log->push_back(std::move(run));
    }
    if (options.on_progress) options.on_progress(++done, total);
    return Status::Ok();
  };
  // A decode settled, a prefill chunk, then the decode's next runs, each timed.
  auto after_prefill = [&](Session& s, AfterPrefillRun& run, bool time_ops) -> Status {
    SERVELAB_RETURN_IF_ERROR(settle(s, *run.decode, time_ops, true));
    SERVELAB_RETURN_IF_ERROR(time_one(s, *run.chunk, false, time_ops, true));
    for (std::vector<double>& times : run.after) {
      SERVELAB_RETURN_IF_ERROR(time_one(s, *run.decode, false, time_ops, true));
      times.push_back(run.decode->last_s);
      if (log != nullptr) log->push_back(LoggedRun{row(&times), run.decode->last_s, {last(times)}});
      if (options.on_progress) options.on_progress(++done, total);
    }
    return Status::Ok();
  };
  for (int32_t kind = 0; kind < 2; ++kind) {
    // The sessions with runs of this kind, and what those runs time.
    struct Runs {
      Session* s;
      bool time_ops, time_step;
    };
    std::vector<Runs> runs;
    for (const auto& s : sessions) {
      const bool time_ops = s->runner->ProfilesOps() && kind == 0;
      const bool time_step = s->separate ? kind == 1 : kind == 0;
      s->runner->SetOpTimer(time_ops ? &s->times : nullptr);
      if (time_ops || time_step) runs.push_back(Runs{s.get(), time_ops, time_step});
    }
    if (options.interleave) {
      // Each configuration's warm-up runs back to back, then `repeats` passes over the
      // grids in their order, so every median spans the whole profile; in a pass, each
      // measured run follows its configuration's settling runs.
      for (const Runs& r : runs) {
        for (const auto& t : r.s->timed) SERVELAB_RETURN_IF_ERROR(warm_up(*r.s, *t, r.time_ops, r.time_step));
      }
      for (int32_t pass = 0; pass < options.repeats; ++pass) {
        for (const Runs& r : runs) {
          for (const auto& t : r.s->timed) {
            SERVELAB_RETURN_IF_ERROR(settle(*r.s, *t, r.time_ops, r.time_step));
            SERVELAB_RETURN_IF_ERROR(measure(*r.s, *t, r.time_ops, r.time_step));
          }
          if (!r.time_step) continue;
          for (AfterPrefillRun& run : r.s->after_prefill) {
            SERVELAB_RETURN_IF_ERROR(after_prefill(*r.s, run, r.time_ops));
          }
        }
      }
    } else {
      for (const Runs& r : runs) {
        for (const auto& t : r.s->timed) {
          SERVELAB_RETURN_IF_ERROR(warm_up(*r.s, *t, r.time_ops, r.time_step));
          for (int32_t run = 0; run < options.repeats; ++run) {
            SERVELAB_RETURN_IF_ERROR(measure(*r.s, *t, r.time_ops, r.time_step));
          }
        }
      }
    }
  }
  for (const auto& s : sessions) s->runner->SetOpTimer(nullptr);
  return Status::Ok();
}

// A session's rows: per configuration, each op's and the whole step's median, p10 and p90.
std::vector<ProfileRow> Rows(const Session& s, const ProfileOptions& options) {
  std::vector<ProfileRow> rows;
  const std::string device = s.model->Device();
  for (const auto& t : s.timed) {
    auto row = [&](const std::string& op, std::vector<double> values) {
      std::sort(values.begin(), values.end());
      ProfileRow r;
      r.device = device;
      r.shape = s.spec;
      r.op = op;
      r.tokens = t->c.tokens;
      r.batch = static_cast<int64_t>(t->step->Plan().seqs.size());
      r.context = t->c.context;
      r.tp = 1;
      r.median_ms = 1e3 * PercentileOfSorted(values, 50);
      r.p10_ms = 1e3 * PercentileOfSorted(values, 10);
      r.p90_ms = 1e3 * PercentileOfSorted(values, 90);
      r.repeats = options.repeats;
      if (op == InfoOf(Op::kMoeMlp).name || op == "step") {
        r.experts_run = t->experts_run;
        r.single_row_experts = t->single_row_experts;
      }
      const bool graph = op == "step" && t->graph.has_value();
      r.graph_rows = graph ? t->graph->rows : 0;
      r.graph_context = graph ? t->graph->context_bucket : 0;
      rows.push_back(std::move(r));
    };
    for (const auto& [op, values] : t->samples) row(std::string(InfoOf(op).name), values);
    row("step", t->steps);
  }
  for (const AfterPrefillRun& run : s.after_prefill) {
    for (size_t k = 0; k < run.after.size(); ++k) {
      std::vector<double> values = run.after[k];
      std::sort(values.begin(), values.end());
      ProfileRow r;
      r.device = device;
      r.shape = s.spec;
      r.op = kStepAfterPrefill;
      r.tokens = run.decode->c.tokens;
      r.batch = static_cast<int64_t>(run.decode->step->Plan().seqs.size());
      r.context = run.decode->c.context;
      r.median_ms = 1e3 * PercentileOfSorted(values, 50);
      r.p10_ms = 1e3 * PercentileOfSorted(values, 10);
      r.p90_ms = 1e3 * PercentileOfSorted(values, 90);
      r.repeats = options.repeats;
      r.after_prefill = static_cast<int32_t>(k + 1);
      r.prefill_before = run.chunk->c.tokens;
      const std::optional<DecodeGraphRun>& graph = run.decode->graph;  // as its grid row ran
      r.graph_rows = graph ? graph->rows : 0;
      r.graph_context = graph ? graph->context_bucket : 0;
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

// Divides each logged run's samples by the host's speed around it (DivideByHostSpeed,
// options.drift_window a window), saying what it took out in `drift`.
void TakeOutDrift(std::span<const std::unique_ptr<Session>> sessions, const ProfileOptions& options,
                  std::span<const LoggedRun> log, ProfileDrift& drift) {
  drift.window = options.drift_window;
  for (const auto& s : sessions) drift.before.push_back(SpreadOf(Rows(*s, options)));
  std::vector<double> factors = DivideByHostSpeed(log, options.drift_window);
  if (factors.empty()) return;
  std::sort(factors.begin(), factors.end());
  drift.p10 = PercentileOfSorted(factors, 10);
  drift.p50 = PercentileOfSorted(factors, 50);
  drift.p90 = PercentileOfSorted(factors, 90);
}

// Every experiment's session, prepared (all checked before any is measured), then measured.
// `model`: one experiment's model, already loaded; null: each loaded here. The host's
// drift is taken out in passes over full grids (ProfileOptions::drift_window), and said
// in `drift` when given.
StatusOr<std::vector<std::unique_ptr<Session>>> Measured(std::span<const ExperimentConfig> configs,
                                                         const ProfileOptions& options,
                                                         std::shared_ptr<EngineModel> model = nullptr,
                                                         ProfileDrift* drift = nullptr) {
  SERVELAB_RETURN_IF_ERROR(CheckProfileOptions(options));
  if (configs.empty() || configs.size() > static_cast<size_t>(kMaxProfileExperiments)) {
    return InvalidArgument("profile: " + std::to_string(configs.size()) + " experiments: from 1 to " +
                           std::to_string(kMaxProfileExperiments) + " at once");
  }
  SERVELAB_CHECK(model == nullptr || configs.size() == 1);
  std::vector<std::unique_ptr<Session>> sessions;
  for (const ExperimentConfig& config : configs) {
    auto session = Prepare(config, options, model);
    if (!session.ok()) return session.status();
    (*session)->index = sessions.size();
    sessions.push_back(std::move(*session));
  }
  const bool full_grids = std::all_of(sessions.begin(), sessions.end(), [](const auto& s) { return s->full_grid; });
  const bool drifts = options.interleave && options.drift_window > 0 && full_grids;
  std::vector<LoggedRun> log;
  SERVELAB_RETURN_IF_ERROR(Measure(sessions, options, drifts ? &log : nullptr));
  ProfileDrift said;
  if (drifts) TakeOutDrift(sessions, options, log, said);
  if (drift != nullptr) *drift = std::move(said);
  return sessions;
}

}  // namespace

StatusOr<std::vector<std::vector<ProfileRow>>> ProfileEngines(std::span<const ExperimentConfig> configs,
                                                              const ProfileOptions& options, ProfileDrift* drift) {
  auto sessions = Measured(configs, options, nullptr, drift);
  if (!sessions.ok()) return sessions.status();
  std::vector<std::vector<ProfileRow>> rows;
  for (const auto& s : *sessions) rows.push_back(Rows(*s, options));
  return rows;
}

StatusOr<std::vector<ProfileRow>> ProfileEngine(const ExperimentConfig& config,
                                                const ProfileOptions& options) {
  auto rows = ProfileEngines(std::span<const ExperimentConfig>(&config, 1), options);
  if (!rows.ok()) return rows.status();
  return std::move(rows->front());
}

StatusOr<std::vector<TimedStep>> TimeSteps(const ExperimentConfig& config, const ProfileOptions& options,
                                           std::shared_ptr<EngineModel> model) {
  auto sessions = Measured(std::span<const ExperimentConfig>(&config, 1), options, std::move(model));
  if (!sessions.ok()) return sessions.status();
  std::vector<TimedStep> steps;
  for (const auto& t : sessions->front()->timed) {
    std::vector<double> values = t->steps;
    std::sort(values.begin(), values.end());
    steps.push_back(TimedStep{t->c, PercentileOfSorted(values, 50)});
  }
  return steps;
}

}  // namespace servelab
