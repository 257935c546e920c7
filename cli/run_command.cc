// `servelab run`: parse and validate an experiment, simulate it, write the result folder
// (cli/run_experiment.h).
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include <filesystem>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/run_experiment.h"
#include "cli/sweep_report.h"
#include "cli/sweep_runner.h"
#include "core/confidence.h"
#include "core/text.h"
#include "driver/config_yaml.h"
#include "driver/experiment.h"
#include "driver/output_dir.h"

namespace servelab {
namespace {

namespace po = boost::program_options;

int Report(const Status& status) { return ReportFailure("", status); }

// Replicates 1 .. N-1 of `config` (replicate 0 ran into the folder and is `first`) in
// memory on every core; then DIR/replicates.csv (one row per replicate: its seed and the
// metrics of sweep.csv) and DIR/replicates.md (each metric's mean and 95% interval),
// which is also returned.
StatusOr<std::string> RunReplicates(const ExperimentConfig& config, const RunSummary& first) {
  const int32_t n = config.replicates;
  std::vector<StatusOr<RunSummary>> runs(static_cast<size_t>(n), Internal("not run"));
  runs[0] = first;
  ParallelFor(static_cast<size_t>(n - 1), ResolveJobs(0), [&](size_t i) {
    const auto r = static_cast<int32_t>(i + 1);
    runs[static_cast<size_t>(r)] = RunExperimentInMemory(ReplicateOf(config, r));
  });
  Sweep table;
  table.axes.push_back(SweepAxis{"seed", {}, {}});
  for (int32_t r = 0; r < n; ++r) {
    if (!runs[static_cast<size_t>(r)].ok()) return runs[static_cast<size_t>(r)].status();
    table.axes[0].values.push_back(std::to_string(ReplicateSeed(config.seed, r)));
    SweepPoint row;
    row.index = {static_cast<size_t>(r)};
    row.folder = "replicate-" + std::to_string(r);
    table.points.push_back(std::move(row));
  }
  const struct {
    const char* name;
    double (*get)(const RunSummary&);
  } metrics[] = {
      {"output tok/s", [](const RunSummary& s) { return s.output_throughput; }},
      {"request throughput (req/s)", [](const RunSummary& s) { return s.request_throughput; }},
      {"TTFT p50 (s)", [](const RunSummary& s) { return s.ttft_s.p50; }},
      {"TTFT p99 (s)", [](const RunSummary& s) { return s.ttft_s.p99; }},
      {"TPOT p50 (s)", [](const RunSummary& s) { return s.tpot_s.p50; }},
      {"TPOT p99 (s)", [](const RunSummary& s) { return s.tpot_s.p99; }},
      {"E2E mean (s)", [](const RunSummary& s) { return s.e2e_s.mean; }},
      {"goodput (req/s)", [](const RunSummary& s) { return s.goodput; }},
      {"SLO attainment", [](const RunSummary& s) { return s.slo_attainment; }},
  };
  std::string md = "Over " + std::to_string(n) + " replicates (seeds in replicates.csv; the "
                   "folder's other files are replicate 0's): mean ± half width of the 95% "
                   "interval.\n\n| metric | mean | 95% interval |\n|---|---:|---:|\n";
  for (const auto& m : metrics) {
    std::vector<double> values;
    for (const auto& run : runs) values.push_back(m.get(*run));
    const Estimate e = MeanWithInterval(values);
    char row[160];
    std::snprintf(row, sizeof row, "| %s | %.6g | ± %.3g [%.6g, %.6g] |\n", m.name, e.mean,
                  e.half_width, e.low(), e.high());
    md += row;
  }
  auto folder = OutputDir::Open(config.output.dir);
  if (!folder.ok()) return folder.status();
  std::vector<PointOutcome> rows;
  for (const auto& run : runs) rows.push_back(OutcomeOf({run}));
  Status written = (*folder)->WriteFile("replicates.csv", SweepCsv(table, rows));
  if (written.ok()) written = (*folder)->WriteFile("replicates.md", md);
  if (written.ok()) written = (*folder)->Commit();
  if (!written.ok()) return written;
  return md;
}

}  // namespace

constexpr const char* kRunHelp =
    "\nWrites requests.csv, clients.csv, steps.csv, summary.json, summary.md,\n"
    "trace.json and config.resolved.yaml into the result folder. Exit status:\n"
    "0 success, 2 bad input, 1 runtime failure.\n";

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
      ("replicates", po::value<int>(),
       "run N replicates (seeds derived from the experiment's): replicates.csv and .md")
      ("no-progress", "never draw the progress line");
  std::string experiment_path;
  po::variables_map vm;
  if (auto exit = ParseExperimentCommandLine("run", args, options, kRunHelp, vm,
                                             experiment_path)) {
    return *exit;
  }

  if (vm.count("replicates")) sets.push_back("replicates=" + std::to_string(vm["replicates"].as<int>()));
  LoadNotes notes;
  auto config = LoadExperiment(experiment_path, sets, &notes);
  if (!config.ok()) return Report(config.status());
  if (notes.sweep_line > 0) {
    std::fprintf(stderr, "servelab run: note: %s:%d: the sweep block is ignored; this runs the "
                 "base experiment (`servelab sweep` runs the grid)\n",
                 Printable(experiment_path).c_str(), notes.sweep_line);
  }
  if (!out_dir.empty()) config->output.dir = out_dir;
  if (config->replicates > 1) {  // their tables' places, before any replicate runs
    if (Status places = CheckOutputPlaces(config->output.dir, {"replicates.csv", "replicates.md"});
        !places.ok()) {
      return Report(places);
    }
  }
  const bool progress = !vm.count("no-progress") && ::isatty(STDERR_FILENO);
  auto summary = RunExperimentToFolder(*config, config->output.dir, progress);
  if (!summary.ok()) return Report(summary.status());
  std::cout << summary->ToText();
  // An earlier replicated run's tables would describe other runs: gone with replicate 0's
  // files in place, whether or not the other replicates then succeed.
  for (const char* name : {"replicates.csv", "replicates.md"}) {
    std::error_code ec;
    std::filesystem::remove(std::filesystem::path(config->output.dir) / name, ec);
  }
  if (config->replicates > 1) {
    auto replicated = RunReplicates(*config, *summary);
    if (!replicated.ok()) return Report(replicated.status());
    std::cout << "\n" << *replicated << "\n";
  }
  std::cout << "results: " << config->output.dir << "\n";
  return kExitOk;
}

}  // namespace servelab
