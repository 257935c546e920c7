#include "driver/result_folder.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "driver/config_yaml.h"
#include "driver/output_dir.h"

namespace servelab {
namespace {

// A single progress line on a terminal, redrawn at most a few times per second.
class ProgressLine {
 public:
  void Update(const DriverProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    std::fprintf(stderr, "\r  simulated %.1f s | arrived %lld | finished %lld | rejected %lld | steps %lld ",
                 ToSeconds(p.now), static_cast<long long>(p.arrived),
                 static_cast<long long>(p.finished), static_cast<long long>(p.rejected),
                 static_cast<long long>(p.steps));
    drawn_ = true;
  }
  void Clear() {
    if (drawn_) std::fputs("\r\033[K", stderr);
  }

 private:
  std::chrono::steady_clock::time_point last_{};
  bool drawn_ = false;
};

nlohmann::ordered_json ExperimentHeader(const ExperimentConfig& c, const ServedFacts& served) {
  nlohmann::ordered_json j;
  j["name"] = c.name;
  j["seed"] = c.seed;
  j["backend"] = std::string(NameOf(EnumNames<BackendKind>(kBackendNames), c.backend));
  j["model"] = c.model.name;
  j["gpu"] = c.hardware.gpu.name;
  j["tensor_parallel"] = c.hardware.tensor_parallel;
  j["pipeline_parallel"] = c.hardware.pipeline_parallel;
  j["replicas"] = c.cluster.replicas;
  j["policy"] = c.scheduler.policy.name;
  j["batching"] = std::string(NameOf(EnumNames<Batching>(kBatchingNames), c.scheduler.batching));
  j["cost_model"] = c.cost_model.name;
  if (!served.detail.empty()) j["backend_detail"] = served.detail;
  j["kv_blocks_per_replica"] = served.capacity.num_gpu_blocks;
  j["block_size"] = served.capacity.block_size;
  j["max_model_len"] = served.max_model_len;
  return j;
}

}  // namespace

StatusOr<RunSummary> RunToFolder(PreparedExperiment& experiment, const BackendFactory& backends,
                                 bool progress) {
  const ExperimentConfig config = experiment.config;
  auto dir = OutputDir::Open(config.output.dir);
  if (!dir.ok()) return dir.status();
  MetricsSinks sinks;
  auto requests = (*dir)->Stream("requests.csv");
  if (!requests.ok()) return requests.status();
  sinks.requests_csv = *requests;
  auto clients = (*dir)->Stream("clients.csv");
  if (!clients.ok()) return clients.status();
  sinks.clients_csv = *clients;
  if (config.output.steps_csv) {
    auto steps = (*dir)->Stream("steps.csv");
    if (!steps.ok()) return steps.status();
    sinks.steps_csv = *steps;
  }
  if (config.output.trace_json) {
    auto trace = (*dir)->Stream("trace.json");
    if (!trace.ok()) return trace.status();
    sinks.trace_json = *trace;
    sinks.trace_max_steps = config.output.trace_max_steps;
  }

  // The files written after the run, staged (and their names checked) before it.
  auto summary_json = (*dir)->Stream("summary.json");
  if (!summary_json.ok()) return summary_json.status();
  auto summary_md = (*dir)->Stream("summary.md");
  if (!summary_md.ok()) return summary_md.status();
  auto resolved = (*dir)->Stream("config.resolved.yaml");
  if (!resolved.ok()) return resolved.status();

  ProgressLine progress_line;
  std::function<void(const DriverProgress&)> on_progress;
  if (progress) {
    on_progress = [&progress_line](const DriverProgress& p) { progress_line.Update(p); };
  }
  auto outcome = RunExperiment(experiment, backends, sinks, on_progress);
  progress_line.Clear();
  if (!outcome.ok()) return outcome.status();
  const RunSummary& summary = outcome->summary;

  nlohmann::ordered_json json = ExperimentHeader(config, outcome->served);
  const nlohmann::ordered_json metrics = summary.ToJson();
  for (const auto& [key, value] : metrics.items()) {
    if (!json.contains(key)) json[key] = value;
  }
  **summary_json << json.dump(2) << "\n";
  **summary_md << summary.ToMarkdown();
  **resolved << EmitResolvedConfig(config);
  if (Status written = (*dir)->Commit(); !written.ok()) return written;
  // A previous run's outputs that this run did not produce would mislead: remove them.
  for (const char* name : {"steps.csv", "trace.json"}) {
    const bool produced = std::string(name) == "steps.csv" ? config.output.steps_csv
                                                           : config.output.trace_json;
    if (!produced) {
      std::error_code ec;
      std::filesystem::remove(std::filesystem::path(config.output.dir) / name, ec);
    }
  }
  return summary;
}

}  // namespace servelab
