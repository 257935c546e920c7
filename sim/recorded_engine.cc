#include "sim/recorded_engine.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "core/read_file.h"
#include "driver/trace_reader.h"
#include "sim/sim_backend.h"
#include "sim/validation.h"
#include "sim/validation_backends.h"

namespace servelab {
namespace {

namespace fs = std::filesystem;

// A step of 10^7 ms (near three hours) is longer than any engine step: a bound that keeps
// the nanoseconds within TimeNs.
constexpr double kMaxStepMs = 1e7;

// "12 sequences (140 new tokens, 3,000 cached)"
std::string Said(int32_t seqs, int64_t tokens, int64_t context) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%d sequence%s (%lld new token%s, %lld cached)", seqs, seqs == 1 ? "" : "s",
                static_cast<long long>(tokens), tokens == 1 ? "" : "s", static_cast<long long>(context));
  return buf;
}

// A graph_measured cell: "ROWSxCONTEXT_BUCKET" (each in [1, INT32_MAX]) or empty (op by op).
bool ParseGraph(std::string_view cell, std::optional<DecodeGraphRun>& graph) {
  graph.reset();
  if (cell.empty()) return true;
  const size_t x = cell.find('x');
  DecodeGraphRun g;
  if (x == std::string_view::npos || !ParseCount(cell.substr(0, x), g.rows) ||
      !ParseCount(cell.substr(x + 1), g.context_bucket) || g.rows < 1 || g.context_bucket < 1) {
    return false;
  }
  graph = g;
  return true;
}

StatusOr<std::vector<RecordedStep>> ReadSteps(const std::string& path, bool& graphs_recorded) {
  auto file = LineFile::Open(path);
  if (!file.ok()) return file.status();
  std::string line;
  if (!file->Next(line)) return InvalidArgument(path + ": empty (no header)");
  std::vector<std::string_view> header;
  SplitCsvLine(line, header);
  size_t at[4];
  const char* names[4] = {"tokens", "seqs", "context_tokens", "measured_ms"};
  for (size_t c = 0; c < 4; ++c) {
    auto column = FindColumn(header, names[c], path, 1);
    if (!column.ok()) return column.status();
    at[c] = *column;
  }
  // The graph each step ran as: recordings made since validate wrote it.
  const auto graph_at = std::find(header.begin(), header.end(), "graph_measured");
  graphs_recorded = graph_at != header.end();
  const auto graph_column = static_cast<size_t>(graph_at - header.begin());
  std::vector<RecordedStep> steps;
  std::vector<std::string_view> fields;
  while (file->Next(line)) {
    if (line.empty()) continue;
    SplitCsvLine(line, fields);
    const int64_t n = file->line_number();
    if (fields.size() > header.size()) {
      return LineError(path, n, std::to_string(fields.size()) + " fields, more than the header's " +
                                    std::to_string(header.size()));
    }
    RecordedStep s;
    s.line = n;
    // tokens and seqs: 1 to INT32_MAX; context_tokens, a sum over the step's sequences,
    // 0 to INT64_MAX.
    int64_t counts[3] = {0, 0, 0};
    for (size_t c = 0; c < 3; ++c) {
      if (at[c] >= fields.size()) return LineError(path, n, "missing field", names[c]);
      const std::string_view f = fields[at[c]];
      const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), counts[c]);
      const int64_t least = c < 2 ? 1 : 0, most = c < 2 ? INT32_MAX : INT64_MAX;
      if (ec != std::errc() || end != f.data() + f.size() || counts[c] < least || counts[c] > most) {
        return LineError(path, n, "expected a whole number in [" + std::to_string(least) + ", " +
                                      std::to_string(most) + "], got '" + std::string(f) + "'", names[c]);
      }
    }
    s.tokens = static_cast<int32_t>(counts[0]);
    s.seqs = static_cast<int32_t>(counts[1]);
    s.context_tokens = counts[2];
    double ms = 0;
    if (at[3] >= fields.size()) return LineError(path, n, "missing field", names[3]);
    if (!ParseDouble(fields[at[3]], ms) || !(ms > 0) || ms > kMaxStepMs) {
      return LineError(path, n, "expected a time in (0, 10000000] ms, got '" + std::string(fields[at[3]]) + "'",
                       names[3]);
    }
    s.elapsed = static_cast<TimeNs>(std::llround(ms * 1e6));
    if (graphs_recorded) {
      if (graph_column >= fields.size()) return LineError(path, n, "missing field", "graph_measured");
      if (!ParseGraph(fields[graph_column], s.graph)) {
        return LineError(path, n,
                         "expected ROWSxCONTEXT_BUCKET (each a whole number in [1, 2147483647]) or nothing, got '" +
                             std::string(fields[graph_column]) + "'",
                         "graph_measured");
      }
    }
    steps.push_back(s);
  }
  if (steps.empty()) return InvalidArgument(path + ": no steps recorded");
  return steps;
}

// A whole number in [1, INT32_MAX] at `key` of the summary.
StatusOr<int32_t> PositiveInt(const nlohmann::json& summary, const char* key, const std::string& path) {
  const auto it = summary.find(key);
  if (it == summary.end() || !it->is_number_integer() || it->get<int64_t>() < 1 ||
      it->get<int64_t>() > INT32_MAX) {
    return InvalidArgument(path + ": " + key + ": expected a whole number in [1, 2147483647]");
  }
  return static_cast<int32_t>(it->get<int64_t>());
}

// The recording as the engine: the simulator's backend, every compute step's time the
// recording's next one (WrappingBackend forwards the rest but prediction: the engine
// predicts nothing).
class RecordedEngineBackend final : public validation_internal::WrappingBackend {
 public:
  RecordedEngineBackend(std::unique_ptr<Backend> sim, std::shared_ptr<const EngineRecording> recording)
      : WrappingBackend(std::move(sim)), recording_(std::move(recording)) {}

  std::string_view Name() const override { return "engine-recorded"; }
  std::optional<TimeNs> PredictPrefillTime(int32_t) const override { return std::nullopt; }
  std::string Describe() const override { return "played back from " + recording_->steps_path; }
  std::optional<ExpertsRun> Routing(const StepPlan&) const override { return std::nullopt; }
  std::optional<DecodeGraphRun> DecodeGraph(const StepPlan&) const override { return graph_; }
  bool ReportsDecodeGraphs() const override { return recording_->graphs_recorded; }

  StatusOr<StepResult> Execute(const StepPlan& plan) override {
    int64_t tokens = 0, context = 0;
    for (const ScheduledRequest& seq : plan.seqs) {
      tokens += seq.num_new_tokens;
      context += seq.num_computed_tokens;
    }
    auto result = inner().Execute(plan);
    if (!result.ok() || tokens == 0) return result;  // swap copies alone: never recorded
    const auto seqs = static_cast<int32_t>(plan.seqs.size());
    const std::vector<RecordedStep>& steps = recording_->steps;
    if (next_ >= steps.size()) {
      return InvalidArgument(recording_->steps_path + ": the recording ends after " +
                             std::to_string(steps.size()) + " steps; this run goes on with " +
                             Said(seqs, tokens, context) + ": not the recorded requests or schedule");
    }
    const RecordedStep& r = steps[next_];
    if (r.seqs != seqs || r.tokens != tokens || r.context_tokens != context) {
      return LineError(recording_->steps_path, r.line,
                       "step " + std::to_string(next_ + 1) + " recorded " + Said(r.seqs, r.tokens, r.context_tokens) +
                           ", this run scheduled " + Said(seqs, tokens, context) +
                           ": not the recorded requests or schedule (the experiment, its seed, "
                           "policy or KV pool differ, or the engine ran on a wall clock or stopped on "
                           "a stop token)");
    }
    ++next_;
    graph_ = r.graph;
    result->elapsed = r.elapsed;
    result->stages.clear();
    return result;
  }

 private:
  std::shared_ptr<const EngineRecording> recording_;
  size_t next_ = 0;
  std::optional<DecodeGraphRun> graph_;  // the last step's, as recorded
};

}  // namespace

StatusOr<EngineRecording> ReadEngineRecording(const std::string& load_dir) {
  EngineRecording recording;
  recording.steps_path = (fs::path(load_dir) / "steps_compared.csv").string();
  auto steps = ReadSteps(recording.steps_path, recording.graphs_recorded);
  if (!steps.ok()) return steps.status();
  recording.steps = std::move(steps).value();
  std::string summary_path = (fs::path(load_dir) / "engine" / "summary.json").string();
  std::error_code ec;
  if (!fs::exists(summary_path, ec)) {
    const std::string beside = (fs::path(load_dir) / "engine_summary.json").string();
    if (fs::exists(beside, ec)) summary_path = beside;
  }
  auto text = ReadRegularFile(summary_path, kMaxConfigFileBytes, "engine's summary");
  if (!text.ok()) return text.status();
  nlohmann::json summary;
  try {
    summary = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::parse_error& e) {
    return InvalidArgument(summary_path + ": not JSON (at byte " + std::to_string(e.byte) + ")");
  }
  if (!summary.is_object()) return InvalidArgument(summary_path + ": not a JSON object (a run's summary.json)");
  if (const auto b = summary.find("backend"); b == summary.end() || !b->is_string() || *b != "engine") {
    return InvalidArgument(summary_path + ": backend: expected \"engine\" (the engine's run of the load)");
  }
  if (const auto r = summary.find("replicas"); r != summary.end() && (!r->is_number_integer() || *r != 1)) {
    return InvalidArgument(summary_path + ": replicas: a recording plays back one replica's steps "
                           "(steps_compared.csv does not say which replica ran a step)");
  }
  auto blocks = PositiveInt(summary, "kv_blocks_per_replica", summary_path);
  if (!blocks.ok()) return blocks.status();
  auto context = PositiveInt(summary, "max_model_len", summary_path);
  if (!context.ok()) return context.status();
  auto block_size = PositiveInt(summary, "block_size", summary_path);
  if (!block_size.ok()) return block_size.status();
  recording.num_gpu_blocks = *blocks;
  recording.max_model_len = *context;
  recording.block_size = *block_size;
  recording.summary_path = summary_path;
  return recording;
}

StatusOr<BackendFactory> MakeRecordedEngineFactory(const ExperimentConfig& config,
                                                   std::shared_ptr<const EngineRecording> recording) {
  if (config.cluster.replicas != 1) {
    return InvalidArgument(config.Where("cluster.replicas") + ": a recording plays back one replica's steps");
  }
  if (config.hardware.pipeline_parallel != 1) {
    return InvalidArgument(config.Where("hardware.pipeline_parallel") +
                           ": a recording keeps no pipeline stages' times");
  }
  if (config.has_engine && config.engine.clock != EngineClock::kVirtual) {
    return InvalidArgument(config.Where("engine.clock") + ": a recording plays back on clock: virtual "
                           "(on a wall clock the engine's time between steps is in its schedule, "
                           "and no recording has it)");
  }
  if (config.scheduler.block_size != recording->block_size) {
    return InvalidArgument(config.Where("scheduler.block_size") + ": " +
                           std::to_string(config.scheduler.block_size) + ", the recording's engine ran " +
                           std::to_string(recording->block_size) + " (" + recording->summary_path + ")");
  }
  KvCapacity capacity;
  capacity.num_gpu_blocks = recording->num_gpu_blocks;
  capacity.block_size = recording->block_size;
  ExperimentConfig sim_config = SimulatedTwin(config, capacity, recording->max_model_len);
  auto sims = MakeSimBackendFactory(sim_config);
  if (!sims.ok()) return sims.status();
  return BackendFactory([sims = *sims, recording](int32_t replica) -> StatusOr<std::unique_ptr<Backend>> {
    auto sim = sims(replica);
    if (!sim.ok()) return sim.status();
    return std::unique_ptr<Backend>(std::make_unique<RecordedEngineBackend>(std::move(sim).value(), recording));
  });
}

}  // namespace servelab
