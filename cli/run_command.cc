// `servelab run`: parse and validate an experiment, simulate it, write the result folder.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/config_yaml.h"
#include "cli/output_dir.h"
#include "sim/experiment.h"

namespace servelab {
namespace {

namespace po = boost::program_options;

int Report(const Status& status) {
  std::fprintf(stderr, "servelab: %s\n", status.message().c_str());
  return status.IsBadInput() ? kExitBadInput : kExitRuntimeError;
}

// A single progress line on a terminal, redrawn at most a few times per second.
class ProgressLine {
 public:
  void Update(const SimulationProgress& p) {
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

nlohmann::ordered_json ExperimentHeader(const PreparedExperiment& p) {
  const ExperimentConfig& c = p.config;
  nlohmann::ordered_json j;
  j["name"] = c.name;
  j["seed"] = c.seed;
  j["backend"] = "sim";
  j["model"] = c.model.name;
  j["gpu"] = c.hardware.gpu.name;
  j["tensor_parallel"] = c.hardware.tensor_parallel;
  j["pipeline_parallel"] = c.hardware.pipeline_parallel;
  j["replicas"] = c.cluster.replicas;
  j["policy"] = c.scheduler.policy.name;
  j["batching"] = std::string(NameOf(EnumNames<Batching>(kBatchingNames), c.scheduler.batching));
  j["cost_model"] = std::string(NameOf(EnumNames<CostModelType>(kCostModelNames), c.cost_model.type));
  j["kv_blocks_per_replica"] = p.capacity.num_gpu_blocks;
  j["block_size"] = p.capacity.block_size;
  j["max_model_len"] = p.simulation.max_model_len;
  return j;
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  po::options_description options("servelab run EXPERIMENT.yaml [options]");
  std::vector<std::string> sets;
  std::string out_dir;
  options.add_options()
      ("help,h", "show this help")
      ("set", po::value<std::vector<std::string>>(&sets)->composing(),
       "override a key: --set scheduler.max_num_seqs=64 (repeatable; the value is YAML)")
      ("out", po::value<std::string>(&out_dir), "result folder (default: output.dir, "
       "else results/<name>)")
      ("no-progress", "never draw the progress line");
  po::options_description hidden;
  std::string experiment_path;
  hidden.add_options()("experiment", po::value<std::string>(&experiment_path));
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("experiment", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "servelab run: " << e.what() << "\n\n" << options;
    return kExitBadInput;
  }
  if (vm.count("help")) {
    std::cout << options
              << "\nWrites requests.csv, steps.csv, summary.json, summary.md, trace.json and\n"
                 "config.resolved.yaml into the result folder. Exit status: 0 success,\n"
                 "2 bad input, 1 runtime failure.\n";
    return kExitOk;
  }
  if (experiment_path.empty()) {
    std::cerr << "servelab run: missing EXPERIMENT.yaml\n\n" << options;
    return kExitBadInput;
  }

  auto config = LoadExperiment(experiment_path, sets);
  if (!config.ok()) return Report(config.status());
  if (!out_dir.empty()) config->output.dir = out_dir;
  auto prepared = PrepareExperiment(*config);
  if (!prepared.ok()) return Report(prepared.status());

  auto dir = OutputDir::Open(config->output.dir);
  if (!dir.ok()) return Report(dir.status());
  MetricsSinks sinks;
  auto requests = (*dir)->Stream("requests.csv");
  if (!requests.ok()) return Report(requests.status());
  sinks.requests_csv = *requests;
  if (config->output.steps_csv) {
    auto steps = (*dir)->Stream("steps.csv");
    if (!steps.ok()) return Report(steps.status());
    sinks.steps_csv = *steps;
  }
  if (config->output.trace_json) {
    auto trace = (*dir)->Stream("trace.json");
    if (!trace.ok()) return Report(trace.status());
    sinks.trace_json = *trace;
    sinks.trace_max_steps = config->output.trace_max_steps;
  }

  ProgressLine progress;
  std::function<void(const SimulationProgress&)> on_progress;
  if (!vm.count("no-progress") && ::isatty(STDERR_FILENO)) {
    on_progress = [&progress](const SimulationProgress& p) { progress.Update(p); };
  }
  auto summary = RunSimulation(*prepared, sinks, on_progress);
  progress.Clear();
  if (!summary.ok()) return Report(summary.status());

  nlohmann::ordered_json json = ExperimentHeader(*prepared);
  const nlohmann::ordered_json metrics = summary->ToJson();
  for (const auto& [key, value] : metrics.items()) {
    if (!json.contains(key)) json[key] = value;
  }
  Status written = (*dir)->WriteFile("summary.json", json.dump(2) + "\n");
  if (written.ok()) written = (*dir)->WriteFile("summary.md", summary->ToMarkdown());
  if (written.ok()) written = (*dir)->WriteFile("config.resolved.yaml", EmitResolvedConfig(*config));
  if (written.ok()) written = (*dir)->Commit();
  if (!written.ok()) return Report(written);
  // A previous run's outputs that this run did not produce would mislead: remove them.
  for (const char* name : {"steps.csv", "trace.json"}) {
    const bool produced = std::string(name) == "steps.csv" ? config->output.steps_csv
                                                           : config->output.trace_json;
    if (!produced) {
      std::error_code ec;
      std::filesystem::remove(std::filesystem::path(config->output.dir) / name, ec);
    }
  }
  std::cout << summary->ToText() << "results: " << config->output.dir << "\n";
  return kExitOk;
}

}  // namespace servelab
